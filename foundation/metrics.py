"""The Prometheus metrics every process counts: requests and latency by operation, deliveries by outcome.

`riskapi serve` gives its API processes and its delivery worker one PROMETHEUS_MULTIPROC_DIR
(prometheus-client's multiprocess mode), so a scrape of any of its API processes counts them all
(api.metrics answers it). A `riskapi worker` on a host of its own serves its metrics on RISKAPI_METRICS_PORT.
The backlog figures are read at scrape time (webhooks.backlog).
"""

import functools
from collections.abc import Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.metrics_core import Metric

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


class Default:
    """This process's own metrics (no multiprocess directory)."""

    def collect(self) -> Iterator[Metric]:
        for collector in (REQUESTS, LATENCY, ATTEMPTS, RETRIES, SETTLED, DISABLED, IDEMPOTENCY):
            yield from collector.collect()
