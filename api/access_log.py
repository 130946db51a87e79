"""One structured line (and the metrics) per request, with a request id the caller may give (`X-Request-Id`).

The line carries what an operator correlates on (time, request id, method, route template,
status, duration, agency) and nothing a caller sent: never a token, a secret, a signature or a body.
Every other line of the process has the same format (foundation.formats).
"""

import functools
import logging
import os
import re
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

import spec
from foundation import formats, metrics

access = logging.getLogger("riskapi.access")

# A caller's id is kept when it is a plain token of reasonable length; anything else is replaced,
# so a log line can never be forged or flooded through this header.
_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")


def configure(log_format: str, logger: logging.Logger = access) -> None:
    """Send a logger's lines (requests, or delivery attempts) to stderr, as JSON (`json`) or readable text."""
    formats.configure(log_format, logger)


@functools.lru_cache(maxsize=256)
def _route(operation_id: str | None) -> str:
    """Return the route template of an operation (`/risks/{risk}/data/drivers`), or `-` when none matched."""
    if not operation_id:
        return "-"
    try:
        # Connexion names an operation `<x-openapi-router-controller>.<operationId>`.
        return spec.operation(operation_id.rsplit(".", 1)[-1])[0]
    except KeyError:
        return "-"


class AccessLogMiddleware:
    """Give every request an id (the caller's `X-Request-Id` or a new one), return it, and log one line."""

    def __init__(self, app: ASGIApp, metrics: bool = False) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = next((value for name, value in scope["headers"] if name == b"x-request-id"), b"")
        raw_id = given if _REQUEST_ID.match(given) else os.urandom(16).hex().encode()  # uuid4().hex's shape, cheaper
        request_id = raw_id.decode()
        extensions = scope.setdefault("extensions", {})
        status = [500]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [(name, value) for name, value in message.get("headers", ()) if name != b"x-request-id"]
                message["headers"] = [*headers, (b"x-request-id", raw_id)]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            operation = extensions.get("connexion_routing", {}).get("operation_id")
            if self.metrics:
                # Labelled by operationId: a bounded set, unlike raw paths with their UUIDs.
                metrics.observe(operation.rsplit(".", 1)[-1] if operation else "-", status[0], elapsed)
            if access.isEnabledFor(logging.INFO):
                fields = {
                    "request_id": request_id,
                    "method": scope["method"],
                    "route": _route(operation),
                    "status": status[0],
                    "duration_ms": round(elapsed * 1000, 1),
                    "agency": extensions.get("connexion_context", {}).get("user") or "-",
                }
                # Logger.info would look up its caller's frame for a line that never shows it.
                record = access.makeRecord(access.name, logging.INFO, "", 0, "request", (), None, extra={"fields": fields})
                access.handle(record)
