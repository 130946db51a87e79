"""Listen sessions (`riskapi listen`) and triggered test events (`riskapi trigger`).

A session's stream is not answered here: riskapi.services.listen_stream answers it in the event loop,
holding none of the few handler threads for the session's life.
"""

from typing import Any

import flask

import models
import spec
from handlers import common
from handlers.deliveries import render as render_delivery
from models.webhooks import Attempt, Delivery, Event, Webhook
from riskapi.exceptions import ApiError
from riskapi.services import bulk_write, listen_sessions
from riskapi.webhooks import outbox


def create_listen_session(agency_id: int) -> flask.Response:
    """Open a listen session for the agency's events."""
    payload, errors = common.body()
    bulk_write.fail_if(errors)
    every = spec.schema("EventName")["enum"]
    with models.atomic():
        session = listen_sessions.create(
            agency_id, payload.get("events") or [], payload.get("forward_to"), every, payload.get("channels")
        )
    return common.respond(201, {"data": listen_sessions.render(session)})


def stream_listen_session(agency_id: int, session: str, timeout: int = 300) -> flask.Response:
    """Answered by riskapi.services.listen_stream before a handler thread is taken; here only if it is not installed."""
    listen_sessions.live(agency_id, session)
    raise ApiError(503, "The stream is not served by this process.")


def record_listen_attempt(agency_id: int, session: str, delivery: str) -> flask.Response:
    """Record the local receiver's answer to a forwarded delivery and settle it."""
    payload, errors = common.body()
    bulk_write.fail_if(errors)
    with models.atomic():
        found = listen_sessions.live(agency_id, session)
        delivery_id = listen_sessions.record(found, delivery, payload)
        row = _delivery_row(delivery_id)
        attempts = list(models.dicts(Attempt.select().where(Attempt.delivery == delivery_id).order_by(Attempt.id)))
    return common.respond(201, {"data": render_delivery(row, attempts)})


def trigger_event(agency_id: int, event_type: str) -> flask.Response:
    """Send the event type's example to the agency's live listen sessions and subscribed webhooks."""
    data = example(event_type)
    with models.atomic():
        accepted, deliveries = outbox.trigger(agency_id, event_type, data)
        hooks = {row["webhook"] for row in deliveries}
        uuids = dict(models.tuples(Webhook.select(Webhook.id, Webhook.uuid).where(Webhook.id.in_(list(hooks))))) if hooks else {}
    made = [{"webhook": str(uuids[row["webhook"]]), "delivery": str(row["uuid"])} for row in deliveries]
    return common.respond(202, {**accepted, "deliveries": made})


def example(event_type: str) -> Any:
    """Return the `data` of an event type's example: the named example of createWebhooks' `event` callback."""
    _path, _method, created = spec.operation("createWebhooks")
    (expression,) = created["callbacks"]["event"].values()
    examples = expression["post"]["requestBody"]["content"]["application/json"]["examples"]
    return examples[event_type]["value"]["data"]


def _delivery_row(delivery_id: int) -> dict:
    query = (
        Delivery.select(Delivery, Event.uuid.alias("event_uuid"), Event.body.alias("body"))
        .join(Event)
        .where(Delivery.id == delivery_id)
    )
    return next(models.dicts(query))
