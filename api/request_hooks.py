"""What Flask does around each handler call: the request's database connection, and the relay's wake-up after a write."""

import time

import flask

import models
import spec
from api import precognition
from foundation.config import Settings
from models import delivery_states
from webhooks import wakeups as wake

WRITES = frozenset({"POST", "PATCH", "PUT", "DELETE"})
PROBES = frozenset({f"{spec.base_path()}/healthz", f"{spec.base_path()}/readyz"})


def register(app: flask.Flask, settings: Settings) -> None:
    """Install the hooks on the service's Flask app."""

    @app.before_request
    def _connect() -> None:
        # Probes answer whatever the database does: readyz checks it itself, healthz never needs it.
        if flask.request.path not in PROBES:
            flask.g.connecting = time.monotonic()
            models.check_out()

    if settings.redis_url and settings.webhook_relay_wake:
        nudger = wake.Nudger(settings.redis_url, settings.webhook_queue)

        @app.after_request
        def _wake_relay(response: flask.Response) -> flask.Response:
            # Committed by now. A write that left no delivery waiting (no webhook subscribed) pushes nothing: the push
            # was 5 % of a small write's CPU (its thread woken, a Redis round trip), and woke a relay to find nothing.
            request = flask.request
            if (
                request.method in WRITES
                and response.status_code < 300
                and delivery_states.left_waiting()
                and not precognition.is_precognitive(request.headers)
            ):
                nudger.nudge()
            return response

    @app.teardown_request
    def _release(exc: BaseException | None) -> None:
        # A query that waited out the TCP user timeout tells the breaker that the server went silent mid-request.
        models.give_back(exc, flask.g.get("connecting"))
