"""`riskapi worker`: the outbox relay and a delivery worker with RQ's scheduler, against REDIS_URL.

`riskapi serve` starts one as a child (riskapi.serve); a worker host runs it alone.
"""

import logging
import os

import prometheus_client
from prometheus_client import multiprocess

import models
from foundation import formats, metrics, native
from foundation.config import Settings
from jobs.runtime import embedded_redis, worker
from models import migrations
from riskapi import settle
from webhooks.backlog import Backlog


def work(settings: Settings, burst: bool = False) -> None:
    """Run the outbox relay and a delivery worker (with RQ's scheduler) against REDIS_URL."""
    native.capture()
    formats.setup(settings.log_format)
    if not settings.redis_url:
        raise SystemExit("riskapi worker: set REDIS_URL (the Redis that `riskapi serve` and the API hosts share)")
    if settings.worker_nice:
        os.nice(settings.worker_nice)
    models.bind(settings.database_url)
    migrations.upgrade()
    if settings.access_log:
        formats.configure(settings.log_format, logging.getLogger("riskapi.attempts"))
    if settings.metrics and settings.metrics_port:
        _serve_worker_metrics(settings)
    settle()
    worker.run(
        settings,
        embedded_redis.connect(settings.redis_url),
        embedded_redis.connect(settings.redis_url),
        burst=burst,
        threads=settings.webhook_worker_threads,
    )


def _serve_worker_metrics(settings: Settings) -> None:
    """Serve this worker's metrics on 127.0.0.1:RISKAPI_METRICS_PORT (a worker host has no API to ask)."""
    registry = prometheus_client.CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(metrics.Default())
    registry.register(Backlog(settings.redis_url, settings.webhook_queue))
    prometheus_client.start_http_server(settings.metrics_port, addr="127.0.0.1", registry=registry)
