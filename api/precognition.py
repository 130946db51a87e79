"""Laravel Precognition: dry-runs that validate a write and change nothing.

Bulk writes check their rules without applying them (handlers.common.bulk_write). Every other
operation that writes is wrapped by `guard`: a precognitive call runs inside a transaction that is
always rolled back (models.rehearsal: it locks no row, so it waits for no write), and a success
answers 204. Writes, events and deliveries all live in the database (the outbox), so a rolled-back
dry-run leaves nothing behind, on any route.
"""

import fnmatch
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import flask
import werkzeug.datastructures
from connexion.lifecycle import ConnexionResponse

import models

_READS = {"GET", "HEAD", "OPTIONS"}

# A request's headers: Flask's (werkzeug) or an ASGI request's (starlette, a Mapping).
Headers = werkzeug.datastructures.Headers | Mapping[str, str]


def is_precognitive(headers: Headers) -> bool:
    """Tell whether request headers ask for a dry-run."""
    return headers.get("precognition", "").lower() == "true"


def validate_only(headers: Headers) -> list[str]:
    """Return the body paths named by Precognition-Validate-Only."""
    raw = headers.get("precognition-validate-only", "")
    return [part.strip() for part in raw.split(",") if part.strip()]


def select_errors(errors: dict, only: list[str]) -> dict:
    """Keep the errors whose path matches one of the patterns (`*` = one segment)."""
    if not only:
        return errors
    patterns = [p.replace("[", "[[]") for p in only]

    def wanted(path: str) -> bool:
        for pattern in patterns:
            if fnmatch.fnmatchcase(path, pattern) and path.count(".") == pattern.count("."):
                return True
            if path.startswith(pattern.rstrip("*") + ".") and "*" not in pattern:
                return True
        return False

    # Errors of the request as a whole (no body, no items) are never deselected.
    return {path: messages for path, messages in errors.items() if "." not in path or wanted(path)}


def judge(headers: Headers, errors: dict, selectable: bool = True) -> tuple[dict, dict] | None:
    """Return (errors, response headers) a request answers 422 with, or None when a dry-run's selected fields pass.

    A dry-run answers only for the body fields Precognition-Validate-Only selects (selectable=False:
    parameter errors, which always stand) and says that it failed; any other request answers every error.
    """
    if not is_precognitive(headers):
        return errors, {}
    if selectable:
        errors = select_errors(errors, validate_only(headers))
    return (errors, {"Precognition-Success": "false"}) if errors else None


def passed() -> flask.Response:
    """Answer a dry-run that passed: 204 with no body, so no Content-Type (fetch clients parse one)."""
    response = flask.Response(status=204, headers={"Precognition-Success": "true"})
    del response.headers["Content-Type"]
    return response


def passed_asgi() -> ConnexionResponse:
    """Answer a dry-run that passed, outside a Flask view."""
    return ConnexionResponse(status_code=204, body=b"", headers={"Precognition-Success": "true"})


class _RolledBack(Exception):
    """Raised to undo a dry-run's transaction once its response is known."""


def guard(view: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a view so that a precognitive write runs in a transaction that is always rolled back.

    A view taking `dry_run` is told it is one (a bulk write then only checks its body), as Connexion tells it the rest.
    """
    told = "dry_run" in inspect.signature(view).parameters

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        request = flask.request
        if request.method in _READS or not is_precognitive(request.headers):
            return view(*args, **kwargs)
        if told:
            kwargs["dry_run"] = True
        response = None
        try:
            with models.rehearsal():
                response = view(*args, **kwargs)
                raise _RolledBack
        except _RolledBack:
            pass
        status = getattr(response, "status_code", 200)
        return passed() if 200 <= status < 300 else response

    return wrapper
