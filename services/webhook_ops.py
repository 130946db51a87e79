"""The operations on one webhook: its delivery log, sending again, a ping, a new secret (the handlers' services).

Each function that writes owns its transaction: the handlers only pass the request's values in and
answer with what comes back.
"""

import datetime
import uuid
from typing import Any

import orjson
import peewee

import models
from foundation.exceptions import ApiError, ValidationFailed
from foundation.messages import message
from models import delivery_states, timestamp
from models.webhooks import FAILED, LISTEN, PENDING, SKIPPED, Attempt, Delivery, Event, Webhook
from services import list_query, webhook_writes
from services.render import envelope, values
from webhooks import outbox

# A listen session's uuid reads like a webhook's in its delivery log, but nothing is sent to it again.
LISTEN_SESSION = (
    "The uuid names a listen session (`riskapi listen`), which is neither pinged nor retried: "
    "send it an event with `riskapi trigger EVENT`."
)
DISABLED = "The webhook is disabled; re-enable it first."


def webhook_of(agency_id: int, webhook_uuid: str, sessions: bool = False) -> Webhook:
    """Return the agency's webhook (or listen session, when `sessions`); another agency's answers 404 like a missing one."""
    try:
        uuid.UUID(webhook_uuid)
    except ValueError:
        raise ApiError(404, "Webhook not found.") from None
    found = Webhook.get_or_none((Webhook.uuid == webhook_uuid) & (Webhook.agency == agency_id))
    if found is None or (found.type == LISTEN and not sessions):
        raise ApiError(404, "Webhook not found.")
    return found


def sendable_webhook_of(agency_id: int, webhook_uuid: str) -> Webhook:
    """Return the agency's enabled webhook for a ping, redeliver or recover; a listen session's uuid answers 409 saying so."""
    found = webhook_of(agency_id, webhook_uuid, sessions=True)
    if found.type == LISTEN:
        raise ApiError(409, LISTEN_SESSION)
    return found


def select() -> "peewee.ModelSelect[Any]":
    """Select deliveries as dicts, each carrying its event's uuid and the body sent."""
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


def attempts(ids: list[int]) -> dict:
    """Return each delivery's attempts, oldest first: {delivery id: [attempt row]}."""
    found: dict = {delivery_id: [] for delivery_id in ids}
    if ids:
        for row in models.dicts(Attempt.select().where(Attempt.delivery.in_(ids)).order_by(Attempt.id)):
            found[row["delivery"]].append(row)
    return found


def rendered(delivery_id: int) -> dict:
    """Return one delivery, rendered with its attempts (inside the caller's transaction or snapshot)."""
    row = select().where(Delivery.id == delivery_id).dicts().get()
    return render(row, attempts([delivery_id])[delivery_id])


def _delivery_of(hook: Webhook, delivery: str) -> Delivery:
    """Return the webhook's delivery; another webhook's answers 404 like a missing one."""
    found = Delivery.of_webhook(hook.id, delivery)
    if found is None:
        raise ApiError(404, "Delivery not found.")
    return found


def get(agency_id: int, webhook: str, delivery: str) -> dict:
    """Return one delivery of a webhook (or listen session) with every attempt, as of one moment."""
    found = _delivery_of(webhook_of(agency_id, webhook, sessions=True), delivery)
    with models.snapshot():
        return rendered(found.id)


def redeliver(agency_id: int, webhook: str, delivery: str) -> dict:
    """Start a new round of attempts for a delivery (same event, same Service-Delivery id); return it."""
    with models.atomic():
        hook = sendable_webhook_of(agency_id, webhook)
        found = _delivery_of(hook, delivery)
        if hook.disabled is not None:
            raise ApiError(409, DISABLED)
        delivery_states.requeue(Delivery.id == found.id)
        return rendered(found.id)


def recover(agency_id: int, webhook: str, window: dict) -> dict:
    """Queue a new round for every failed or skipped delivery of the webhook created in the body's [since, until).

    An unknown webhook is a 404 before any rule across the body's fields, as for every other operation.
    """
    since = list_query.moment(window["since"], Delivery.created, upper=False)
    until = list_query.moment(window["until"], Delivery.created, upper=False) if window.get("until") else None
    sendable_webhook_of(agency_id, webhook)
    if until is not None and until <= since:
        raise ValidationFailed({"until": [message("after", "until", date="since")]})
    return _recover(agency_id, webhook, since, until)


def _recover(agency_id: int, webhook: str, since: datetime.datetime, until: datetime.datetime | None) -> dict:
    with models.atomic():
        hook = sendable_webhook_of(agency_id, webhook)
        if hook.disabled is not None:
            raise ApiError(409, DISABLED)
        # Skipped ones too (made while it was disabled): each once, and the relay takes them oldest first.
        unsent = Delivery.status.in_([FAILED, SKIPPED])
        window = (Delivery.webhook == hook.id) & unsent & (Delivery.created >= since)
        if until is not None:
            window &= Delivery.created < until
        count = delivery_states.requeue(window)
    since_, until_ = timestamp(since), timestamp(until) if until is not None else None
    return {"object": "recovery", "webhook": str(hook.uuid), "since": since_, "until": until_, "deliveries": count}


def ping(agency_id: int, webhook: str) -> dict:
    """Queue a webhook.ping event to one webhook; return what was accepted."""
    with models.atomic():
        found = sendable_webhook_of(agency_id, webhook)
        if found.disabled is not None:
            raise ApiError(409, DISABLED)
        return outbox.ping(found)


def rotate_secret(agency_id: int, webhook: str, grace: float) -> dict:
    """Give a webhook a new signing secret (the one replaced signs on for `grace` seconds); return its rendering."""
    with models.atomic():
        row = webhook_writes.rotate_secret(webhook_of(agency_id, webhook), grace)
    return webhook_writes.render(row)
