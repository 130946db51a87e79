"""The delivery job: one signed HTTPS POST of an event to a webhook, its outcome written to the database.

A job takes ids and reloads everything; running it twice is harmless:

* only the job of the delivery's current `generation` may act (the relay bumps it at every
  hand-over to RQ, so a superseded or duplicated job finds itself out of date and does nothing);
* an attempt first claims the delivery until `now + timeout + stale_after`, so two runs of the
  same job never post at once, and a worker killed mid-attempt leaves a claim that simply expires;
* a delivery that is no longer pending is left alone.

A failed attempt raises `AttemptFailed` so that the next one is scheduled on RQ (the worker runs with
its scheduler): by RQ's Retry when the job made the attempt itself, by jobs.inflight when the worker's
attempts in flight made it; the database records when that will be and is what the delivery log shows.

A database connection that breaks (a restarted server, `pg_terminate_backend`) is thrown away and
the step that needed it (claim, or record) runs once more on a new one. A job that still fails on
the database raises: the delivery stays pending, for RQ's Retry or the relay's rescue.
"""

from __future__ import annotations

import datetime
import functools
import logging
import time

import peewee

import models
from jobs import transport
from models import utcnow
from models.webhooks import FAILED, PENDING, SUCCEEDED, Attempt, Delivery, Event, Webhook
from riskapi import __version__
from riskapi.config import Settings
from riskapi.observability import metrics
from riskapi.webhooks import signing

log = logging.getLogger("riskapi.delivery")
# One line per attempt (configured by `riskapi worker` like the API's request lines).
attempts = logging.getLogger("riskapi.attempts")

# A receiver's Retry-After is honoured between these bounds (seconds): never hammered, never parked for days.
RETRY_AFTER_MIN = 1.0
RETRY_AFTER_CAP = 3600.0

USER_AGENT = f"riskapi-webhooks/{__version__}"
ZAPIER_GONE = 410
# What a lost or broken database connection raises (peewee wraps the driver's errors in these).
DATABASE_ERRORS = (peewee.DatabaseError, peewee.InterfaceError)


class AttemptFailed(Exception):
    """An attempt failed and another one is due: RQ's Retry takes it from here (in a batch, a job
    of the delivery's own, scheduled with what this carries)."""

    def __init__(self, message: str, delivery_uuid=None, tries: int = 0, next_attempt=None):
        super().__init__(message)
        self.delivery_uuid = delivery_uuid
        self.tries = tries
        self.next_attempt = next_attempt


@functools.lru_cache(maxsize=1)
def worker_settings() -> Settings:
    """Return the worker process's settings (read once)."""
    return Settings.from_env()


def deliver(delivery_id: int, generation: int) -> str:
    """RQ entry point: hand one attempt of a delivery to the process's attempts in flight, or make it here."""
    from jobs import inflight

    engine = inflight.current()
    if engine is not None:
        return engine.take(delivery_id, generation)
    return attempt(delivery_id, generation, worker_settings())


def _reconnecting(step, *args):
    """Run a database step; after a database error, run it once more on a new connection."""
    for last in (False, True):
        try:
            # The worker keeps its connection between jobs (opening SQLite costs more than a job's queries).
            models.db.connect(reuse_if_open=True)
            return step(*args)
        except DATABASE_ERRORS:
            models.discard_connection()  # never back into the pool: it may be broken
            if last:
                raise


def headers(event: str, delivery_uuid, webhook_uuid, signature: str, standard: tuple[int, str] | None = None) -> dict:
    """Return the headers of a delivery request; `standard` = (webhook-timestamp, webhook-signature) adds
    the Standard Webhooks headers, whose webhook-id is the delivery's uuid (like Service-Delivery)."""
    sent = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Service-Event": event,
        "Service-Delivery": str(delivery_uuid),
        "Service-Signature": signature,
        "Service-Webhook": str(webhook_uuid),
    }
    if standard is not None:
        timestamp, standard_signature = standard
        sent["webhook-id"] = str(delivery_uuid)
        sent["webhook-timestamp"] = str(int(timestamp))
        sent["webhook-signature"] = standard_signature
    return sent


def signed_headers(
    event: str, delivery_uuid, webhook_uuid, body: bytes, secrets: list[str], timestamp: int | None = None
) -> dict:
    """Return the headers of one attempt: Service-Signature by secrets[0] (the current secret) alone,
    webhook-signature by every secret given (current first), timestamped now unless told."""
    timestamp = int(time.time()) if timestamp is None else int(timestamp)
    standard = signing.standard_signatures(secrets, str(delivery_uuid), timestamp, body)
    return headers(event, delivery_uuid, webhook_uuid, signing.sign(secrets[0], body), (timestamp, standard))


def signing_secrets(webhook, now) -> list[str]:
    """Return the secrets that sign an attempt made now: the current one, then the one rotate-secret
    replaced while its grace period lasts."""
    previous, until = webhook.previous_secret, webhook.previous_secret_expires
    if previous and until is not None and now < until and previous != webhook.secret:
        return [webhook.secret, previous]
    return [webhook.secret]


def _load(delivery_id: int):
    query = (
        Delivery.select(Delivery, Webhook, Event.body)
        .join_from(Delivery, Webhook)
        .join_from(Delivery, Event)
        .where(Delivery.id == delivery_id)
    )
    return query.first()


def attempt(delivery_id: int, generation: int, settings: Settings) -> str:
    """Make one attempt of a delivery if it is still this job's to make; return what happened."""
    claimed = _reconnecting(_claim, delivery_id, generation, settings)
    if isinstance(claimed, str):
        return claimed
    delivery, webhook, started = claimed
    body = delivery.stored_event.body.encode()
    result = transport.post(
        webhook.url,
        body,
        signed_headers(delivery.event, delivery.uuid, webhook.uuid, body, signing_secrets(webhook, utcnow())),
        timeout=settings.webhook_timeout,
        allow_private=settings.webhook_allow_private,
        ca_bundle=settings.webhook_ca_bundle or None,
    )
    # After a broken connection the whole transaction is written again: the attempt made is not lost.
    return _reconnecting(_record, delivery, generation, webhook, started, result, settings)


def _claim(delivery_id: int, generation: int, settings: Settings, wait: bool = True):
    """Claim a delivery for one attempt: return (delivery, webhook, now), or why there is nothing to do.

    wait=False: a retry that RQ runs early is claimed at once (jobs.inflight holds it until it is due).
    """
    for waited in (not wait, True):
        delivery = _load(delivery_id)
        if delivery is None:
            return "gone"
        if delivery.generation != generation:
            return "superseded"
        if delivery.status != PENDING:
            return "done"
        webhook = delivery.webhook
        if webhook.disabled is not None:
            _finish(delivery, generation, FAILED)
            return "webhook disabled"
        # RQ stores scheduled times in whole seconds and may run a retry up to a second early:
        # wait for the due time, then read everything again (the url or secret may have changed).
        early = (delivery.next_attempt - utcnow()).total_seconds() if delivery.next_attempt else 0
        if waited or not 0 < early <= 2:
            break
        time.sleep(early)
    now = utcnow()
    lease = now + datetime.timedelta(seconds=settings.webhook_timeout + settings.webhook_stale_after)
    claimed = (
        Delivery.update(locked_until=lease, updated=now)
        .where(
            (Delivery.id == delivery_id)
            & (Delivery.generation == generation)
            & (Delivery.status == PENDING)
            & (Delivery.locked_until.is_null() | (Delivery.locked_until < now))
        )
        .execute()
    )
    if not claimed:
        return "busy"
    return delivery, webhook, now


def _record(
    delivery, generation: int, webhook, started, result: transport.Result, settings: Settings, next_job: str | None = None
) -> str:
    """Write the attempt and its consequences in one transaction; raise AttemptFailed to retry.

    next_job names the RQ job that will make the next attempt, when it is not the delivery's own
    (jobs.queue.job_id): the relay's rescue looks that job up.
    """
    with models.atomic():
        written = _write(delivery, generation, webhook, started, result, settings, next_job)
    return _conclude(delivery, webhook, result, *written)


def _write(delivery, generation: int, webhook, started, result: transport.Result, settings: Settings, next_job: str | None):
    """Write the attempt and its consequences in the caller's transaction; return (outcome, changed, tries, next_attempt)."""
    tries = delivery.tries + 1
    delays = list(settings.webhook_retry_delays)
    now = utcnow()
    error = result.error
    if result.retry_after is not None:
        # The receiver said when to come back (429/503 Retry-After): honoured, within bounds, and logged.
        pause = min(max(result.retry_after, RETRY_AFTER_MIN), RETRY_AFTER_CAP)
        error = f"Retry-After {result.retry_after:g} s" + (f" (waiting {pause:g} s)" if pause != result.retry_after else "")
    attempt = {"at": started, "status": result.status, "error": error, "duration_ms": result.duration_ms}
    Attempt.insert(delivery=delivery.id, **attempt).execute()
    if result.ok:
        outcome, status, next_attempt = "succeeded", SUCCEEDED, None
    elif webhook.type == "zapier" and result.status == ZAPIER_GONE:
        outcome, status, next_attempt = "gone: webhook disabled", FAILED, None
    elif tries <= len(delays):
        outcome, status = "retry", PENDING
        wait = pause if result.retry_after is not None else delays[tries - 1]
        next_attempt = now + datetime.timedelta(seconds=wait)
    else:
        outcome, status, next_attempt = "failed", FAILED, None
    changed = (
        # batch=None: whatever comes next is the delivery's own job (see jobs.queue), unless named.
        Delivery.update(
            status=status,
            tries=tries,
            next_attempt=next_attempt,
            locked_until=None,
            batch=next_job if status == PENDING else None,
            updated=now,
        )
        .where((Delivery.id == delivery.id) & (Delivery.generation == generation))
        .execute()
    )
    if changed:
        _webhook_after(webhook, outcome, settings, now)
    return outcome, changed, tries, next_attempt


def _conclude(delivery, webhook, result: transport.Result, outcome: str, changed: int, tries: int, next_attempt) -> str:
    """Once the attempt is committed: count and log it; raise AttemptFailed when a retry is due."""
    _observe(delivery, webhook, result, outcome if changed else "superseded", tries)
    if outcome == "retry" and changed:
        raise AttemptFailed(
            f"delivery {delivery.uuid} attempt {tries}: {result.error or result.status}", delivery.uuid, tries, next_attempt
        )
    return outcome


def _observe(delivery, webhook, result: transport.Result, outcome: str, tries: int) -> None:
    """Count the attempt in the metrics and write its one log line (ids, status, duration; never a secret or body)."""
    metrics.ATTEMPTS.labels("succeeded" if result.ok else "failed").inc()
    if outcome == "retry":
        metrics.RETRIES.inc()
    elif outcome != "superseded":
        metrics.SETTLED.labels("succeeded" if outcome == "succeeded" else "failed").inc()
    if attempts.isEnabledFor(logging.INFO):
        fields = {
            "delivery": str(delivery.uuid),
            "webhook": str(webhook.uuid),
            "attempt": tries,
            "status": result.status if result.status is not None else "-",
            "duration_ms": result.duration_ms,
            "outcome": outcome,
        }
        attempts.info("attempt", extra={"fields": fields})


def _webhook_after(webhook, outcome: str, settings: Settings, now) -> None:
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


def _finish(delivery, generation: int, status: str) -> None:
    now = utcnow()
    Delivery.update(status=status, next_attempt=None, locked_until=None, updated=now).where(
        (Delivery.id == delivery.id) & (Delivery.generation == generation) & (Delivery.status == PENDING)
    ).execute()


__all__ = ["DATABASE_ERRORS", "AttemptFailed", "attempt", "deliver", "headers", "signed_headers", "signing_secrets"]
