"""Run Schemathesis over every operation of the spec against the real app (`tox -e fuzz`).

The README's run ("Fuzzing the API") with a fixed seed: the same schemathesis.toml (its hooks, checks,
warnings and parameters), the same real ids made by `tools.fuzz_seed` over the API, the same settings
(no rate limit); only the tenant is made directly in a fresh database and the app served on a free
loopback port. Exits with Schemathesis' code.

Why the CLI and not Schemathesis' pytest integration: the CLI runs the examples, coverage,
fuzzing and stateful phases in one run, and links it learns from `Location` headers in the
earlier phases feed the stateful one; the pytest integration makes each phase a test of its
own without that hand-over.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import models
from foundation.config import Settings
from tests.support import make_tenant
from toolkit.serving import ServerThread, free_port
from toolkit.tenants import reset_database
from tools.fuzz_seed import Api, seed

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    """Seed, serve, fuzz."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--max-examples", type=int, default=int(os.environ.get("FUZZ_MAX_EXAMPLES", "60")))
    parser.add_argument("extra", nargs="*", help="more schemathesis arguments")
    args = parser.parse_args(argv)

    os.environ.setdefault("DATABASE_URL", "sqlite:///" + os.path.join(tempfile.mkdtemp(prefix="riskapi-fuzz-"), "fuzz.db"))
    os.environ["RISKAPI_VALIDATE_RESPONSES"] = "1"
    os.environ["RISKAPI_RATE_LIMIT"] = "0"  # as the README's run: the 429 is tests/test_rate_limits.py's
    settings = Settings.from_env()
    reset_database(settings.database_url)
    # A plan limit the fuzzer cannot reach, so webhook creates are exercised rather than refused.
    tenant = make_tenant(webhook_limit=1_000_000)

    from api.app import create_app

    with ServerThread(create_app(settings), free_port()) as server:
        base = server.url + "/api/v1"
        env = dict(os.environ, **seed(Api(base, tenant.token), tenant.risk))
        command = [
            *(sys.executable, "-m", "schemathesis.cli", "run", base + "/openapi.json", "--checks", "all"),
            *("-n", str(args.max_examples), "--seed", str(args.seed), "--generation-deterministic"),
            *("--workers", "1", "--no-color", *args.extra),
        ]
        print("$", " ".join(command), flush=True)
        code = subprocess.call(command, cwd=ROOT, env=env)  # the root's schemathesis.toml
    models.db.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
