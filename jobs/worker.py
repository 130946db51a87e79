"""A delivery worker process: the outbox relay in a thread, and an RQ worker with its scheduler.

The worker class is RQ's `SimpleWorker` on purpose: a delivery is a few milliseconds of database
work around one HTTPS POST, and the default worker's fork per job would cost more than the job.
Job timeouts still hold (SimpleWorker arms SIGALRM in the main thread).
"""

from __future__ import annotations

import logging
import threading
import time

import redis
from rq import SimpleWorker

import models
from jobs import queue as jobs_queue
from jobs.delivery import AttemptFailed
from jobs.relay import Relay
from riskapi.config import Settings

log = logging.getLogger("riskapi.worker")


class DeliveryWorker(SimpleWorker):
    """SimpleWorker that reconnects to Redis quickly and logs failed attempts in one line."""

    # RQ's default backoff grows to 60 s, which would keep deliveries waiting long after Redis is back.
    max_connection_wait_time = 5.0

    def handle_exception(self, job, *exc_info):
        """Log an expected failed attempt without a traceback; anything else as RQ does."""
        if len(exc_info) > 1 and isinstance(exc_info[1], AttemptFailed):
            self.log.info("%s; retry scheduled", exc_info[1])
            return
        super().handle_exception(job, *exc_info)


def run(settings: Settings, connection: redis.Redis, burst: bool = False, stop: threading.Event | None = None) -> None:
    """Run the relay and one delivery worker until SIGTERM/SIGINT (or, in burst mode, until idle)."""
    logging.getLogger("rq.worker").setLevel(logging.WARNING)
    models.bind(settings.database_url)
    relay = Relay(connection, settings)
    stop = stop or threading.Event()
    if burst:
        models.db.connect(reuse_if_open=True)
        while relay.relay_pending():
            pass
        relay.rescue()
    else:
        threading.Thread(target=relay.run, args=(stop,), name="relay", daemon=True).start()
    queue = jobs_queue.queue(connection, settings.webhook_queue)
    try:
        while not stop.is_set():
            worker = DeliveryWorker([queue], connection=connection, maintenance_interval=60)
            try:
                worker.work(burst=burst, with_scheduler=True, logging_level="WARNING")
                break  # asked to stop (or burst done)
            except redis.ConnectionError as exc:
                if worker.scheduler is not None:
                    worker.stop_scheduler()
                if getattr(worker, "_stop_requested", False):
                    break
                log.warning("worker lost Redis (%s); restarting", exc)
                time.sleep(1)
    finally:
        stop.set()
