"""What every handler shares: the JSON answer, a body's schema errors, a list's page request, the bulk-write answer."""

from typing import Any

import flask
import orjson

from api import precognition
from handlers import settings
from services import listing
from services.bulk_write import Errors, Write, check, fail_if, run
from services.list_query import ListRequest


def respond(status: int, body: Any) -> flask.Response:
    """Return a compact JSON response."""
    return flask.Response(orjson.dumps(body), status=status, mimetype="application/json")


def refuse(body_errors: dict | None) -> None:
    """Answer 422 with the body's schema errors, if it has any (Connexion hands them over as `body_errors`)."""
    fail_if(Errors(body_errors or {}))


def asked(per_page: int, cursor: str | None, sort: list[str] | None, list_request: ListRequest) -> listing.Asked:
    """Return what a list request asks of its page, cursors signed with this service's key."""
    return listing.Asked(per_page, cursor, sort, list_request, settings().secret_key)


def bulk_write(status: int, write: Write, body: Any, body_errors: dict | None, dry_run: bool) -> flask.Response:
    """Answer a bulk write on its one path (services.bulk_write): a dry-run only checks it, else applies it atomically.

    `body_errors` are the body's schema errors, which the rules add to; `dry_run` comes from api.precognition.
    """
    errors = Errors(body_errors or {})
    if dry_run:
        check(write, body, errors)
        return precognition.passed()
    return respond(status, {"data": run(write, body, errors)})
