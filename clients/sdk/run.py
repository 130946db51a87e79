"""Generate a Python client from spec/openapi.yaml, install it, and drive the real app with it (`tox -e sdk`).

1. `openapi-python-client generate` (the version pinned in tox.ini) into OUTPUT: any output besides its
   "Generating ..." line (a warning, a dropped model or endpoint, a skipped post-hook) fails the run.
2. `pip install` the generated package into this environment.
3. Serve the app with uvicorn on a free loopback port over a fresh SQLite database (response validation
   on), create an agency, its token and a risk profile directly through the models, and run
   clients/sdk/use_sdk.py against it: it uses only the generated functions and models.
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec" / "openapi.yaml"
USAGE = pathlib.Path(__file__).resolve().parent / "use_sdk.py"


def generate(output: pathlib.Path) -> None:
    """Generate the client; exit non-zero on any warning."""
    if output.exists():
        shutil.rmtree(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    command = ["openapi-python-client", "generate", "--path", str(SPEC), "--meta", "setup", "--output-path", str(output)]
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=output.parent, capture_output=True, text=True)
    printed = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    print("\n".join(printed), flush=True)
    unexpected = [line for line in printed if not line.startswith("Generating ")]
    if done.returncode != 0 or unexpected or not (output / "setup.py").exists():
        sys.exit(f"openapi-python-client: exit {done.returncode}, {len(unexpected)} unexpected line(s) (warnings): failing")
    print("openapi-python-client: 0 warnings", flush=True)


def install(output: pathlib.Path) -> None:
    """Install the generated package into this interpreter's environment."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", str(output)]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def serve_and_use() -> int:
    """Serve the app on a fresh database and run the usage script against it."""
    os.environ["DATABASE_URL"] = "sqlite:///" + os.path.join(tempfile.mkdtemp(prefix="riskapi-sdk-"), "sdk.db")
    # A check, not a deployment: every answer is validated against the spec the client was generated from.
    os.environ["RISKAPI_VALIDATE_RESPONSES"] = "1"
    # No access line per request between the check's own lines (the access log changes no answer).
    os.environ["RISKAPI_ACCESS_LOG"] = "0"
    # Webhooks deliver to https://localhost here (nothing is delivered: no worker runs).
    os.environ["RISKAPI_WEBHOOK_ALLOW_PRIVATE"] = "1"
    # Imported here: tox runs this file by path, so the repository (toolkit) is on sys.path only from now on.
    sys.path.insert(0, str(ROOT))
    import models
    from api.app import create_app
    from foundation.config import Settings
    from toolkit.serving import ServerThread, free_port
    from toolkit.tenants import make_tenant, reset_database

    settings = Settings.from_env()
    reset_database(settings.database_url)
    tenant = make_tenant()
    with ServerThread(create_app(settings), free_port()) as server:
        command = [
            sys.executable,
            str(USAGE),
            "--base-url",
            server.url + "/api/v1",
            "--token",
            tenant.token,
            "--risk",
            tenant.risk,
        ]
        print(
            "$", sys.executable, USAGE.name, "--base-url", server.url + "/api/v1", "--token ... --risk", tenant.risk, flush=True
        )
        code = subprocess.call(command)
    models.db.close()
    return code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, type=pathlib.Path, help="directory to generate the client into")
    args = parser.parse_args(argv)
    generate(args.output.resolve())
    install(args.output.resolve())
    return serve_and_use()


if __name__ == "__main__":
    sys.exit(main())
