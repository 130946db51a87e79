"""What every handler shares: the caller's risk profile, the body, lists, bulk responses."""

import time
import uuid

import flask
import orjson
from connexion import context

from models.tenancy import Risk
from riskapi import bulk, outbox, precognition, query, render
from riskapi.app import settings
from riskapi.errors import ApiError
from riskapi.pagination import Paginator, envelope

_SECRET: list = []


def respond(status: int, body) -> flask.Response:
    """Return a compact JSON response."""
    return flask.Response(orjson.dumps(body), status=status, mimetype="application/json")


# Risk profiles are never re-assigned to another agency; a few seconds of caching saves a query per request.
_RISK_TTL = 5.0
_risks: dict = {}


def risk_of(agency_id: int, risk_uuid: str) -> Risk:
    """Return the caller's risk profile; another agency's answers 404 like a missing one."""
    now = time.monotonic()
    hit = _risks.get((agency_id, risk_uuid))
    if hit and hit[1] > now:
        return hit[0]
    try:
        uuid.UUID(risk_uuid)
    except ValueError:
        raise ApiError(404, "Risk profile not found.") from None
    risk = Risk.of_agency(agency_id, risk_uuid)
    if risk is None:
        raise ApiError(404, "Risk profile not found.")
    if len(_risks) > 10000:
        _risks.clear()
    _risks[(agency_id, risk_uuid)] = (risk, now + _RISK_TTL)
    return risk


def body() -> tuple:
    """Return the parsed body and its schema errors."""
    ctx = context.context
    return ctx.get("body"), bulk.Errors(ctx.get("body_errors") or {})


def cursor_secret() -> bytes:
    """Return the key that signs cursors, shared by every process."""
    if not _SECRET:
        from models.tenancy import AppKey

        configured = settings().secret_key
        _SECRET.append((configured or AppKey.get_or_make("cursor")).encode())
    return _SECRET[0]


def list_objects(operation_id, model, user, risk, per_page, cursor, filters, sort, include):
    """List one kind of risk data of a risk profile, paginated by cursor."""
    profile = risk_of(user, risk)
    spec = _list_spec(operation_id, model)
    rows_query = spec.apply(render.select(model).where(model.risk == profile.id), profile.id, filters)
    paginator = Paginator(spec.keys(sort), spec.signature_of(sort), cursor_secret())
    rows, next_cursor, prev_cursor = paginator.page(rows_query, per_page, cursor)
    items = render.envelopes(model, rows, include)
    args = list(flask.request.args.items(multi=True))
    return respond(200, envelope(items, per_page, next_cursor, prev_cursor, flask.request.base_url, args))


_SPECS: dict = {}


def _list_spec(operation_id, model) -> query.ListSpec:
    if operation_id not in _SPECS:
        _SPECS[operation_id] = query.ListSpec(operation_id, model)
    return _SPECS[operation_id]


def bulk_write(status: int, plan, apply) -> flask.Response:
    """Check a bulk body (schema errors, then plan's database rules); answer a dry-run, or apply it atomically.

    plan(payload, errors) records what breaks a rule and returns what to write; apply(planned) writes it
    and returns the response items. Both run again inside the transaction, so the checks see what they guard.
    """
    payload, errors = body()
    if precognition.is_precognitive(flask.request.headers):
        plan(payload, errors)
        bulk.fail_if(errors)
        return precognition.passed()

    def work():
        attempt = bulk.Errors(errors)
        planned = plan(payload, attempt)
        bulk.fail_if(attempt)
        return apply(planned)

    return respond(status, {"data": bulk.transaction(work)})


def create_objects(model, user, risk, include):
    """Create risk data of one kind in bulk, atomically."""
    profile = risk_of(user, risk)

    def apply(rows):
        created = _created(model, bulk.insert(model, profile, rows), include)
        emit(profile, created, "created")
        return created

    return bulk_write(201, lambda payload, errors: bulk.plan_create(model, profile, payload, errors), apply)


def emit(profile, changed: list[dict], action: str) -> None:
    """Record one event per changed object, in the write's transaction."""
    by_event: dict = {}
    for item in changed:
        if item["object"] != "address":
            by_event.setdefault(f"{item['object']}.{action}", []).append({**item, "risk": str(profile.uuid)})
    for event, payloads in by_event.items():
        outbox.record(profile.agency_id, event, payloads)


def _created(model, stored: list[dict], include) -> list[dict]:
    """Render freshly inserted rows; references' UUIDs are read back in one query each."""
    for name, target in model.REFERENCES.items():
        ids = {row[name] for row in stored if row[name] is not None}
        uuids = dict(target.select(target.id, target.uuid).where(target.id.in_(list(ids))).tuples()) if ids else {}
        for row in stored:
            row[f"{name}_uuid"] = uuids.get(row[name])
    return render.envelopes(model, stored, include)
