"""Listen sessions (`riskapi listen`) and triggered test events (`riskapi trigger`).

A session's stream is not answered here: services.listen_stream answers it in the event loop,
holding none of the few handler threads for the session's life.
"""

from typing import Any

import flask

import spec
from foundation.exceptions import ApiError
from handlers import common
from services import listen_sessions


def create_listen_session(agency_id: int, body: Any = None, body_errors: dict | None = None) -> flask.Response:
    """Open a listen session for the agency's events."""
    common.refuse(body_errors)
    every = spec.schema("EventName")["enum"]
    opened = listen_sessions.open_session(
        agency_id, body.get("events") or [], body.get("forward_to"), every, body.get("channels")
    )
    return common.respond(201, {"data": opened})


def stream_listen_session(agency_id: int, session: str, timeout: int = 300) -> flask.Response:
    """Answered by services.listen_stream before a handler thread is taken; here only if it is not installed."""
    listen_sessions.live(agency_id, session)
    raise ApiError(503, "The stream is not served by this process.")


def record_listen_attempt(
    agency_id: int, session: str, delivery: str, body: Any = None, body_errors: dict | None = None
) -> flask.Response:
    """Record the local receiver's answer to a forwarded delivery and settle it."""
    common.refuse(body_errors)
    return common.respond(201, {"data": listen_sessions.record_attempt(agency_id, session, delivery, body)})


def trigger_event(agency_id: int, event_type: str) -> flask.Response:
    """Send the event type's example to the agency's live listen sessions and subscribed webhooks."""
    return common.respond(202, listen_sessions.trigger(agency_id, event_type, example(event_type)))


def example(event_type: str) -> Any:
    """Return the `data` of an event type's example: the named example of createWebhooks' `event` callback."""
    _path, _method, created = spec.operation("createWebhooks")
    (expression,) = created["callbacks"]["event"].values()
    examples = expression["post"]["requestBody"]["content"]["application/json"]["examples"]
    return examples[event_type]["value"]["data"]
