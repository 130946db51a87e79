"""`riskapi quickstart` (a tenant in one command), `riskapi agency list` and `riskapi risk list`."""

import argparse
import os
import shlex
import sys
from typing import TypeAlias

import models
import spec
from foundation.config import Settings
from models.tenancy import Agency, Risk, Token
from riskapi.cli_common import agency_of, bind, emit, when

# Where `python3 dev.py serve` listens by default (riskapi serve's --host and --port).
DEFAULT_API_URL = "http://127.0.0.1:8000/api/v1"

# What add_subparsers returns: the parser of a command's subcommands.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def cmd_quickstart(args: argparse.Namespace, settings: Settings) -> None:
    """Create an agency, its token and a commercial risk profile; print the shell lines that export them."""
    bind(settings)
    limit = args.webhook_limit if args.webhook_limit is not None else settings.default_webhook_limit
    with models.db.connection_context(), models.atomic():
        agency = Agency.create(name=args.name, webhook_limit=limit)
        token = Token.issue(agency)
        risk = Risk.create(agency=agency, type="commercial", name=args.risk_name)
    exports = {
        "API": args.api_url.rstrip("/"),
        "AGENCY": str(agency.uuid),
        "TOKEN": token,
        "RISK": str(risk.uuid),
        "H": f"Authorization: Bearer {token}",
    }
    # What `riskapi listen` and `trigger` read instead of --api-url and --token (a token in argv shows in `ps`).
    exports |= {"RISKAPI_API_URL": exports["API"], "RISKAPI_TOKEN": token}
    # Shell lines, not JSON: `eval "$(riskapi quickstart)"` sets what every README example uses.
    lines = [
        f"# agency {agency.name!r}, its token (shown once, stored only as a hash) and the commercial risk profile {risk.name!r}",
        *(f"export {name}={shlex.quote(value)}" for name, value in exports.items()),
    ]
    sys.stdout.write("\n".join(lines) + "\n")


def cmd_agency_list(args: argparse.Namespace, settings: Settings) -> None:
    """List the agencies, oldest first, one JSON line each."""
    bind(settings)
    with models.db.connection_context():
        for agency in Agency.select().order_by(Agency.created, Agency.id):
            emit(
                {
                    "uuid": str(agency.uuid),
                    "name": agency.name,
                    "webhook_limit": agency.webhook_limit,
                    "created": when(agency.created),
                }
            )


def cmd_risk_list(args: argparse.Namespace, settings: Settings) -> None:
    """List an agency's risk profiles, oldest first, one JSON line each."""
    bind(settings)
    with models.db.connection_context():
        agency = agency_of(args.agency)
        query = Risk.select().where(Risk.agency == agency.id)
        if args.type:
            query = query.where(Risk.type == args.type)
        for risk in query.order_by(Risk.created, Risk.id):
            emit(
                {
                    "uuid": str(risk.uuid),
                    "type": risk.type,
                    "agency": str(agency.uuid),
                    "name": risk.name,
                    "created": when(risk.created),
                }
            )


def add_commands(commands: Commands, agency: Commands, risk: Commands) -> None:
    """Add quickstart to the top-level commands, and list to `agency` and `risk`."""
    quickstart = commands.add_parser("quickstart", help=cmd_quickstart.__doc__, description=cmd_quickstart.__doc__)
    quickstart.add_argument("--name", default="Acme Insurance", help="the agency's name (default: %(default)s)")
    quickstart.add_argument("--risk-name", default="Fleet", help="the risk profile's name (default: %(default)s)")
    quickstart.add_argument(
        "--webhook-limit",
        type=int,
        default=None,
        help=f"its limit of active webhooks (default: RISKAPI_DEFAULT_WEBHOOK_LIMIT, else {Settings.default_webhook_limit})",
    )
    quickstart.add_argument(
        "--api-url",
        default=os.environ.get("RISKAPI_API_URL") or DEFAULT_API_URL,
        help=f"the API's base URL to export as API and RISKAPI_API_URL (default: RISKAPI_API_URL, else {DEFAULT_API_URL})",
    )
    quickstart.set_defaults(func=cmd_quickstart)
    agency.add_parser("list", help=cmd_agency_list.__doc__).set_defaults(func=cmd_agency_list)
    listing = risk.add_parser("list", help=cmd_risk_list.__doc__)
    listing.add_argument("--agency", required=True)
    listing.add_argument("--type", choices=spec.schema("ProfileType")["enum"], default=None)
    listing.set_defaults(func=cmd_risk_list)
