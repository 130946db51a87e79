"""An agency's events (published by the platform's other services, or emitted here) with their deliveries; the event types."""

from typing import Any

import flask

from handlers import common
from services import events, listing
from services.list_query import ListRequest


def publish_event(agency_id: int, body: Any = None, body_errors: dict | None = None) -> flask.Response:
    """Record an event and queue a delivery to each active webhook of the agency subscribed to it."""
    common.refuse(body_errors)
    return common.respond(202, events.publish(agency_id, body["event"], body["data"], body.get("channels")))


def list_event_types(agency_id: int, list_request: ListRequest) -> flask.Response:
    """List the events a webhook can subscribe to, each with its payload schema, as the spec states them."""
    wanted = set(list_request.filters.get("name", "").split(",")) - {""}
    return common.respond(200, {"data": events.types(wanted)})


def list_events(
    agency_id: int, per_page: int, list_request: ListRequest, cursor: str | None = None, sort: list[str] | None = None
) -> flask.Response:
    """List the agency's events, newest first, each with the deliveries it made."""
    return common.respond(200, listing.events(agency_id, common.asked(per_page, cursor, sort, list_request)))


def get_event(agency_id: int, event: str) -> flask.Response:
    """Answer one event of the agency with the deliveries it made; another agency's answers 404."""
    return common.respond(200, {"data": events.get(agency_id, event)})
