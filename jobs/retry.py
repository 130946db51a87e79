"""Retry or give up: what follows a failed attempt, decided as data, then the job of the next attempt.

`decide` is pure: from the attempt's result, the webhook's type, how many attempts were made and the
retry delays, it says whether the delivery succeeded, waits for another attempt (and how long:
`next_delay`, which honours a receiver's Retry-After within bounds) or failed for good. The budget
is the delivery row's `tries` against RISKAPI_WEBHOOK_RETRY_DELAYS. `settle_webhook` applies a final
outcome to the webhook (its failure count; disabled after too many, or at once on Zapier's 410), and
`schedule` gives a retry the RQ job that will make it, under a deterministic id (jobs.queue.retry_id).
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Sequence
from typing import NamedTuple

import redis
from rq import Queue

from jobs import queue as jobs_queue
from jobs.https.transport import Result
from models.webhooks import FAILED, PENDING, SUCCEEDED, Webhook
from riskapi.config import Settings
from riskapi.observability import metrics

log = logging.getLogger("riskapi.delivery")

# A receiver's Retry-After is honoured between these bounds (seconds): never hammered, never parked for days.
RETRY_AFTER_MIN = 1.0
RETRY_AFTER_CAP = 3600.0
ZAPIER_GONE = 410


class AttemptFailed(Exception):
    """An attempt failed and another one is due: RQ's Retry takes it from here (in a batch or in the
    engine, a job of the delivery's own, scheduled with what this carries)."""

    def __init__(self, message: str, delivery_uuid: uuid.UUID, tries: int, next_attempt: datetime.datetime) -> None:
        super().__init__(message)
        self.delivery_uuid = delivery_uuid
        self.tries = tries
        self.next_attempt = next_attempt


class Decision(NamedTuple):
    """What follows an attempt: the outcome logged, the delivery's new status, and seconds until the next attempt."""

    outcome: str
    status: str
    wait: float | None


def pause(retry_after: float) -> float:
    """Return how long a receiver's Retry-After is honoured: within RETRY_AFTER_MIN and RETRY_AFTER_CAP."""
    return min(max(retry_after, RETRY_AFTER_MIN), RETRY_AFTER_CAP)


def next_delay(tries: int, delays: Sequence[float], retry_after: float | None = None) -> float | None:
    """Return the seconds before the attempt after attempt `tries` failed, or None once the budget is spent."""
    if tries > len(delays):
        return None
    return pause(retry_after) if retry_after is not None else delays[tries - 1]


def decide(result: Result, webhook_type: str, tries: int, delays: Sequence[float]) -> Decision:
    """Decide what follows attempt `tries`: success, another attempt (and when), or failure."""
    if result.ok:
        return Decision("succeeded", SUCCEEDED, None)
    if webhook_type == "zapier" and result.status == ZAPIER_GONE:
        return Decision("gone: webhook disabled", FAILED, None)
    wait = next_delay(tries, delays, result.retry_after)
    return Decision("retry", PENDING, wait) if wait is not None else Decision("failed", FAILED, None)


def error_text(result: Result) -> str | None:
    """Return the attempt log's error of a result: a Retry-After is logged with the wait it was given."""
    if result.retry_after is None:
        return result.error
    waited = pause(result.retry_after)
    return f"Retry-After {result.retry_after:g} s" + (f" (waiting {waited:g} s)" if waited != result.retry_after else "")


def settle_webhook(webhook: Webhook, outcome: str, settings: Settings, now: datetime.datetime) -> None:
    """Reset or count the webhook's consecutive failures; disable it when it must be."""
    if outcome == "succeeded":
        if webhook.failures:
            Webhook.update(failures=0).where(Webhook.id == webhook.id).execute()
    elif outcome.startswith("gone"):
        Webhook.update(disabled=now, updated=now).where((Webhook.id == webhook.id) & Webhook.disabled.is_null()).execute()
        metrics.DISABLED.inc()
        log.warning("webhook %s answered 410 Gone: disabled", webhook.uuid)
    elif outcome == "failed":
        Webhook.update(failures=Webhook.failures + 1).where(Webhook.id == webhook.id).execute()
        limit = settings.webhook_failure_limit
        disabled = (
            Webhook.update(disabled=now, updated=now)
            .where((Webhook.id == webhook.id) & Webhook.disabled.is_null() & (Webhook.failures >= limit))
            .execute()
        )
        if disabled:
            metrics.DISABLED.inc()
            log.warning("webhook %s failed %d deliveries in a row: disabled", webhook.uuid, limit)


def schedule(
    target: Queue | None, delivery_id: int, generation: int, failed: AttemptFailed, settings: Settings, name: str | None = None
) -> None:
    """Give a delivery whose attempt failed a job of its own, due when the database says; without Redis, leave it to rescue."""
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
            name,
        )
    except (redis.RedisError, OSError) as exc:
        # The database says when the next attempt is due; with no job to make it, rescue will.
        log.warning("%s; retry not scheduled (%s): the relay's rescue will hand it back", failed, exc)
        return
    log.info("%s; retry scheduled", failed)


__all__ = ["AttemptFailed", "Decision", "decide", "error_text", "next_delay", "pause", "schedule", "settle_webhook"]
