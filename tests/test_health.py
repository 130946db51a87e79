"""Liveness and readiness probes: no token, and a clear 503 naming the dependency that is down."""

import dataclasses

import httpx

import models
from api.app import create_app
from toolkit.serving import ServerThread, free_port


def probe(settings, path: str, restore: str) -> httpx.Response:
    """Serve an app with these settings on a port of its own and GET one probe; bind the test database again."""
    try:
        with ServerThread(create_app(settings), free_port()) as other:
            return httpx.get(other.url + "/api/v1" + path, timeout=30)
    finally:
        models.bind(restore)


def test_healthz_and_readyz_answer_without_a_token(client, settings):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok", "checks": {"database": "ok", "redis": "ok" if settings.redis_url else "unconfigured"}}
    assert client.get("/healthz", params={"verbose": 1}).status_code == 422


def test_readyz_names_redis_when_it_does_not_answer(server, settings, redis_url):
    up = probe(dataclasses.replace(settings, redis_url=redis_url), "/readyz", settings.database_url)
    assert up.status_code == 200 and up.json()["checks"]["redis"] == "ok"
    down = dataclasses.replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    response = probe(down, "/readyz", settings.database_url)
    assert response.status_code == 503
    assert response.json() == {"message": "Not ready: redis.", "status": 503, "checks": {"database": "ok", "redis": "down"}}
    assert response.headers["Retry-After"] == "1"
    assert probe(down, "/healthz", settings.database_url).status_code == 200


def test_readyz_names_the_database_when_it_does_not_answer(server, settings, tmp_path):
    if settings.database_url.startswith("sqlite"):
        url = "sqlite:///" + str(tmp_path / "missing-dir" / "none.db")
    else:
        url = "postgresql://postgres@127.0.0.1:1/nowhere"
    down = dataclasses.replace(settings, database_url=url, redis_url="")
    response = probe(down, "/readyz", settings.database_url)
    assert response.status_code == 503, response.text
    assert response.json()["checks"] == {"database": "down", "redis": "unconfigured"}
    assert response.headers["Retry-After"] == "1"  # the probe asks again in a second
    assert probe(down, "/healthz", settings.database_url).status_code == 200
