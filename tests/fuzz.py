"""Run Schemathesis over every operation of the spec against the real app (`tox -e fuzz`).

Seeds a fresh database with a tenant and some risk data, serves the app on a free
loopback port, and runs every check with a fixed seed; exits with Schemathesis' code.

Why the CLI and not Schemathesis' pytest integration: the CLI runs the examples, coverage,
fuzzing and stateful phases in one run, and links it learns from `Location` headers in the
earlier phases feed the stateful one; the pytest integration makes each phase a test of its
own without that hand-over. Its documented configuration is a schemathesis.toml, written here.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import httpx

import models
from riskapi.config import Settings
from tests.support import make_tenant
from toolkit.serving import ServerThread, free_port
from toolkit.tenants import items, reset_database


def seed(base: str, tenant) -> dict:
    """Create objects that the fuzzed operations can find, and return path parameters."""
    h = tenant.headers
    with httpx.Client(base_url=base, headers=h, timeout=30) as http:
        http.post(tenant.url("/vehicles"), json=items("vehicle", {"make": "Ford"}, {}))
        premise = http.post(tenant.url("/premises"), json=items("premise", {"city": "Austin"})).json()["data"][0]
        http.post(tenant.url("/buildings"), json=items("building", {"premise": premise["uuid"]}))
        http.post(tenant.url("/drivers"), json=items("driver", {"first_name": "Ann"}, {"last_name": "Lee"}))
        hook = {"type": "custom", "url": "https://hooks.example.com/riskapi", "events": ["driver.created"]}
        webhook = http.post("/webhooks", json=items("webhook", hook)).json()["data"][0]["uuid"]
        delivery = http.post(f"/webhooks/{webhook}/ping").json()["delivery"]
    # Precognition-Validate-Only deliberately lets a dry-run pass with errors outside the
    # selected fields; fuzzing it with random paths would call those passes "accepted
    # invalid data". These name every top-level field of every body (POST /events has all
    # three), so dry-runs are checked in full.
    return {
        "path.risk": tenant.risk,
        "path.webhook": webhook,
        "path.delivery": delivery,
        "header.Precognition-Validate-Only": "event,data,channels",
    }


def config(token: str, parameters: dict, max_examples: int) -> str:
    """Write a schemathesis.toml for this run and return its path."""
    lines = [
        "[generation]",
        f"max-examples = {max_examples}",
        "",
        "[headers]",
        f'Authorization = "Bearer {token}"',
        "",
        "[parameters]",
        *[f'"{key}" = "{value}"' for key, value in parameters.items()],
        "",
        # Schema-valid data may still break rules no schema can state: unique numbers,
        # references and UUIDs that must exist in the risk profile, signed cursors, the
        # profile's type. Those answer 422, the documented validation response.
        "[checks.positive_data_acceptance]",
        # 409: ping or redeliver on a webhook the fuzzer itself disabled.
        "expected-statuses = [200, 201, 202, 204, 404, 409, 422]",
    ]
    handle = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    handle.write("\n".join(lines) + "\n")
    handle.close()
    return handle.name


def main(argv=None) -> int:
    """Seed, serve, fuzz."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--max-examples", type=int, default=int(os.environ.get("FUZZ_MAX_EXAMPLES", "60")))
    parser.add_argument("extra", nargs="*", help="more schemathesis arguments")
    args = parser.parse_args(argv)

    os.environ.setdefault("DATABASE_URL", "sqlite:///" + os.path.join(tempfile.mkdtemp(prefix="riskapi-fuzz-"), "fuzz.db"))
    os.environ["RISKAPI_VALIDATE_RESPONSES"] = "1"
    settings = Settings.from_env()
    reset_database(settings.database_url)
    # A plan limit the fuzzer cannot reach, so webhook creates are exercised rather than refused.
    tenant = make_tenant(webhook_limit=1_000_000)

    from riskapi.api.app import create_app

    with ServerThread(create_app(settings), free_port()) as server:
        base = server.url + "/api/v1"
        parameters = seed(base, tenant)
        command = [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            config(tenant.token, parameters, args.max_examples),
            "run",
            base + "/openapi.json",
            "--checks",
            "all",
            "--seed",
            str(args.seed),
            "--generation-deterministic",
            "--workers",
            "1",
            "--no-color",
            *args.extra,
        ]
        print("$", " ".join(command), flush=True)
        code = subprocess.call(command)
    models.db.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
