"""Prometheus metrics: requests and latency by operation, deliveries by outcome, outbox lag, queue depth.

`riskapi serve` gives its API processes and its delivery worker one PROMETHEUS_MULTIPROC_DIR
(prometheus-client's multiprocess mode), so a scrape of any of its API processes counts them all.
A `riskapi worker` on a host of its own serves its metrics on RISKAPI_METRICS_PORT. The backlog
figures (outbox lag, queue depth) are read from the database and Redis at scrape time: they are
the same whichever host is asked.
"""

import functools
import hmac
import logging
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from starlette.types import ASGIApp, Receive, Scope, Send

from models import connection, utcnow
from models.webhooks import PENDING, Delivery
from riskapi.config import Settings

if TYPE_CHECKING:  # _client imports redis when a scrape first needs it
    import redis

log = logging.getLogger("riskapi")

REQUESTS = Counter("riskapi_requests", "HTTP requests answered, by operationId and status.", ["operation", "status"])
LATENCY = Histogram(
    "riskapi_request_duration_seconds",
    "Time to answer a request, by operationId.",
    ["operation"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
ATTEMPTS = Counter("riskapi_delivery_attempts", "Webhook delivery attempts, by outcome (succeeded, failed).", ["outcome"])
RETRIES = Counter("riskapi_delivery_retries_scheduled", "Retries scheduled after a failed attempt.")
SETTLED = Counter("riskapi_deliveries", "Deliveries settled, by final status (succeeded, failed).", ["status"])
DISABLED = Counter("riskapi_webhooks_disabled", "Webhooks disabled by a 410 Gone or by consecutive failures.")
IDEMPOTENCY = Counter(
    "riskapi_idempotency_keys",
    "Writes with an Idempotency-Key that did not run, by outcome (replayed, in_progress: 409, mismatch: 422).",
    ["outcome"],
)


def observe(operation: str, status: int, seconds: float) -> None:
    """Count one answered request."""
    requests, latency = _children(operation, status)
    requests.inc()
    latency.observe(seconds)


@functools.lru_cache(maxsize=1024)  # operationIds x statuses: a bounded set
def _children(operation: str, status: int) -> tuple:
    # labels() takes a lock and builds its key on every call; the children are looked up once.
    return REQUESTS.labels(operation, str(status)), LATENCY.labels(operation)


class Backlog:
    """Outbox lag and queue depth, read when scraped."""

    def __init__(self, redis_url: str, queue: str) -> None:
        self.redis_url, self.queue = redis_url, queue

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily("riskapi_outbox_lag_seconds", "Age of the oldest delivery not yet handed to RQ (0: none).")
        try:
            with connection():
                oldest = Delivery.select(Delivery.created).where(Delivery.relayed.is_null() & (Delivery.status == PENDING))
                row = oldest.order_by(Delivery.created).limit(1).tuples().first()
            lag.add_metric([], (utcnow() - row[0]).total_seconds() if row else 0.0)
        except Exception:  # a scrape must answer while the database is down; the gauge is then missing
            log.debug("metrics: outbox lag unavailable", exc_info=True)
        else:
            yield lag
        if self.redis_url:
            depth = GaugeMetricFamily("riskapi_queue_depth", "Delivery jobs waiting in the RQ queue and its bulk lane.")
            try:
                client = _client(self.redis_url)
                depth.add_metric([], client.llen(f"rq:queue:{self.queue}") + client.llen(f"rq:queue:{self.queue}:bulk"))
            except Exception:  # Redis down: the gauge is missing, the scrape still answers
                log.debug("metrics: queue depth unavailable", exc_info=True)
            else:
                yield depth


_clients: dict[str, "redis.Redis"] = {}


def _client(url: str) -> "redis.Redis":
    import redis

    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    return _clients[url]


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


class Default:
    """This process's own metrics (no multiprocess directory)."""

    def collect(self) -> Iterator[Metric]:
        for collector in (REQUESTS, LATENCY, ATTEMPTS, RETRIES, SETTLED, DISABLED, IDEMPOTENCY):
            yield from collector.collect()


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
