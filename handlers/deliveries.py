"""A webhook's delivery log, and sending one delivery again."""

from typing import Any

import flask
import orjson
import peewee

import models
from handlers import common
from handlers.webhooks import sendable_webhook_of, webhook_of
from models import delivery_states, timestamp
from models.webhooks import FAILED, PENDING, SKIPPED, Attempt, Delivery, Event, Webhook
from riskapi.exceptions import ApiError
from riskapi.services import bulk_write, list_query
from riskapi.services.messages import message
from riskapi.services.render import envelope, values


def _select() -> "peewee.ModelSelect[Any]":  # read as dicts: each row carries its event's uuid and the body sent too
    return Delivery.select(Delivery, Event.uuid.alias("event_uuid"), Event.body.alias("body")).join(Event)


def render(row: dict, attempts: list[dict]) -> dict:
    """Return a delivery row in the common envelope."""
    pending = row["status"] == PENDING and row["next_attempt"] is not None
    shown = {
        **row,
        "status": Delivery.shown_status(row["status"], row["tries"]),
        "event_id": row["event_uuid"],
        "attempts": [_attempt(attempt) for attempt in attempts],
        "next_attempt": row["next_attempt"] if pending else None,
    }
    return envelope(Delivery, shown)


def _attempt(row: dict) -> dict:
    """Return an attempt as the log shows it: its exchange read back from the JSON stored."""
    sent, answer = row.get("request_headers"), row.get("response")
    response = None if answer is None else {"status": row["status"], **orjson.loads(answer)}
    headers = None if sent is None else orjson.loads(sent)
    return values("DeliveryAttempt", {**row, "request_headers": headers, "response": response})


def _attempts(ids: list[int]) -> dict:
    found: dict = {delivery_id: [] for delivery_id in ids}
    if ids:
        for row in models.dicts(Attempt.select().where(Attempt.delivery.in_(ids)).order_by(Attempt.id)):
            found[row["delivery"]].append(row)
    return found


def list_deliveries(
    agency_id: int, webhook: str, per_page: int, cursor: str | None = None, filter_: Any = None, sort: list[str] | None = None
) -> flask.Response:
    """List a webhook's deliveries, newest first."""
    hook = webhook_of(agency_id, webhook, sessions=True)  # a listen session's log too
    rows = _select().where(Delivery.webhook == hook.id).dicts()
    return common.list_page_with_children(Delivery, rows, _attempts, render, agency_id, per_page, cursor, filter_, sort)


def _delivery_of(hook: Webhook, delivery: str) -> Delivery:
    """Return the webhook's delivery; another webhook's answers 404 like a missing one."""
    found = Delivery.of_webhook(hook.id, delivery)
    if found is None:
        raise ApiError(404, "Delivery not found.")
    return found


def get_delivery(agency_id: int, webhook: str, delivery: str) -> flask.Response:
    """Answer one delivery of a webhook with every attempt."""
    hook = webhook_of(agency_id, webhook, sessions=True)  # a listen session's log reads like a webhook's
    found = _delivery_of(hook, delivery)
    with models.snapshot():  # the delivery's state and its attempts as of one moment
        row = _select().where(Delivery.id == found.id).dicts().get()
        attempts = _attempts([found.id])[found.id]
    return common.respond(200, {"data": render(row, attempts)})


def redeliver(agency_id: int, webhook: str, delivery: str) -> flask.Response:
    """Start a new round of attempts for a delivery (same event, same Service-Delivery id)."""
    with models.atomic():
        hook = sendable_webhook_of(agency_id, webhook)
        found = _delivery_of(hook, delivery)
        if hook.disabled is not None:
            raise ApiError(409, "The webhook is disabled; re-enable it first.")
        delivery_states.requeue(Delivery.id == found.id)
        row = _select().where(Delivery.id == found.id).dicts().get()
        attempts = _attempts([found.id])[found.id]
    return common.respond(202, {"data": render(row, attempts)})


def recover_deliveries(agency_id: int, webhook: str) -> flask.Response:
    """Queue a new round of attempts for every failed or skipped delivery of a webhook created in a window."""
    payload, errors = common.body()
    bulk_write.fail_if(errors)
    since = list_query.moment(payload["since"], Delivery.created, upper=False)
    until = list_query.moment(payload["until"], Delivery.created, upper=False) if payload.get("until") else None
    # An unknown webhook is a 404 before any rule across the body's fields, as for every other operation.
    sendable_webhook_of(agency_id, webhook)
    if until is not None and until <= since:
        bulk_write.fail_if(bulk_write.Errors({"until": [message("after", "until", date="since")]}))
    with models.atomic():
        hook = sendable_webhook_of(agency_id, webhook)
        if hook.disabled is not None:
            raise ApiError(409, "The webhook is disabled; re-enable it first.")
        # Skipped ones too (made while it was disabled): each once, and the relay takes them oldest first.
        unsent = Delivery.status.in_([FAILED, SKIPPED])
        window = (Delivery.webhook == hook.id) & unsent & (Delivery.created >= since)
        if until is not None:
            window &= Delivery.created < until
        count = delivery_states.requeue(window)
    recovery = {
        "object": "recovery",
        "webhook": str(hook.uuid),
        "since": timestamp(since),
        "until": timestamp(until) if until is not None else None,
        "deliveries": count,
    }
    return common.respond(202, {"data": recovery})
