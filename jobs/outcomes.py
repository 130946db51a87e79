"""Outcomes: what an attempt came to, written in one transaction, then retry or give up.

`write` records one attempt: its row in the attempt log, the delivery's next state as `decide` says
(settled, or pending with its next attempt; models.delivery_states writes it) and the webhook's health
(`settle_webhook`: its failure count; disabled after too many, or at once on Zapier's 410); only the job
of the delivery's current generation changes the delivery. `decide` is pure: from the result, the
webhook's type, the attempts made and the retry delays, it says whether the delivery succeeded, waits
for another attempt (how long: `next_delay`, which honours a receiver's Retry-After within bounds) or
failed for good; the budget is the delivery row's `tries` against RISKAPI_WEBHOOK_RETRY_DELAYS. Once
committed (`conclude`), the attempt is counted and logged, and a due retry raises AttemptFailed, for
`schedule` to give it the RQ job that will make it, under a deterministic id (jobs.queue.retry_id). A
worker's recorder thread (jobs.recorder) calls these. An attempt whose webhook or delivery was deleted
while it was in flight has no row left to be written to (its attempt row's foreign key fails): `record`
logs it as such (WEBHOOK_DELETED, DELIVERY_DELETED), one attempt line, nothing written and nothing lost.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Sequence
from typing import NamedTuple

import orjson
import peewee
import redis
from rq import Queue

import models
from foundation import metrics
from foundation.config import Settings
from jobs import queue as jobs_queue
from jobs.https.transport import Result
from models import delivery_states, inserts, utcnow
from models.webhooks import FAILED, PENDING, SUCCEEDED, Attempt, Delivery, Webhook
from webhooks import notices

log = logging.getLogger("riskapi.delivery")

# A receiver's Retry-After is honoured between these bounds (seconds): never hammered, never parked for days.
RETRY_AFTER_MIN = 1.0
RETRY_AFTER_CAP = 3600.0
ZAPIER_GONE = 410
# The outcome of an attempt whose rows were deleted while it was in flight: nothing to write, nothing lost.
WEBHOOK_DELETED = "webhook deleted meanwhile"
DELIVERY_DELETED = "delivery deleted meanwhile"
# Outcomes that settle no delivery (the metrics count none of them as settled).
_UNSETTLED = frozenset({"superseded", WEBHOOK_DELETED, DELIVERY_DELETED})


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


def exchange(result: Result) -> dict[str, str | None]:
    """Return the attempt log's columns of what went and what came back: the request's headers and the answer, as JSON."""
    sent = None if result.request_headers is None else orjson.dumps(result.request_headers).decode()
    answer = result.response
    shown = {"headers": answer.headers, "body": answer.body, "body_truncated": answer.truncated} if answer else None
    return {"request_headers": sent, "response": None if shown is None else orjson.dumps(shown).decode()}


def settle_webhook(webhook: Webhook, outcome: str, settings: Settings, now: datetime.datetime) -> None:
    """Reset or count the webhook's consecutive failures; disable it when it must be."""
    if outcome == "succeeded":
        if webhook.failures:
            Webhook.update(failures=0).where(Webhook.id == webhook.id).execute()
    elif outcome.startswith("gone"):
        gone = Webhook.update(disabled=now, updated=now).where((Webhook.id == webhook.id) & Webhook.disabled.is_null()).execute()
        metrics.DISABLED.inc()
        log.warning("webhook %s answered 410 Gone: disabled", webhook.uuid)
        if gone:
            notices.webhook_disabled(webhook.agency_id, webhook.uuid, notices.GONE, now, _failures(webhook))
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
            notices.webhook_disabled(webhook.agency_id, webhook.uuid, notices.FAILURES, now, _failures(webhook))


def _failures(webhook: Webhook) -> int:
    """Return the webhook's count of deliveries failed in a row, as this transaction left it."""
    return Webhook.select(Webhook.failures).where(Webhook.id == webhook.id).scalar() or 0


def announce(delivery: Delivery, webhook: Webhook, result: Result, decision: Decision) -> None:
    """Once the webhook is settled: tell the agency's webhooks of a delivery that failed for good (webhooks.notices)."""
    if decision.status == FAILED:
        notices.delivery_failed(webhook.agency_id, delivery.uuid, webhook.uuid, delivery.event, result.status, error_text(result))


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
    (jobs.queue.retry_id): the relay's rescue looks that job up. When the webhook or the delivery was
    deleted meanwhile, nothing is written: the attempt's line says so, and its outcome is returned.
    """
    try:
        with models.atomic():
            written = write(delivery, generation, webhook, started, result, settings, next_job)
    except peewee.IntegrityError:
        deleted = _deleted(delivery, webhook)
        if deleted is None:
            raise  # a constraint broken with every row there: a bug, for the caller to log
        observe(delivery, webhook, result, deleted, delivery.tries + 1)
        return deleted
    return conclude(delivery, webhook, result, *written)


def _deleted(delivery: Delivery, webhook: Webhook) -> str | None:
    """Return which of an attempt's rows is gone (the attempt row's foreign key found no delivery), or None."""
    if not Webhook.select(Webhook.id).where(Webhook.id == webhook.id).exists():
        return WEBHOOK_DELETED  # its deliveries went with it (ON DELETE CASCADE)
    if not Delivery.select(Delivery.id).where(Delivery.id == delivery.id).exists():
        return DELIVERY_DELETED
    return None


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
    entry = {"at": started, "status": result.status, "error": error_text(result), "duration_ms": result.duration_ms}
    entry.update(exchange(result))
    Attempt.insert(delivery=delivery.id, **entry).execute()
    decision = decide(result, webhook.type, tries, list(settings.webhook_retry_delays))
    next_attempt = None if decision.wait is None else now + datetime.timedelta(seconds=decision.wait)
    changed = delivery_states.settle(delivery.id, generation, decision.status, tries, next_attempt, next_job, now)
    if changed:
        settle_webhook(webhook, decision.outcome, settings, now)
        announce(delivery, webhook, result, decision)
    return decision.outcome, changed, tries, next_attempt


Attempted = tuple[Delivery, int, Webhook, datetime.datetime, Result, str | None]  # write()'s arguments but settings


def write_all(attempts: list[Attempted], settings: Settings) -> list[Written]:
    """Write several attempts as `write` does each, in the caller's transaction, in fewer statements: one insert
    of their attempt rows and one update of the deliveries that succeeded; return what `write` returns, in order."""
    now = utcnow()
    entries = [
        {"delivery": d.id, "at": started, "status": r.status, "error": error_text(r), "duration_ms": r.duration_ms, **exchange(r)}
        for d, _, _, started, r, _ in attempts
    ]
    # models.inserts: the statement's text cached by its shape, not built by Peewee value by value.
    inserts.insert(Attempt, _ATTEMPT, entries)
    delays = list(settings.webhook_retry_delays)
    decisions = [decide(r, webhook.type, d.tries + 1, delays) for d, _, webhook, _, r, _ in attempts]
    changed = _succeeded(attempts, decisions, now)
    written: list[Written] = []
    cleared: set[int] = set()  # webhooks whose failures this batch reset since their last failure in it
    for (delivery, generation, webhook, _, result, next_job), decision in zip(attempts, decisions, strict=True):
        tries = delivery.tries + 1
        if decision.status == SUCCEEDED:
            done, next_attempt = int(delivery.id in changed), None
        else:
            next_attempt = None if decision.wait is None else now + datetime.timedelta(seconds=decision.wait)
            done = delivery_states.settle(delivery.id, generation, decision.status, tries, next_attempt, next_job, now)
        if done and not (decision.outcome == "succeeded" and webhook.id in cleared):
            settle_webhook(webhook, decision.outcome, settings, now)
            (cleared.add if decision.outcome == "succeeded" else cleared.discard)(webhook.id)
        if done and decision.status == FAILED:
            announce(delivery, webhook, result, decision)
        written.append((decision.outcome, done, tries, next_attempt))
    return written


_ATTEMPT = ("delivery", "at", "status", "error", "duration_ms", "request_headers", "response")


def _succeeded(attempts: list[Attempted], decisions: list[Decision], now: datetime.datetime) -> set[int]:
    """Settle the deliveries whose attempt succeeded, by tries, in one update each; return the ids changed."""
    by_tries: dict[int, list[tuple[int, int]]] = {}
    for (delivery, generation, *_), decision in zip(attempts, decisions, strict=True):
        if decision.status == SUCCEEDED:
            by_tries.setdefault(delivery.tries + 1, []).append((delivery.id, generation))
    return delivery_states.succeed_many(by_tries, now) if by_tries else set()


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
    if outcome == "retry" and changed and next_attempt is not None:  # a retry always has its time (decide)
        raise AttemptFailed(
            f"delivery {delivery.uuid} attempt {tries}: {result.error or result.status}", delivery.uuid, tries, next_attempt
        )
    return outcome


def observe(delivery: Delivery, webhook: Webhook, result: Result, outcome: str, tries: int) -> None:
    """Count the attempt in the metrics and write its one log line (ids, status, duration; never a secret or body)."""
    metrics.ATTEMPTS.labels("succeeded" if result.ok else "failed").inc()
    if outcome == "retry":
        metrics.RETRIES.inc()
    elif outcome not in _UNSETTLED:
        metrics.SETTLED.labels("succeeded" if outcome == "succeeded" else "failed").inc()
    if attempts.isEnabledFor(logging.INFO):
        status = result.status if result.status is not None else "-"
        fields = {"delivery": str(delivery.uuid), "webhook": str(webhook.uuid), "attempt": tries, "status": status}
        attempts.info("attempt", extra={"fields": {**fields, "duration_ms": result.duration_ms, "outcome": outcome}})


__all__ = [
    "DELIVERY_DELETED",
    "WEBHOOK_DELETED",
    "Attempted",
    "AttemptFailed",
    "Decision",
    "Written",
    "announce",
    "conclude",
    "decide",
    "error_text",
    "exchange",
    "next_delay",
    "observe",
    "pause",
    "record",
    "schedule",
    "settle_webhook",
    "write",
    "write_all",
]
