"""The batch job: the first attempts of up to jobs.queue.BATCH_SIZE deliveries.

In a worker, each delivery is claimed here and attempted by the process's jobs.inflight.Engine,
beside the others; without one, `jobs.delivery.attempt` makes it here. Either way it is exactly as in
a job of its own (generation check, claim, attempt log, same Service-Delivery id and signed bytes);
the batch only saves RQ's per-job bookkeeping. A delivery whose attempt failed gets a job of its own, due when the database
says its next attempt is, with RQ's Retry for the ones after. What the batch leaves unsettled
(it failed, or its worker died) still carries the batch's id, and the relay's rescue hands it back.
"""

from __future__ import annotations

import collections
import logging

import peewee
import redis
from rq import get_current_job

import models
from jobs import inflight
from jobs import queue as jobs_queue
from jobs.delivery import AttemptFailed, attempt, worker_settings

log = logging.getLogger("riskapi.delivery")


def deliver_batch(deliveries: list) -> str:
    """RQ entry point: attempt each (delivery id, generation) in turn; return a summary."""
    models.db.connect(reuse_if_open=True)
    settings = worker_settings()
    job = get_current_job()
    target = jobs_queue.retries(job.connection, worker_settings().webhook_queue) if job is not None else None
    outcomes: collections.Counter = collections.Counter()
    engine = inflight.current()
    if engine is not None:  # claimed here, attempted beside the other deliveries in flight
        outcomes.update(engine.take_batch([tuple(pair) for pair in deliveries]))
        deliveries = []
    for delivery_id, generation in deliveries:
        try:
            outcomes[attempt(delivery_id, generation, settings)] += 1
        except AttemptFailed as failed:
            _retry(target, delivery_id, generation, failed, settings)
            outcomes["retry"] += 1
        except (peewee.OperationalError, peewee.InterfaceError):
            # A broken connection: the next job opens a new one; the rest of the batch is rescued.
            models.db.close()
            raise
    return ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))


def _retry(target, delivery_id: int, generation: int, failed: AttemptFailed, settings) -> None:
    if target is None:
        log.warning("%s; no queue to schedule the retry on: the relay's rescue will hand it back", failed)
        return
    try:
        jobs_queue.schedule_retry(
            target,
            failed.delivery_uuid,
            delivery_id,
            generation,
            failed.tries,
            failed.next_attempt,
            settings.webhook_retry_delays,
            settings.webhook_timeout,
        )
    except redis.RedisError as exc:
        # The database says when the next attempt is due; with no job to make it, rescue will.
        log.warning("%s; retry not scheduled (%s): the relay's rescue will hand it back", failed, exc)
        return
    log.info("%s; retry scheduled", failed)


__all__ = ["deliver_batch"]
