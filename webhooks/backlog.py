"""The delivery backlog, read when scraped: outbox lag (the database) and queue depth (Redis), the same on every host."""

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from models import connection, utcnow
from models.webhooks import PENDING, Delivery

if TYPE_CHECKING:  # _client imports redis when a scrape first needs it
    import redis

log = logging.getLogger("riskapi")


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
