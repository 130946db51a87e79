"""Record: each attempt's outcome written to the database in one transaction, then its retry scheduled.

`record` writes one attempt: its row in the attempt log, the delivery's next state as jobs.retry
decides it (settled, or pending with its next attempt), and the webhook's health; only the job of
the delivery's current generation changes the delivery. Once committed, the attempt is counted
and logged, and a due retry raises AttemptFailed for the caller to schedule (jobs.retry.schedule).

In a worker, one Recorder thread per engine writes every outcome of the engine's attempts: several
waiting together in one transaction (one commit, one WAL flush), one by one should that fail. It
also asks the engine, every second, to tend its waiting claims (jobs.lines.Engine.tend), and keeps
the claims of outcomes not yet written from lapsing. An outcome that cannot be written (the
database is away) is left to its claim's expiry and the relay's rescue: at least once.
"""

from __future__ import annotations

import datetime
import logging
import queue as queues
import threading
import time
from typing import Protocol

import redis

import models
from jobs import queue as jobs_queue
from jobs import retry
from jobs.https.transport import Result
from jobs.outages import DATABASE_ERRORS, Outage, reconnecting
from jobs.retry import AttemptFailed
from jobs.slowness import SlowMarks
from models import utcnow
from models.webhooks import PENDING, Attempt, Delivery, Webhook
from riskapi.config import Settings
from riskapi.observability import metrics

log = logging.getLogger("riskapi.delivery")
# One line per attempt (configured by `riskapi worker` like the API's request lines).
attempts = logging.getLogger("riskapi.attempts")

# Outcomes written in one transaction when several wait: one commit (one WAL flush) for them all.
BATCH = 64


def record(
    delivery: Delivery,
    generation: int,
    webhook: Webhook,
    started: datetime.datetime,
    result: Result,
    settings: Settings,
    next_job: str | None = None,
) -> str:
    """Write an attempt and its consequences in one transaction; return the outcome, or raise AttemptFailed to retry.

    next_job names the RQ job that will make the next attempt, when it is not the delivery's own
    (jobs.queue.retry_id): the relay's rescue looks that job up.
    """
    with models.atomic():
        written = write(delivery, generation, webhook, started, result, settings, next_job)
    return conclude(delivery, webhook, result, *written)


Written = tuple[str, int, int, datetime.datetime | None]  # outcome, rows changed, tries, next attempt


def write(
    delivery: Delivery,
    generation: int,
    webhook: Webhook,
    started: datetime.datetime,
    result: Result,
    settings: Settings,
    next_job: str | None,
) -> Written:
    """Write the attempt and its consequences in the caller's transaction; return (outcome, changed, tries, next_attempt)."""
    tries, now = delivery.tries + 1, utcnow()
    entry = {"at": started, "status": result.status, "error": retry.error_text(result), "duration_ms": result.duration_ms}
    Attempt.insert(delivery=delivery.id, **entry).execute()
    decision = retry.decide(result, webhook.type, tries, list(settings.webhook_retry_delays))
    next_attempt = None if decision.wait is None else now + datetime.timedelta(seconds=decision.wait)
    pending = decision.status == PENDING
    changed = (
        # batch=None: whatever comes next is the delivery's own job (see jobs.queue), unless named.
        Delivery.update(
            status=decision.status,
            tries=tries,
            next_attempt=next_attempt,
            locked_until=None,
            batch=next_job if pending else None,
            updated=now,
        )
        .where((Delivery.id == delivery.id) & (Delivery.generation == generation))
        .execute()
    )
    if changed:
        retry.settle_webhook(webhook, decision.outcome, settings, now)
    return decision.outcome, changed, tries, next_attempt


def conclude(
    delivery: Delivery,
    webhook: Webhook,
    result: Result,
    outcome: str,
    changed: int,
    tries: int,
    next_attempt: datetime.datetime | None,
) -> str:
    """Once the attempt is committed: count and log it; raise AttemptFailed when a retry is due."""
    observe(delivery, webhook, result, outcome if changed else "superseded", tries)
    if outcome == "retry" and changed and next_attempt is not None:  # a retry always has its time (retry.decide)
        raise AttemptFailed(
            f"delivery {delivery.uuid} attempt {tries}: {result.error or result.status}", delivery.uuid, tries, next_attempt
        )
    return outcome


def observe(delivery: Delivery, webhook: Webhook, result: Result, outcome: str, tries: int) -> None:
    """Count the attempt in the metrics and write its one log line (ids, status, duration; never a secret or body)."""
    metrics.ATTEMPTS.labels("succeeded" if result.ok else "failed").inc()
    if outcome == "retry":
        metrics.RETRIES.inc()
    elif outcome != "superseded":
        metrics.SETTLED.labels("succeeded" if outcome == "succeeded" else "failed").inc()
    if attempts.isEnabledFor(logging.INFO):
        status = result.status if result.status is not None else "-"
        fields = {"delivery": str(delivery.uuid), "webhook": str(webhook.uuid), "attempt": tries, "status": status}
        attempts.info("attempt", extra={"fields": {**fields, "duration_ms": result.duration_ms, "outcome": outcome}})


class Claimed(Protocol):
    """An engine's claimed delivery (jobs.lines.Item): the delivery loaded, its generation, its claim's end (monotonic)."""

    delivery: Delivery
    generation: int
    lease: float


Outcome = tuple[Claimed, Webhook, datetime.datetime, Result]  # what an attempt hands over: item, webhook, started, result


class Owner(Protocol):
    """What a Recorder needs of its engine (jobs.lines.Engine, which builds it: hence not imported here)."""

    settings: Settings
    connection: redis.Redis
    database_outage: Outage
    slow: SlowMarks

    def settled(self) -> None: ...
    def finished(self) -> bool: ...
    def tend(self, unrecorded: list[Claimed], renewing: bool, soon: float) -> None: ...


class Recorder:
    """Writes the outcomes of one engine's attempts, and has it tend the claims of its waiting deliveries."""

    def __init__(self, engine: Owner):
        self.engine = engine
        self.settings = engine.settings
        self.target = jobs_queue.retries(engine.connection, self.settings.webhook_queue)
        self.renew_every = max(min(self.settings.webhook_stale_after / 2, 5.0), 0.2)
        self._done: queues.SimpleQueue = queues.SimpleQueue()
        self._lock = threading.Lock()
        self._unrecorded: set = set()  # items of the outcomes handed over and not yet written

    def put(self, outcome: Outcome) -> None:
        """Hand over (item, webhook, started, result) of an attempt made."""
        with self._lock:
            self._unrecorded.add(outcome[0])
        self._done.put(outcome)

    def run(self) -> None:
        """Record outcomes as they come; every second, have the waiting claims tended on the side."""
        next_renew = next_read = time.monotonic()
        while True:
            batch = self._next_batch()
            if batch is None and self.engine.finished():
                break
            if batch and len(batch) > 1:
                self._settle_all(batch)
            elif batch:
                self._settle(*batch[0])
            now = time.monotonic()
            if now >= next_read:
                next_read, renewing = now + 1.0, now >= next_renew
                if renewing:
                    next_renew = now + self.renew_every
                self._tend(renewing)
        models.discard_connection()

    def _next_batch(self) -> list[Outcome] | None:
        """Wait up to 0.2 s for an outcome; return it with those waiting behind it (up to BATCH), or None."""
        try:
            batch = [self._done.get(timeout=0.2)]
        except queues.Empty:
            return None
        while len(batch) < BATCH:
            try:
                batch.append(self._done.get_nowait())
            except queues.Empty:
                break
        return batch

    def _settle(self, item: Claimed, webhook: Webhook, started: datetime.datetime, result: Result) -> None:
        delivery = item.delivery
        name = jobs_queue.retry_id(delivery.uuid, item.generation, delivery.tries + 1)
        try:
            reconnecting(record, delivery, item.generation, webhook, started, result, self.settings, name)
            self.engine.database_outage.back()
        except AttemptFailed as failed:
            retry.schedule(self.target, delivery.id, item.generation, failed, self.settings, name)
        except DATABASE_ERRORS as exc:
            # Unrecorded: the claim expires and the relay's rescue hands the delivery back (at least once).
            self.engine.database_outage.lost(exc)
        except Exception:
            log.exception("delivery %s: recording the attempt failed", delivery.uuid)
        finally:
            self._after(item, webhook, result)

    def _settle_all(self, batch: list[Outcome]) -> None:
        """Write several outcomes in one transaction; should it fail, write them one by one."""
        written: list[tuple[str, Written]] = []
        try:
            models.db.connect(reuse_if_open=True)
            with models.atomic():
                for item, webhook, started, result in batch:
                    name = jobs_queue.retry_id(item.delivery.uuid, item.generation, item.delivery.tries + 1)
                    args = (item.delivery, item.generation, webhook, started, result, self.settings, name)
                    written.append((name, write(*args)))
        except Exception:  # noqa: BLE001 - nothing was committed: each outcome gets its own try (and reconnection) below
            for one in batch:
                self._settle(*one)
            return
        self.engine.database_outage.back()
        for (item, webhook, _started, result), (name, done) in zip(batch, written, strict=True):
            try:
                conclude(item.delivery, webhook, result, *done)
            except AttemptFailed as failed:
                retry.schedule(self.target, item.delivery.id, item.generation, failed, self.settings, name)
            finally:
                self._after(item, webhook, result)

    def _after(self, item: Claimed, webhook: Webhook, result: Result) -> None:
        """Let go of a settled outcome, and mark its webhook slow when the attempt took half the deadline."""
        with self._lock:
            self._unrecorded.discard(item)
        self.engine.settled()
        if result.duration_ms >= self.settings.webhook_timeout * 500:
            self.engine.slow.mark(webhook.id)

    def _tend(self, renewing: bool) -> None:
        """Have the engine re-read its waiting webhooks and renew lapsing claims, with those of outcomes still to write."""
        # Outcomes still to write are looked at every time (each second): their claims have little left.
        soon = time.monotonic() + 2 * self.renew_every + self.settings.webhook_timeout + 1
        with self._lock:
            unrecorded = [item for item in self._unrecorded if item.lease < soon]
        self.engine.tend(unrecorded, renewing, soon)


__all__ = ["BATCH", "Recorder", "conclude", "observe", "record", "write"]
