"""The `riskapi` command: serve, worker, db upgrade, and agency/token/risk creation."""

import argparse
import json
import sys

import models
from riskapi.config import Settings, SettingsError


def _print(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")


def _db(settings: Settings) -> None:
    models.bind(settings.database_url)
    models.upgrade()


def cmd_db_upgrade(args, settings):
    """Create or upgrade the database schema."""
    _db(settings)
    _print({"database": "upgraded"})


def cmd_agency_create(args, settings):
    """Create an agency."""
    from models.tenancy import Agency

    _db(settings)
    limit = args.webhook_limit if args.webhook_limit is not None else settings.default_webhook_limit
    with models.db.connection_context():
        agency = Agency.create(name=args.name, webhook_limit=limit)
    _print({"uuid": str(agency.uuid), "name": agency.name, "webhook_limit": agency.webhook_limit})


def cmd_token_create(args, settings):
    """Create an API token for an agency; it is shown once."""
    from models.tenancy import Token

    _db(settings)
    with models.db.connection_context():
        agency = _agency(args.agency)
        token = Token.issue(agency)
    _print({"token": token, "agency": str(agency.uuid)})


def cmd_risk_create(args, settings):
    """Create a risk profile for an agency."""
    from models.tenancy import Risk

    _db(settings)
    with models.db.connection_context():
        agency = _agency(args.agency)
        risk = Risk.create(agency=agency, type=args.type, name=args.name)
    _print({"uuid": str(risk.uuid), "type": risk.type, "agency": str(agency.uuid), "name": risk.name})


def _agency(value: str):
    import uuid

    from models.tenancy import Agency

    try:
        uuid.UUID(value)
    except ValueError:
        sys.exit(f"riskapi: agency {value!r} is not a UUID")
    agency = Agency.get_or_none(Agency.uuid == value)
    if agency is None:
        sys.exit(f"riskapi: no agency {value}")
    return agency


def cmd_serve(args, settings):
    """Run the API, the outbox relay and a delivery worker with its scheduler (an embedded Redis when REDIS_URL is unset)."""
    from riskapi import server

    server.serve(settings, host=args.host, port=args.port, workers=args.workers)


def cmd_worker(args, settings):
    """Run the outbox relay and delivery workers (REDIS_URL required)."""
    from riskapi import server

    server.work(settings, burst=args.burst)


def parser() -> argparse.ArgumentParser:
    """Build the command-line parser."""
    top = argparse.ArgumentParser(prog="riskapi", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help=cmd_serve.__doc__)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=None, help="API processes (default: RISKAPI_WORKERS, or 1)")
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help=cmd_worker.__doc__)
    worker.add_argument("--burst", action="store_true")
    worker.set_defaults(func=cmd_worker)

    db = sub.add_parser("db").add_subparsers(dest="db_command", required=True)
    db.add_parser("upgrade", help=cmd_db_upgrade.__doc__).set_defaults(func=cmd_db_upgrade)

    agency = sub.add_parser("agency").add_subparsers(dest="agency_command", required=True)
    create = agency.add_parser("create", help=cmd_agency_create.__doc__)
    create.add_argument("--name", required=True)
    create.add_argument("--webhook-limit", type=int, default=None)
    create.set_defaults(func=cmd_agency_create)

    token = sub.add_parser("token").add_subparsers(dest="token_command", required=True)
    create = token.add_parser("create", help=cmd_token_create.__doc__)
    create.add_argument("--agency", required=True)
    create.set_defaults(func=cmd_token_create)

    risk = sub.add_parser("risk").add_subparsers(dest="risk_command", required=True)
    create = risk.add_parser("create", help=cmd_risk_create.__doc__)
    create.add_argument("--agency", required=True)
    create.add_argument("--type", required=True, choices=["commercial", "personal"])
    create.add_argument("--name", default=None)
    create.set_defaults(func=cmd_risk_create)
    return top


def main(argv=None) -> None:
    """Run the command line; a malformed setting stops it with one line naming the variable."""
    args = parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        if getattr(args, "workers", 0) is None:
            args.workers = Settings.read_env().int("RISKAPI_WORKERS", 1, minimum=1)
    except SettingsError as exc:
        sys.exit(f"riskapi: {exc}")
    args.func(args, settings)


if __name__ == "__main__":
    main()
