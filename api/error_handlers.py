"""Exceptions of the service and the one place that maps errors to responses."""

import logging
import time
from typing import Any

import connexion
import orjson
import peewee
from connexion.lifecycle import ConnexionRequest, ConnexionResponse
from starlette.exceptions import HTTPException

import spec
from api import auth, precognition
from foundation.exceptions import ApiError, ValidationFailed
from foundation.messages import listing

log = logging.getLogger("riskapi")


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> ConnexionResponse:
    """Build a JSON response."""
    return ConnexionResponse(
        status_code=status,
        body=orjson.dumps(body),
        headers=headers or {},
        content_type="application/json",
        mimetype="application/json",
    )


def validation_response(request: ConnexionRequest, errors: dict, selectable: bool = True) -> ConnexionResponse:
    """Answer 422 with the errors, or 204 when a dry-run's selected fields pass (api.precognition)."""
    judged = precognition.judge(request.headers, errors, selectable)
    if judged is None:
        return precognition.passed_asgi()
    errors, headers = judged
    body = {"message": errors, "errors": errors, "status": 422, "validation": True}
    return json_response(422, body, headers)


def _on_validation(request: ConnexionRequest, exc: ValidationFailed) -> ConnexionResponse:
    return validation_response(request, exc.errors, exc.selectable)


def _not_allowed(request: ConnexionRequest, headers: dict[str, str]) -> ConnexionResponse:
    """Answer 405 naming the methods the spec declares for the path, in the body and in `Allow`."""
    methods = spec.allowed_methods(request.url.path)
    headers["Allow"] = ", ".join(methods)
    text = f"{_TEXTS[405]} Allowed methods are {listing(methods)}."
    return json_response(405, {"message": text, "status": 405}, headers)


def _on_api_error(request: ConnexionRequest, exc: ApiError) -> ConnexionResponse:
    headers: dict[str, str] = dict(exc.headers)
    if exc.status == 405:
        return _not_allowed(request, headers)
    return json_response(exc.status, {"message": exc.message, "status": exc.status}, headers)


_TEXTS = {
    400: "The request is malformed.",
    401: "Unauthenticated.",
    403: "This action is unauthorized.",
    404: "Not found.",
    405: "The method is not allowed for this URL.",
    406: "Only application/json responses are available.",
    413: "The request body is too large.",
    415: "The request body must be JSON (Content-Type: application/json).",
}


def _on_problem(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    status: int = getattr(exc, "status", 0) or getattr(exc, "status_code", 500)
    detail = getattr(exc, "detail", None)
    message = _TEXTS.get(status) or detail or "Request failed."
    if status == 401 and auth.malformed(request.headers.get("Authorization")):
        # Connexion says "No authorization token provided" of another scheme: show the form instead.
        message = f"Unauthenticated: The Authorization header must be `{auth.expected_form()}` (Bearer, a space, the token)."
    elif status == 401 and detail:
        message = "Unauthenticated: " + str(detail).rstrip(".") + "."
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if status == 405:
        return _not_allowed(request, headers)
    return json_response(status, {"message": message, "status": status}, headers)


# The database did not answer, or dropped the connection mid-request: nothing was committed.
DATABASE_DOWN = (peewee.OperationalError, peewee.InterfaceError)


_quiet_until = [0.0]


def _on_database_down(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    # One line per outage (at most one a minute), not one per request of a busy API.
    now = time.monotonic()
    if now >= _quiet_until[0]:
        _quiet_until[0] = now + 60
        log.warning("database unavailable: %s: %s", type(exc).__name__, str(exc).strip().splitlines()[:1])
    body = {"message": "The database is unavailable; please retry shortly.", "status": 503}
    return json_response(503, body, {"Retry-After": "1"})


def _on_exception(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    log.error("unhandled error on %s", getattr(request, "url", "?"), exc_info=exc)
    return json_response(500, {"message": "Internal server error.", "status": 500})


def register(app: connexion.FlaskApp) -> None:
    """Map every error the app can raise to a JSON response."""
    from connexion.exceptions import ProblemException

    app.add_error_handler(ValidationFailed, _on_validation)
    app.add_error_handler(ApiError, _on_api_error)
    app.add_error_handler(ProblemException, _on_problem)
    app.add_error_handler(HTTPException, _on_problem)
    for error in DATABASE_DOWN:
        app.add_error_handler(error, _on_database_down)
    app.add_error_handler(Exception, _on_exception)
