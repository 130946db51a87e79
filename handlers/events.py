"""An agency's events (published by the platform's other services, or emitted here) with their deliveries; the event types."""

import uuid
from typing import Any

import flask
import orjson

import models
import spec
from handlers import common
from models.risk_data import KINDS
from models.webhooks import Delivery, Event, Webhook, unpack_channels
from riskapi.exceptions import ApiError
from riskapi.services import bulk_write
from riskapi.services.render import envelope
from riskapi.webhooks import outbox


def publish_event(agency_id: int) -> flask.Response:
    """Record an event and queue a delivery to each active webhook of the agency subscribed to it."""
    payload, errors = common.body()
    bulk_write.fail_if(errors)
    with models.atomic():
        channels = payload.get("channels") or ()
        accepted = outbox.record(agency_id, payload["event"], [payload["data"]], keep=True, channels=channels)[0]
    return common.respond(202, accepted)


def list_event_types(agency_id: int, filter_: Any = None) -> flask.Response:
    """List the events a webhook can subscribe to, each with its payload schema, as the spec states them."""
    # Like every list's filters, read from the query string (Connexion cannot pass `filter[name]` by name).
    names = flask.request.args.getlist("filter[name]")
    wanted = set(names[-1].split(",")) - {""} if names else set()
    described = spec.schema("EventName")["x-event-types"]
    types = []
    for name in spec.schema("EventName")["enum"]:
        if not wanted or name in wanted:
            entry = described[name]
            types.append({"object": "event_type", "name": name, "description": entry["description"], "schema": entry["payload"]})
    return common.respond(200, {"data": types})


def list_events(
    agency_id: int, per_page: int, cursor: str | None = None, filter_: Any = None, sort: list[str] | None = None
) -> flask.Response:
    """List the agency's events, newest first, each with the deliveries it made."""
    rows = Event.select().where(Event.agency == agency_id).dicts()
    return common.list_page_with_children(Event, rows, _deliveries, render, agency_id, per_page, cursor, filter_, sort)


def get_event(agency_id: int, event: str) -> flask.Response:
    """Answer one event of the agency with the deliveries it made; another agency's answers 404."""
    try:
        uuid.UUID(event)
    except ValueError:
        raise ApiError(404, "Event not found.") from None
    with models.snapshot():
        rows = list(models.dicts(Event.select().where((Event.uuid == event) & (Event.agency == agency_id))))
        if not rows:
            raise ApiError(404, "Event not found.")
        row = rows[0]
        made = _deliveries([row["id"]])
    return common.respond(200, {"data": render(row, made[row["id"]])})


def render(row: dict, deliveries: list[dict]) -> dict:
    """Return an event row in the common envelope: its name, the data delivered, its risk profile, its deliveries."""
    delivered = orjson.loads(row["body"])
    data = delivered["data"]
    # Only events of risk data carry their profile; a published event's data is its publisher's, as given.
    risk = data.get("risk") if row["name"].partition(".")[0] in KINDS and isinstance(data, dict) else None
    channels = unpack_channels(row["channels"]) or []
    shown = {**row, "event": row["name"], "data": data, "risk": risk, "channels": channels, "deliveries": deliveries}
    return envelope(Event, shown)


def _deliveries(ids: list[int]) -> dict[int, list[dict]]:
    """Return the deliveries each event made, oldest first: {event id: [{webhook, delivery, status}]}."""
    found: dict[int, list[dict]] = {event_id: [] for event_id in ids}
    if ids:
        columns = (Delivery.stored_event, Webhook.uuid, Delivery.uuid, Delivery.status, Delivery.tries)
        query = Delivery.select(*columns).join(Webhook).where(Delivery.stored_event.in_(ids)).order_by(Delivery.id)
        for event_id, webhook, delivery, status, tries in models.tuples(query):
            shown = {"webhook": str(webhook), "delivery": str(delivery), "status": Delivery.shown_status(status, tries)}
            found[event_id].append(shown)
    return found
