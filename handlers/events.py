"""Events published by the platform's other services (forms, e-signatures) for their agency; the event types."""

from typing import Any

import flask

import models
import spec
from handlers import common
from riskapi.services import bulk_write
from riskapi.webhooks import outbox


def publish_event(agency_id: int) -> flask.Response:
    """Record an event and queue a delivery to each active webhook of the agency subscribed to it."""
    payload, errors = common.body()
    bulk_write.fail_if(errors)
    with models.atomic():
        accepted = outbox.record(agency_id, payload["event"], [payload["data"]], keep=True)[0]
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
