"""The `riskapi` command: serve, worker, db upgrade/status, agency/token/risk creation (quickstart and lists:
tenancy.py), and listen/trigger."""

import argparse
import os
import signal
import sys

import peewee

import models
import spec
from foundation.config import Settings, SettingsError
from models import migrations, utcnow
from models.migrations import MigrationError
from models.tenancy import Agency, Risk, Token
from riskapi import listen as listening
from riskapi import tenancy

# Shared with riskapi.tenancy; the short names stay, as every command here calls them.
from riskapi.cli_common import agency_of as _agency
from riskapi.cli_common import bind as _db
from riskapi.cli_common import emit as _print
from riskapi.cli_common import when as _when


def cmd_db_upgrade(args: argparse.Namespace, settings: Settings) -> None:
    """Apply the pending schema migrations in order (each in its own transaction)."""
    models.bind(settings.database_url)
    _print({"database": "upgraded", "applied": migrations.upgrade()})


def cmd_db_status(args: argparse.Namespace, settings: Settings) -> None:
    """List every schema migration, applied (with when) or pending; changes nothing."""
    models.bind(settings.database_url)
    for row in migrations.status():
        line = {"migration": row["migration"], "status": "pending" if row["applied"] is None else "applied"}
        line["applied"] = _when(row["applied"])
        if row.get("unknown"):
            line["unknown"] = True  # recorded by a newer release than this one
        _print(line)


def cmd_agency_create(args: argparse.Namespace, settings: Settings) -> None:
    """Create an agency."""
    _db(settings)
    limit = args.webhook_limit if args.webhook_limit is not None else settings.default_webhook_limit
    with models.db.connection_context():
        agency = Agency.create(name=args.name, webhook_limit=limit)
    _print({"uuid": str(agency.uuid), "name": agency.name, "webhook_limit": agency.webhook_limit})


def cmd_token_create(args: argparse.Namespace, settings: Settings) -> None:
    """Create an API token for an agency; it is shown once."""
    _db(settings)
    with models.db.connection_context():
        agency = _agency(args.agency)
        token = Token.issue(agency, expires_in=args.expires_in)
        row = Token.get(Token.digest == Token.hash(token))
    _print({"token": token, "agency": str(agency.uuid), "prefix": row.prefix, "expires": _when(row.expires)})


def cmd_token_list(args: argparse.Namespace, settings: Settings) -> None:
    """List an agency's tokens by prefix, with when they were created, last used, expire or were revoked; never the token."""
    _db(settings)
    with models.db.connection_context():
        agency = _agency(args.agency)
        for row in Token.select().where(Token.agency == agency.id).order_by(Token.created, Token.id):
            _print(
                {
                    "prefix": row.prefix,
                    "created": _when(row.created),
                    "last_used": _when(row.last_used),
                    "expires": _when(row.expires),
                    "revoked": _when(row.revoked),
                }
            )


def cmd_token_revoke(args: argparse.Namespace, settings: Settings) -> None:
    """Revoke a token, named by itself or by its prefix; it answers 401 on every host within 5 s."""
    _db(settings)
    with models.db.connection_context(), models.atomic():
        found = list(Token.matching(args.token))
        if not found:
            sys.exit("riskapi: no unrevoked token matches")
        if len(found) > 1:
            sys.exit(f"riskapi: {len(found)} tokens have this prefix; give the whole token")
        now = utcnow()
        Token.update(revoked=now).where(Token.id == found[0].id).execute()
    _print({"prefix": found[0].prefix, "revoked": _when(now)})


def _duration(text: str) -> float:
    """Parse `3600`, `90s`, `15m`, `12h` or `30d` into seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
    try:
        seconds = float(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (3600, 90s, 15m, 12h, 30d)") from None
    if not 0 < seconds < 100 * 365 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration")
    return seconds


def cmd_risk_create(args: argparse.Namespace, settings: Settings) -> None:
    """Create a risk profile for an agency."""
    _db(settings)
    with models.db.connection_context():
        agency = _agency(args.agency)
        risk = Risk.create(agency=agency, type=args.type, name=args.name)
    _print({"uuid": str(risk.uuid), "type": risk.type, "agency": str(agency.uuid), "name": risk.name})


def cmd_serve(args: argparse.Namespace, settings: Settings) -> None:
    """Run the API, the outbox relay and a delivery worker with its scheduler (an embedded Redis when REDIS_URL is unset)."""
    # Here, not at the top: uvicorn and redis add 0.2 s to the 1.1 s start of every other command (best of 5).
    from riskapi import serve as server

    server.serve(settings, host=args.host, port=args.port, workers=args.workers, worker=not args.no_worker)


def cmd_worker(args: argparse.Namespace, settings: Settings) -> None:
    """Run the outbox relay and delivery workers (REDIS_URL required)."""
    # Here, not at the top: it imports prometheus_client, which reads PROMETHEUS_MULTIPROC_DIR once, and `serve`
    # sets that after start-up for the API it runs in this process (rq and the rest add 0.5 s to the start, too).
    from riskapi import work

    work.work(settings, burst=args.burst)


def cmd_listen(args: argparse.Namespace, settings: Settings) -> None:
    """Forward the agency's events, signed, to a local URL over a connection out to the API (until Ctrl-C)."""
    names = [name for name in (args.events or "").split(",") if name] or None
    channels = [name for given in args.channel or [] for name in given.split(",") if name] or None
    # SIGTERM (a `kill`, a process manager, dev.py passing one on) stops it as Ctrl-C does: the session ends, exit 0.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(listening.listen(_api(args), args.forward_to, names, sys.stdout, channels))


def cmd_trigger(args: argparse.Namespace, settings: Settings) -> None:
    """Send an event type's example to the agency's listen sessions and subscribed webhooks, as a test."""
    sys.exit(listening.trigger(_api(args), args.event, sys.stdout))


def _api(args: argparse.Namespace) -> listening.Api:
    if not args.api_url or not args.token:
        sys.exit("riskapi: give the API's base URL and an agency's token (--api-url/--token, or RISKAPI_API_URL/RISKAPI_TOKEN)")
    return listening.Api(args.api_url, args.token)


def _api_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--api-url", default=os.environ.get("RISKAPI_API_URL"), help="e.g. http://127.0.0.1:8000/api/v1 (RISKAPI_API_URL)"
    )
    command.add_argument("--token", default=os.environ.get("RISKAPI_TOKEN"), help="an agency's token (RISKAPI_TOKEN)")


def parser() -> argparse.ArgumentParser:
    """Build the command-line parser."""
    top = argparse.ArgumentParser(prog="riskapi", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help=cmd_serve.__doc__)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=None, help="API processes (default: RISKAPI_WORKERS, or 1)")
    serve.add_argument("--no-worker", action="store_true", help="the API alone: no delivery worker, no embedded Redis")
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help=cmd_worker.__doc__)
    worker.add_argument("--burst", action="store_true")
    worker.set_defaults(func=cmd_worker)

    db = sub.add_parser("db").add_subparsers(dest="db_command", required=True)
    db.add_parser("upgrade", help=cmd_db_upgrade.__doc__).set_defaults(func=cmd_db_upgrade)
    db.add_parser("status", help=cmd_db_status.__doc__).set_defaults(func=cmd_db_status)

    agency = sub.add_parser("agency").add_subparsers(dest="agency_command", required=True)
    create = agency.add_parser("create", help=cmd_agency_create.__doc__)
    create.add_argument("--name", required=True)
    create.add_argument("--webhook-limit", type=int, default=None)
    create.set_defaults(func=cmd_agency_create)

    token = sub.add_parser("token").add_subparsers(dest="token_command", required=True)
    create = token.add_parser("create", help=cmd_token_create.__doc__)
    create.add_argument("--agency", required=True)
    create.add_argument("--expires-in", type=_duration, default=None, help="e.g. 90d, 12h, 3600 (default: never)")
    create.set_defaults(func=cmd_token_create)
    listing = token.add_parser("list", help=cmd_token_list.__doc__)
    listing.add_argument("--agency", required=True)
    listing.set_defaults(func=cmd_token_list)
    revoke = token.add_parser("revoke", help=cmd_token_revoke.__doc__)
    revoke.add_argument("token", metavar="TOKEN_OR_PREFIX")
    revoke.set_defaults(func=cmd_token_revoke)

    risk = sub.add_parser("risk").add_subparsers(dest="risk_command", required=True)
    create = risk.add_parser("create", help=cmd_risk_create.__doc__)
    create.add_argument("--agency", required=True)
    create.add_argument("--type", required=True, choices=spec.schema("ProfileType")["enum"])
    create.add_argument("--name", default=None)
    create.set_defaults(func=cmd_risk_create)

    listen = sub.add_parser("listen", help=cmd_listen.__doc__)
    listen.add_argument(
        "--forward-to", required=True, help="the local URL each event is POSTed to, e.g. http://localhost:3000/hooks"
    )
    listen.add_argument("--events", default=None, help="comma-separated event names (default: every event)")
    listen.add_argument(
        "--channel", action="append", help="forward only events of this channel, e.g. risk:RISK (repeatable, or comma-separated)"
    )
    _api_options(listen)
    listen.set_defaults(func=cmd_listen)
    trigger = sub.add_parser("trigger", help=cmd_trigger.__doc__)
    trigger.add_argument("event", choices=spec.schema("EventName")["enum"], metavar="EVENT")
    _api_options(trigger)
    trigger.set_defaults(func=cmd_trigger)
    tenancy.add_commands(sub, agency, risk)
    return top


def main(argv: list[str] | None = None) -> None:
    """Run the command line; a malformed setting stops it with one line naming the variable."""
    args = parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        if getattr(args, "workers", 0) is None:
            args.workers = Settings.read_env().int("RISKAPI_WORKERS", 1, minimum=1)
    except SettingsError as exc:
        sys.exit(f"riskapi: {exc}")
    try:
        args.func(args, settings)
    except (MigrationError, listening.ListenError) as exc:  # one line, not a traceback
        sys.exit(f"riskapi: {exc}")
    except peewee.OperationalError as exc:  # the database did not answer as a command began
        detail = " ".join(str(exc).split())
        sys.exit(f"riskapi: the database (DATABASE_URL) does not answer: {detail}")


if __name__ == "__main__":
    main()
