"""A webhook's delivery log, and sending one delivery again."""

import uuid

import flask

import models
from handlers import common
from handlers.webhooks import webhook_of
from models.webhooks import FAILED, PENDING, Attempt, Delivery, Event
from riskapi import bulk, query
from riskapi.errors import ApiError
from riskapi.pagination import Paginator, envelope
from riskapi.render import timestamp

LIST_OPERATION = "handlers.deliveries.list_deliveries"
_spec: list = []


def _select():
    return Delivery.select(Delivery, Event.uuid.alias("event_uuid")).join(Event)


def render(row: dict, attempts: list[dict]) -> dict:
    """Return a delivery row in the common envelope."""
    pending = row["status"] == PENDING and row["next_attempt"] is not None
    return {
        "object": "delivery",
        "uuid": str(row["uuid"]),
        "data": {
            "event": row["event"],
            "event_id": str(row["event_uuid"]),
            "status": row["status"],
            "attempts": [
                {"at": timestamp(a["at"]), "status": a["status"], "error": a["error"], "duration_ms": a["duration_ms"]}
                for a in attempts
            ],
            "next_attempt": timestamp(row["next_attempt"]) if pending else None,
        },
        "meta": {"created": timestamp(row["created"]), "updated": timestamp(row["updated"])},
    }


def _attempts(ids: list[int]) -> dict:
    found: dict = {delivery_id: [] for delivery_id in ids}
    if ids:
        rows = Attempt.select().where(Attempt.delivery.in_(ids)).order_by(Attempt.id).dicts()
        for row in rows:
            found[row["delivery"]].append(row)
    return found


def list_deliveries(user, webhook, per_page=50, cursor=None, filter=None, sort=None):
    """List a webhook's deliveries, newest first."""
    hook = webhook_of(user, webhook)
    if not _spec:
        _spec.append(query.ListSpec(LIST_OPERATION, Delivery))
    spec = _spec[0]
    rows_query = spec.apply(_select().where(Delivery.webhook == hook.id).dicts(), user, filter)
    paginator = Paginator(spec.keys(sort), spec.signature_of(sort), common.cursor_secret())
    rows, next_cursor, prev_cursor = paginator.page(rows_query, per_page, cursor)
    attempts = _attempts([row["id"] for row in rows])
    items = [render(row, attempts[row["id"]]) for row in rows]
    args = list(flask.request.args.items(multi=True))
    return common.respond(200, envelope(items, per_page, next_cursor, prev_cursor, flask.request.base_url, args))


def redeliver(user, webhook, delivery):
    """Start a new round of attempts for a delivery (same event, same Service-Delivery id)."""
    with models.atomic():
        hook = webhook_of(user, webhook)
        try:
            uuid.UUID(delivery)
        except ValueError:
            raise ApiError(404, "Delivery not found.") from None
        found = Delivery.get_or_none((Delivery.uuid == delivery) & (Delivery.webhook == hook.id))
        if found is None:
            raise ApiError(404, "Delivery not found.")
        if hook.disabled is not None:
            raise ApiError(409, "The webhook is disabled; re-enable it first.")
        Delivery.requeue(Delivery.id == found.id)
        row = _select().where(Delivery.id == found.id).dicts().get()
        attempts = _attempts([found.id])[found.id]
    return common.respond(202, {"data": render(row, attempts)})


def recover_deliveries(user, webhook):
    """Queue a new round of attempts for every failed delivery of a webhook created in a window."""
    payload, errors = common.body()
    bulk.fail_if(errors)
    since = query.moment(payload["since"], Delivery.created, upper=False)
    until = query.moment(payload["until"], Delivery.created, upper=False) if payload.get("until") else None
    if until is not None and until <= since:
        bulk.fail_if(bulk.Errors({"until": ["The until field must be a date after since."]}))
    with models.atomic():
        hook = webhook_of(user, webhook)
        if hook.disabled is not None:
            raise ApiError(409, "The webhook is disabled; re-enable it first.")
        window = (Delivery.webhook == hook.id) & (Delivery.status == FAILED) & (Delivery.created >= since)
        if until is not None:
            window &= Delivery.created < until
        count = Delivery.requeue(window)
    recovery = {
        "object": "recovery",
        "webhook": str(hook.uuid),
        "since": timestamp(since),
        "until": timestamp(until) if until is not None else None,
        "deliveries": count,
    }
    return common.respond(202, {"data": recovery})
