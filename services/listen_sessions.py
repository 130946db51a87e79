"""Listen sessions (`riskapi listen`): a webhook row of type `listen` whose deliveries its stream forwards.

The database holds everything a session is (its secret, its events, its end, which of its deliveries
wait), so any API process may hold its stream and any may record its attempts: several processes or
hosts need nothing more. A session's deliveries are born relayed with no next attempt
(webhooks.outbox), so no worker ever sends them.
"""

from __future__ import annotations

import datetime
import uuid

import orjson

import models
from foundation import signing
from foundation.exceptions import ApiError
from models import delivery_states, timestamp, utcnow
from models.webhooks import (
    FAILED,
    LISTEN,
    PENDING,
    SUCCEEDED,
    Attempt,
    Delivery,
    Event,
    Webhook,
    pack_channels,
    pack_events,
    unpack_channels,
    unpack_events,
)
from services import webhook_ops
from webhooks import outbox, requests

# A session lives this long after it was opened or its stream last said it is held.
TTL = datetime.timedelta(seconds=60)
# A delivery streamed and not reported within this long is streamed again (its stream died mid-way).
CLAIM = datetime.timedelta(seconds=60)
# The most deliveries one poll of a stream takes.
BATCH = 50


def create(
    agency_id: int, events: list[str], forward_to: str | None, every_event: list[str], channels: list[str] | None = None
) -> Webhook:
    """Open a session of the agency for these events (every event when none are named) and channels (a webhook's rule)."""
    now = utcnow()
    return Webhook.create(
        agency=agency_id,
        type=LISTEN,
        description=None,
        url=forward_to or "",
        events=pack_events(events or every_event),
        channels=pack_channels(channels),
        secret=signing.generate_secret(),
        created=now,
        updated=now,
        listen_expires=now + TTL,
    )


def render(session: Webhook) -> dict:
    """Return a session as the spec's ListenSession shows it."""
    return {
        "object": "listen_session",
        "uuid": str(session.uuid),
        "data": {
            "events": unpack_events(session.events),
            "channels": unpack_channels(session.channels),
            "forward_to": session.url or None,
            "expires": timestamp(session.listen_expires or session.created),
        },
        "meta": {"created": timestamp(session.created), "signing_secret": session.secret},
    }


def live(agency_id: int, session_uuid: str) -> Webhook:
    """Return the agency's live session; an unknown, ended or another agency's one answers 404."""
    try:
        uuid.UUID(session_uuid)
    except ValueError:
        raise ApiError(404, "Listen session not found.") from None
    found = Webhook.get_or_none(
        (Webhook.uuid == session_uuid)
        & (Webhook.agency == agency_id)
        & (Webhook.type == LISTEN)
        & Webhook.disabled.is_null()
        & (Webhook.listen_expires > utcnow())
    )
    if found is None:
        raise ApiError(404, "Listen session not found.")
    return found


def hold(session: Webhook) -> bool:
    """Push the session's end TTL ahead (its stream is held); False when it has ended meanwhile."""
    now = utcnow()
    live_ = (Webhook.id == session.id) & Webhook.disabled.is_null() & (Webhook.listen_expires > now)
    session.listen_expires = now + TTL
    return Webhook.update(listen_expires=session.listen_expires).where(live_).execute() == 1


def end(session: Webhook) -> None:
    """End a session now; what it had not forwarded fails, with no attempt."""
    now = utcnow()
    with models.atomic():
        Webhook.update(disabled=now, listen_expires=now, updated=now).where(Webhook.id == session.id).execute()
        delivery_states.abandon(Delivery.webhook == session.id, now)


def take(session: Webhook) -> list[dict]:
    """Claim the session's deliveries not yet forwarded (or whose claim lapsed), oldest first; return each signed."""
    now = utcnow()
    free = (Delivery.webhook == session.id) & (Delivery.status == PENDING)
    free &= Delivery.locked_until.is_null() | (Delivery.locked_until < now)
    query = Delivery.select(Delivery.id, Delivery.uuid, Delivery.event, Event.body).join(Event).where(free)
    taken = []
    for delivery_id, delivery_uuid, event, body in models.tuples(query.order_by(Delivery.id).limit(BATCH)):
        # Another process's stream of the same session may claim it first: only the one whose update lands sends it.
        if delivery_states.listen_claim(session.id, delivery_id, now, now + CLAIM):
            raw = body.encode()
            secrets = requests.signing_secrets(session, now)
            headers = requests.signed_headers(event, delivery_uuid, session.uuid, raw, secrets, requests.epoch(now))
            taken.append({"delivery": str(delivery_uuid), "event": event, "headers": headers, "body": body})
    return taken


def record(session: Webhook, delivery_uuid: str, report: dict) -> int:
    """Record the local answer to a forwarded delivery as its attempt, and settle it; return the delivery's id."""
    status, error, duration_ms = report.get("status"), report.get("error"), report["duration_ms"]
    found = Delivery.of_webhook(session.id, delivery_uuid)
    if found is None:
        raise ApiError(404, "Delivery not found.")
    now = utcnow()
    at = now - datetime.timedelta(milliseconds=duration_ms)
    # Kept as a webhook's attempt keeps them (jobs.outcomes.exchange): JSON text, null when not reported.
    sent, answer = report.get("request_headers"), report.get("response")
    Attempt.create(
        delivery=found.id, at=at, status=status, error=error, duration_ms=duration_ms,
        request_headers=None if sent is None else orjson.dumps(sent).decode(),
        response=None if answer is None else orjson.dumps({k: answer[k] for k in ("headers", "body", "body_truncated")}).decode(),
    )  # fmt: skip
    outcome = SUCCEEDED if status is not None and 200 <= status < 300 else FAILED
    delivery_states.listen_settle(found.id, outcome, now)
    return found.id


def open_session(
    agency_id: int, events: list[str], forward_to: str | None, every_event: list[str], channels: list[str] | None
) -> dict:
    """Open a session of the agency (create's rules) and return it as the spec shows it."""
    with models.atomic():
        return render(create(agency_id, events, forward_to, every_event, channels))


def record_attempt(agency_id: int, session_uuid: str, delivery_uuid: str, report: dict) -> dict:
    """Record the local receiver's answer to a forwarded delivery of a live session; return the delivery with its attempts."""
    with models.atomic():
        delivery_id = record(live(agency_id, session_uuid), delivery_uuid, report)
        return webhook_ops.rendered(delivery_id)


def trigger(agency_id: int, event_type: str, data: dict) -> dict:
    """Send an event type's data to the agency's live sessions and subscribed webhooks; return what was accepted and made."""
    with models.atomic():
        accepted, deliveries = outbox.trigger(agency_id, event_type, data)
        hooks = {row["webhook"] for row in deliveries}
        uuids = dict(models.tuples(Webhook.select(Webhook.id, Webhook.uuid).where(Webhook.id.in_(list(hooks))))) if hooks else {}
    made = [{"webhook": str(uuids[row["webhook"]]), "delivery": str(row["uuid"])} for row in deliveries]
    return {**accepted, "deliveries": made}
