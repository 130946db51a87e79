"""Outcomes: what one attempt writes to the database, in one transaction, and what follows once it is committed.

`record` writes one attempt: its row in the attempt log, the delivery's next state as jobs.retry
decides it (settled, or pending with its next attempt), and the webhook's health; only the job of
the delivery's current generation changes the delivery. Once committed, the attempt is counted
and logged, and a due retry raises AttemptFailed for the caller to schedule (jobs.retry.schedule).
A worker's engine has its recorder thread (jobs.recorder) call these; a lone job calls `record`.
"""

from __future__ import annotations

import datetime
import logging

import models
from jobs import retry
from jobs.https.transport import Result
from jobs.retry import AttemptFailed
from models import utcnow
from models.webhooks import PENDING, Attempt, Delivery, Webhook
from riskapi.config import Settings
from riskapi.observability import metrics

# One line per attempt (configured by `riskapi worker` like the API's request lines).
attempts = logging.getLogger("riskapi.attempts")


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


__all__ = ["Written", "conclude", "observe", "record", "write"]
