"""Idempotency-Key: a write retried with the same key answers what the first one answered, and writes nothing twice.

Every write operation whose spec declares the header is wrapped by `guard` (api.routing):
1. The key is claimed in a short transaction of its own: a row marked running, under a lease, that
   every process and host sees (models.idempotency).
2. The handler runs inside one outer transaction (its own transactions become savepoints: bulk
   writes still retry within it), and the row takes the handler's answer in that same transaction.
   A committed write therefore always has its answer stored, even if the process dies next.
3. A handler that raises (a 4xx of its rules, a 404, a 409, a 503) rolled everything back: the claim
   is released, and the key can be sent again, with the corrected request.
A retry of the same request (same agency, method, path, query and canonical body) within the key's
lifetime answers the stored answer with `Idempotent-Replayed: true`; a retry while the first still
runs answers 409 with Retry-After; the key with another request answers 422 naming Idempotency-Key.
A dry-run (Precognition) passes by: it neither reads nor spends a key.
"""

import functools
import hashlib
import logging
from collections.abc import Callable
from typing import Any

import flask
import orjson
from connexion import context

import models
import spec
from api import precognition
from foundation.config import SETTINGS_KEY, Settings
from foundation.exceptions import ApiError, ValidationFailed
from foundation.metrics import IDEMPOTENCY
from models import utcnow
from models.idempotency import IdempotencyKey

log = logging.getLogger("riskapi")

HEADER = spec.raw()["components"]["parameters"]["IdempotencyKey"]["name"]
# The header a replayed answer carries (each write's success response declares it: tests/test_idempotency.py).
REPLAYED = "Idempotent-Replayed"
# Seconds a request holds its key before a retry may take it over: a process that died before its
# commit wrote nothing, and its key must not stay blocked for the whole lifetime.
LEASE = 60.0
# What a 409 asks a retry to wait: a running write usually answers within a second.
RETRY_AFTER = "1"
# Headers of an answer that the replay computes anew rather than stores.
_NOT_STORED = {"content-length"}


def declared(operation_id: str) -> bool:
    """Tell whether an operation (as Connexion names it: `<controller>.<operationId>`) takes the header."""
    name = spec.function_name(operation_id)
    try:
        params = spec.parameters(name)
    except KeyError:
        return False
    return any(param["in"] == "header" and param["name"] == HEADER for param in params)


def guard(view: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a write's view so that a request with an Idempotency-Key runs once and its retries replay the answer."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        request = flask.request
        key = request.headers.get(HEADER)
        if key is None or precognition.is_precognitive(request.headers):
            return view(*args, **kwargs)
        settings: Settings = flask.current_app.config[SETTINGS_KEY]
        agency_id = int(context.context["user"])
        print_ = _fingerprint_of(request)
        row, held = _claim(agency_id, key, print_, settings.idempotency_key_ttl)
        if held is None:
            return _answer_for(row, print_, settings)
        return _run(view, args, kwargs, held, print_, settings)

    return wrapper


def fingerprint(method: str, path: str, query: list[tuple[str, str]], body: bytes) -> str:
    """Return the SHA-256 a key compares requests by: method, path, query (in any order) and canonical body."""
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), orjson.dumps(sorted(query)), body):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def canonical(body: Any) -> bytes:
    """Return a JSON body as a key compares it: keys sorted, no whitespace (None: no JSON body)."""
    return b"" if body is None else orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def _fingerprint_of(request: flask.Request) -> str:
    parsed = context.context.get("body")  # the JSON body request validation parsed, if any
    body = canonical(parsed) if parsed is not None else request.get_data()
    return fingerprint(request.method, request.path, list(request.args.items(multi=True)), body)


def _claim(agency_id: int, key: str, print_: str, ttl: float) -> tuple[IdempotencyKey | None, tuple[int, str] | None]:
    """Return (None, (the key's row id, this request's claim)) when this request runs, else (the row to answer from, None)."""
    for _ in range(3):  # the row may change between a read and a write; each pass reads it again
        row = IdempotencyKey.find(agency_id, key)
        if row is None:
            held = IdempotencyKey.claim_new(agency_id, key, print_, LEASE, ttl)
        elif row.expires <= utcnow():
            held = row.take_over(print_, LEASE, ttl)
        elif row.fingerprint != print_ or row.status is not None:
            return row, None
        elif row.lease is not None and row.lease > utcnow():
            return row, None
        else:  # its request died before committing: nothing was written, run it again
            held = row.take_over(print_, LEASE, ttl)
        if held is not None:
            return None, held
    return None, None


def _answer_for(row: IdempotencyKey | None, print_: str, settings: Settings) -> flask.Response:
    """Answer a request that may not run with the stored answer; raise 422 on another request, 409 while the first runs."""
    if row is not None and row.fingerprint != print_:
        _count(settings, "mismatch")
        text = f"The {HEADER} was already used with another request (method, path or body); send a new key."
        raise ValidationFailed({HEADER: [text]}, selectable=False)
    if row is not None and row.status is not None:
        _count(settings, "replayed")
        status, headers, body = row.answer()
        return flask.Response(body, status=status, headers={**headers, REPLAYED: "true"})
    _count(settings, "in_progress")
    text = f"A request with this {HEADER} is still running; retry after Retry-After seconds."
    raise ApiError(409, text, {"Retry-After": RETRY_AFTER})


def _run(
    view: Callable[..., Any],
    args: tuple,
    kwargs: dict[str, Any],
    held: tuple[int, str],
    print_: str,
    settings: Settings,
) -> Any:
    """Run the view once, storing its answer with its write in one transaction; release the key if it raises."""
    row_id, claim = held
    try:
        with models.atomic():
            response = view(*args, **kwargs)
            if not isinstance(response, flask.Response):
                response = flask.current_app.make_response(response)
            headers = {name: value for name, value in response.headers.items() if name.lower() not in _NOT_STORED}
            if not IdempotencyKey.complete(row_id, claim, response.status_code, headers, response.get_data()):
                # A retry took the key over after this request's lease ran out: its run answers, not this one.
                raise _LostClaim
    except _LostClaim:
        return _answer_for(None, print_, settings)
    except BaseException:
        _release(row_id, claim)
        raise
    return response


def _count(settings: Settings, outcome: str) -> None:
    if settings.metrics:
        IDEMPOTENCY.labels(outcome).inc()


class _LostClaim(Exception):
    """Raised to roll back a run whose key a retry took over."""


def _release(row_id: int, claim: str) -> None:
    """Free a key whose run wrote nothing; if the database cannot be told, the lease frees it later."""
    try:
        IdempotencyKey.release(row_id, claim)
    except Exception:
        log.warning("idempotency: could not release a key; it frees itself after %s s", LEASE, exc_info=True)
