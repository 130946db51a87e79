"""The riskapi command line, run as a real process against its own database."""

import json
import os
import subprocess
import sys

import httpx

from tests.conftest import ServerThread, free_port


def run(db_url, *args):
    env = {**os.environ, "DATABASE_URL": db_url}
    out = subprocess.run(
        [sys.executable, "-m", "riskapi.cli", *args], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_agency_token_risk_then_the_token_works(tmp_path):
    url = f"sqlite:///{tmp_path}/cli.db"
    run(url, "db", "upgrade")
    agency = run(url, "agency", "create", "--name", "Acme", "--webhook-limit", "3")
    assert agency["name"] == "Acme" and agency["webhook_limit"] == 3 and len(agency["uuid"]) == 36
    token = run(url, "token", "create", "--agency", agency["uuid"])
    assert token["agency"] == agency["uuid"] and len(token["token"]) > 30
    risk = run(url, "risk", "create", "--agency", agency["uuid"], "--type", "personal", "--name", "Home")
    assert risk["type"] == "personal" and risk["agency"] == agency["uuid"]
    stored = subprocess.run(["grep", "-c", token["token"], f"{tmp_path}/cli.db"], capture_output=True, text=True)
    assert stored.stdout.strip() == "0"  # only the hash is stored

    import models
    from riskapi.app import create_app
    from riskapi.config import Settings

    try:
        app = create_app(Settings(database_url=url, validate_responses=True))
        with ServerThread(app, free_port()) as server:
            response = httpx.get(
                f"{server.url}/api/v1/risks/{risk['uuid']}/data/drivers",
                headers={"Authorization": f"Bearer {token['token']}"},
            )
            assert response.status_code == 200 and response.json()["data"] == []
    finally:
        models.bind(os.environ["DATABASE_URL"])
