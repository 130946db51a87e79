"""Retention: events, deliveries and attempt logs older than RISKAPI_RETENTION_DAYS are purged; so are expired idempotency keys.

Deletes go in small batches, each its own short transaction, so no table is locked for long and
API writes interleave. Pending deliveries are never purged (nor their events): what is owed is
still delivered, however old. Idempotency keys go once expired (RISKAPI_IDEMPOTENCY_KEY_TTL after
their first request, fixed then): the API already treats an expired key as unknown. Every relay
offers the job once an hour; a Redis lock lets one of them enqueue it per period, and any delivery
worker runs it (RQ job `jobs.retention.purge_older_than`). RISKAPI_RETENTION_DAYS=0 turns the job
off, key purges included (expired keys then stay in the table, unanswered). Listen sessions (`riskapi listen`)
that ended before the cutoff go too, with their deliveries, owed or not: no one is listening for them.
"""

from __future__ import annotations

import datetime
import logging

import peewee
import redis
from rq import Queue

import models
from models import utcnow
from models.idempotency import IdempotencyKey
from models.webhooks import LISTEN, PENDING, Attempt, Delivery, Event, Webhook

log = logging.getLogger("riskapi.retention")

BATCH = 500
# One purge per period across every host; the lock expires by itself if its holder dies.
PERIOD = 3600
LOCK = "riskapi:retention"


def purge(cutoff: datetime.datetime, batch: int = BATCH) -> dict[str, int]:
    """Delete settled deliveries (with their attempts) of events created before cutoff, then those events; return counts."""
    counts = {"attempts": 0, "deliveries": 0, "events": 0}
    # Events are indexed by creation time; a delivery is as old as its event.
    settled = Delivery.select(Delivery.id).join(Event).where((Event.created < cutoff) & (Delivery.status != PENDING))
    while ids := [row.id for row in settled.limit(batch)]:
        with models.atomic():
            counts["attempts"] += Attempt.delete().where(Attempt.delivery.in_(ids)).execute()
            counts["deliveries"] += Delivery.delete().where(Delivery.id.in_(ids)).execute()
    owed = Delivery.select(Delivery.id).where(Delivery.stored_event == Event.id)
    spent = Event.select(Event.id).where((Event.created < cutoff) & ~peewee.fn.EXISTS(owed))
    while ids := [row.id for row in spent.limit(batch)]:
        with models.atomic():
            counts["events"] += Event.delete().where(Event.id.in_(ids)).execute()
    return counts


def purge_sessions(cutoff: datetime.datetime, batch: int = BATCH) -> int:
    """Delete the listen sessions that ended before cutoff, their deliveries and attempts with them; return how many."""
    ended = Webhook.select(Webhook.id).where((Webhook.type == LISTEN) & (Webhook.listen_expires < cutoff))
    purged = 0
    while ids := [row.id for row in ended.limit(batch)]:
        with models.atomic():
            theirs = Delivery.select(Delivery.id).where(Delivery.webhook.in_(ids))
            Attempt.delete().where(Attempt.delivery.in_(theirs)).execute()
            Delivery.delete().where(Delivery.webhook.in_(ids)).execute()
            purged += Webhook.delete().where(Webhook.id.in_(ids)).execute()
    return purged


def purge_keys(now: datetime.datetime, batch: int = BATCH) -> int:
    """Delete the idempotency keys expired before now, in batches; return how many."""
    purged = 0
    while True:
        with models.atomic():
            deleted = IdempotencyKey.purge_expired(now, batch)
        purged += deleted
        if deleted < batch:
            return purged


def purge_older_than(days: int) -> dict[str, int]:
    """The RQ job: purge what is older than `days` days."""
    with models.db.connection_context():
        cutoff = utcnow() - datetime.timedelta(days=days)
        counts = purge(cutoff)
        counts["listen_sessions"] = purge_sessions(cutoff)
        counts["idempotency_keys"] = purge_keys(utcnow())
    log.info(
        "retention: purged %(events)d events, %(deliveries)d deliveries, %(attempts)d attempts,"
        " %(listen_sessions)d listen sessions, %(idempotency_keys)d keys",
        counts,
    )
    return counts


def offer(connection: redis.Redis, queue: Queue, days: int) -> bool:
    """Enqueue the purge if retention is on and no relay did in this period; return whether it was enqueued."""
    if days <= 0 or not connection.set(LOCK, "1", nx=True, ex=PERIOD):
        return False
    queue.enqueue(purge_older_than, days, job_timeout=PERIOD, result_ttl=PERIOD, failure_ttl=7 * 86400)
    return True
