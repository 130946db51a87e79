"""Serve the app for the client checks: a fresh SQLite database, one tenant, CORS for one origin.

    python clients/serve.py --cors-origin http://localhost:8080

Prints one JSON line once the server answers ({"base", "token", "risk", "other_risk", "database"}),
then serves until SIGTERM/SIGINT or until its standard input closes (its parent went away).
The database lives in a temporary folder, removed on exit.
"""

import argparse
import dataclasses
import json
import os
import pathlib
import socket
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    """Return a free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_tenant() -> dict:
    """Create an agency, a token and a risk profile (and a second agency's risk) in the database."""
    import models
    from models.tenancy import Agency, Risk, Token

    with models.db.connection_context():
        agency = Agency.create(name="Browser clients", webhook_limit=10)
        token = Token.issue(agency)
        risk = Risk.create(agency=agency, type="commercial", name="Fleet")
        other = Risk.create(agency=Agency.create(name="Someone else"), type="personal", name="Home")
    return {"token": token, "risk": str(risk.uuid), "other_risk": str(other.uuid)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cors-origin", action="append", default=[], help="allowed origin (repeatable)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args(argv)

    import uvicorn

    import models
    from api.app import create_app
    from foundation.config import Settings
    from models import migrations

    with tempfile.TemporaryDirectory(prefix="riskapi-clients-") as folder:
        url = "sqlite:///" + os.path.join(folder, "clients.db")
        settings = dataclasses.replace(
            Settings.from_env({}), database_url=url, validate_responses=True, cors_origins=tuple(args.cors_origin)
        )
        models.bind(url)
        migrations.upgrade()
        tenant = make_tenant()
        app = create_app(settings)
        port = args.port or free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))

        def announce():
            deadline = time.monotonic() + 30
            while not server.started:
                if time.monotonic() > deadline or server.should_exit:
                    return
                time.sleep(0.02)
            info = {"base": f"http://127.0.0.1:{port}/api/v1", "database": url, "cors_origins": list(settings.cors_origins)}
            print(json.dumps({**info, **tenant}), flush=True)

        def watch_stdin():
            # The parent holds our stdin: when it exits, even killed, the read returns and we stop.
            try:
                sys.stdin.buffer.read()
            except (OSError, ValueError):
                pass
            server.should_exit = True

        threading.Thread(target=announce, daemon=True).start()
        if not sys.stdin.isatty():
            threading.Thread(target=watch_stdin, daemon=True).start()
        server.run()
        models.db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
