"""An agency's events with the deliveries each made, and publishing one (what the events handlers call)."""

import uuid
from typing import Any

import orjson
import peewee

import models
import spec
from foundation.exceptions import ApiError
from models.risk_data import KINDS
from models.webhooks import Delivery, Event, Webhook, unpack_channels
from services.render import envelope
from webhooks import outbox


def types(wanted: set[str]) -> list[dict]:
    """Return the events a webhook can subscribe to (those wanted, or all), each with its payload schema, as in the spec."""
    described = spec.schema("EventName")["x-event-types"]
    return [
        {
            "object": "event_type",
            "name": name,
            "description": described[name]["description"],
            "schema": described[name]["payload"],
        }
        for name in spec.schema("EventName")["enum"]
        if not wanted or name in wanted
    ]


def publish(agency_id: int, name: str, data: Any, channels: list[str] | None) -> dict:
    """Record an event and queue a delivery to each active webhook of the agency subscribed to it; return what was accepted."""
    with models.atomic():
        return outbox.record(agency_id, name, [data], keep=True, channels=channels or ())[0]


def rows(agency_id: int) -> "peewee.ModelSelect[Any]":
    """Select the agency's events, as dicts."""
    return Event.select().where(Event.agency == agency_id).dicts()


def get(agency_id: int, event: str) -> dict:
    """Return one event of the agency with the deliveries it made, as of one moment; another agency's answers 404."""
    try:
        uuid.UUID(event)
    except ValueError:
        raise ApiError(404, "Event not found.") from None
    with models.snapshot():
        found = list(models.dicts(Event.select().where((Event.uuid == event) & (Event.agency == agency_id))))
        if not found:
            raise ApiError(404, "Event not found.")
        row = found[0]
        made = deliveries([row["id"]])
    return render(row, made[row["id"]])


def render(row: dict, made: list[dict]) -> dict:
    """Return an event row in the common envelope: its name, the data delivered, its risk profile, its deliveries."""
    delivered = orjson.loads(row["body"])
    data = delivered["data"]
    # Only events of risk data carry their profile; a published event's data is its publisher's, as given.
    risk = data.get("risk") if row["name"].partition(".")[0] in KINDS and isinstance(data, dict) else None
    channels = unpack_channels(row["channels"]) or []
    shown = {**row, "event": row["name"], "data": data, "risk": risk, "channels": channels, "deliveries": made}
    return envelope(Event, shown)


def deliveries(ids: list[int]) -> dict[int, list[dict]]:
    """Return the deliveries each event made, oldest first: {event id: [{webhook, delivery, status}]}."""
    found: dict[int, list[dict]] = {event_id: [] for event_id in ids}
    if ids:
        columns = (Delivery.stored_event, Webhook.uuid, Delivery.uuid, Delivery.status, Delivery.tries)
        query = Delivery.select(*columns).join(Webhook).where(Delivery.stored_event.in_(ids)).order_by(Delivery.id)
        for event_id, webhook, delivery, status, tries in models.tuples(query):
            shown = {"webhook": str(webhook), "delivery": str(delivery), "status": Delivery.shown_status(status, tries)}
            found[event_id].append(shown)
    return found
