"""Transactional outbox: events and their deliveries are written with the change that caused them.

Nothing here talks to Redis: the rows are committed (or rolled back) with the caller's transaction,
and the relay (jobs/relay.py) hands committed deliveries to RQ, whenever Redis is reachable.
A listen session's deliveries (`riskapi listen`) are written already relayed and with no next attempt:
no relay, rescue or worker ever takes them; the API process holding the session's stream forwards them.
A disabled webhook's are written the same way with status skipped: nothing sends them until recover does.
"""

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

import orjson

from models import delivery_states, inserts, timestamp, utcnow
from models.webhooks import PING, Event, Webhook, pack_channels

# The columns each row sets (the others stay NULL), as Peewee's insert_many of these rows wrote them.
_EVENT = ("uuid", "agency", "name", "created", "body", "channels")


class Subscribers(list[int]):
    """Webhook ids subscribed to an event; `sessions` holds those that are listen sessions, `skipped` the disabled."""

    def __init__(self, ids: list[int], sessions: set[int], skipped: set[int] | None = None) -> None:
        super().__init__(ids)
        self.sessions = sessions
        self.skipped = skipped or set()


def body(event_uuid: uuid.UUID | str, name: str, created: datetime.datetime, data: Any) -> bytes:
    """Return the exact bytes delivered for an event (and signed)."""
    return orjson.dumps({"id": str(event_uuid), "event": name, "created": timestamp(created), "data": data})


def record(
    agency_id: int,
    event: str,
    payloads: list[dict],
    keep: bool = False,
    channels: Sequence[str] = (),
    exclude: str | None = None,
) -> list[dict]:
    """Write one event per payload, and a delivery per subscribed webhook, in the caller's transaction
    (a disabled webhook's is skipped: kept for recover, not sent).

    When no webhook of the agency is subscribed this costs one indexed query and writes nothing,
    unless `keep` asks to store the events anyway; the webhook `exclude` (a uuid) gets none.
    Returns the events written as {id, event, created}.
    """
    if not payloads:
        return []
    webhooks = subscribers(agency_id, event, channels, exclude)
    if not webhooks and not keep:
        return []
    return write(agency_id, event, payloads, webhooks, channels)


def subscribers(agency_id: int, event: str, channels: Sequence[str] = (), exclude: str | None = None) -> Subscribers:
    """Return the ids of the agency's webhooks (disabled ones as skipped) and live listen sessions that take an event
    (one indexed query).

    The channels are matched in the query, so webhooks whose channels the event does not share cost nothing more.
    """
    rows = Webhook.subscribed(agency_id, event, channels, exclude)
    return Subscribers(
        [webhook_id for webhook_id, _, _ in rows],
        {webhook_id for webhook_id, session, _ in rows if session},
        {webhook_id for webhook_id, _, disabled in rows if disabled},
    )


def write(agency_id: int, event: str, payloads: list[dict], webhooks: list[int], channels: Sequence[str] = ()) -> list[dict]:
    """Write one event per payload and its deliveries to the given webhooks; return the events as {id, event, created}."""
    return _write(agency_id, event, payloads, webhooks, channels)[0]


def ping(webhook: Webhook) -> dict:
    """Write a webhook.ping event for one webhook, whatever it is subscribed to; return it with its delivery."""
    data = {"object": "webhook", "uuid": str(webhook.uuid)}
    sessions = {webhook.id} if webhook.listen_expires is not None else set()
    events, deliveries = _write(webhook.agency_id, PING, [data], Subscribers([webhook.id], sessions))
    return {**events[0], "delivery": str(deliveries[0]["uuid"])}


def trigger(agency_id: int, event: str, data: dict) -> tuple[dict, list[dict]]:
    """Write one event to every live listen session and webhook subscribed to it (a disabled one's skipped); return it and
    its deliveries."""
    events, deliveries = _write(agency_id, event, [data], subscribers(agency_id, event))
    return events[0], deliveries


def _write(
    agency_id: int, event: str, payloads: list[dict], webhooks: list[int], channels: Sequence[str] = ()
) -> tuple[list[dict], list[dict]]:
    now = utcnow()
    packed = pack_channels(channels) if channels else None
    rows: list[dict[str, Any]] = []
    for data in payloads:
        event_uuid = uuid.uuid4()
        rows.append(
            {
                "uuid": event_uuid,
                "agency": agency_id,
                "name": event,
                "created": now,
                "body": body(event_uuid, event, now, data).decode(),
                "channels": packed,
            }
        )
    ids = inserts.insert(Event, _EVENT, rows, key="uuid", copy=True)
    deliveries = [
        {
            "uuid": uuid.uuid4(),
            "webhook": webhook_id,
            "stored_event": event_id,
            "event": event,
            "created": now,
            "updated": now,
        }
        for event_id in ids
        for webhook_id in webhooks
    ]
    sessions = webhooks.sessions if isinstance(webhooks, Subscribers) else set()
    skipped = webhooks.skipped if isinstance(webhooks, Subscribers) else set()
    delivery_states.create(deliveries, sessions, now, skipped)
    return [{"id": str(row["uuid"]), "event": event, "created": timestamp(now)} for row in rows], deliveries
