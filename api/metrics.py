"""GET /metrics: every metric of this host (foundation.metrics, and the backlog: webhooks.backlog) in Prometheus' format."""

import hmac
import logging
import os
import time

import prometheus_client
from prometheus_client import CollectorRegistry, multiprocess
from starlette.types import ASGIApp, Receive, Scope, Send

from foundation.config import Settings
from foundation.metrics import Default
from webhooks.backlog import Backlog

log = logging.getLogger("riskapi")


def exposition(settings: Settings) -> bytes:
    """Return every metric of this host in Prometheus text format."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = CollectorRegistry()
        registry.register(Default())
    registry.register(Backlog(settings.redis_url, settings.webhook_queue))
    return prometheus_client.generate_latest(registry)


class MetricsMiddleware:
    """Answer GET /metrics: with RISKAPI_METRICS_TOKEN as a bearer token, or else only to loopback clients."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.expected = f"Bearer {settings.metrics_token}".encode() if settings.metrics_token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/metrics":
            await self.app(scope, receive, send)
            return
        if not self._allowed(scope):
            await _answer(send, 404, b'{"message":"Not found.","status":404}', b"application/json")
            return
        started = time.perf_counter()
        body = exposition(self.settings)
        log.debug("metrics scraped in %.1f ms", (time.perf_counter() - started) * 1000)
        await _answer(send, 200, body, prometheus_client.CONTENT_TYPE_LATEST.encode())

    def _allowed(self, scope: Scope) -> bool:
        if self.expected is not None:
            given = dict(scope["headers"]).get(b"authorization", b"")
            return hmac.compare_digest(given, self.expected)
        client = scope.get("client") or ("",)
        return client[0] in {"127.0.0.1", "::1"}


async def _answer(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
