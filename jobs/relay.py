"""The outbox relay: hands committed deliveries to RQ, and hands back those RQ lost.

Any number of relays may run (one per worker process) against one database and one Redis:

* `relay_pending` takes waiting deliveries (`relayed IS NULL`) under a row lock (PostgreSQL:
  `FOR UPDATE SKIP LOCKED`; SQLite: its single writer lock), bumps their generation, records the
  batch job that will carry each (jobs.queue.plan), commits, and only then enqueues the jobs. If
  Redis is unreachable the rows are handed back and tried again. Oldest first, but a pass that cannot
  take them all puts each webhook's oldest waiting delivery ahead (up to HEADS, newest of them first,
  among the newest HEADS_WINDOW deliveries): one webhook's burst fills passes, not another webhook's wait.
* `rescue` finds pending deliveries whose job should have run long ago (`stale_after` seconds) and
  that RQ will not run: the job vanished (Redis restarted empty, or the relay died between commit
  and enqueue), ended without settling the delivery, was taken or started by a worker that died
  (its claim expired), or sits scheduled while no scheduler runs. A batch job counts for each
  delivery it still carries: a batch that runs longer than `stale_after` has its unclaimed
  deliveries handed back, and finds them superseded when it gets to them. They are marked waiting
  again, so the next `relay_pending` enqueues a new generation and any old job left behind finds
  itself superseded. After a database outage the rescue waits (jobs.outages.RESCUE_GRACE): claims
  may have lapsed while nobody could renew them, and a live worker renews its own first thing when
  the database answers; what is still lapsed after the grace belongs to a worker that is gone.

`run` rides out Redis and database outages of any length: it retries with capped backoff, throws
away a broken database connection, and reports to the process's `Outage`s (one line each way).
"""

from __future__ import annotations

import datetime
import logging
import threading
import time

import peewee
import redis

import models
from foundation.config import Settings
from jobs import queue as jobs_queue
from jobs import retention
from jobs.outages import DATABASE_ERRORS, RESCUE_GRACE, Backoff, Outage
from models import delivery_states, utcnow
from models.webhooks import PENDING, Delivery
from webhooks import wakeups as wake

log = logging.getLogger("riskapi.relay")

BATCH = 500
# Of a full pass, at most this many are webhooks' oldest deliveries taken ahead of the rest, found among
# the newest HEADS_WINDOW deliveries.
HEADS = 100
HEADS_WINDOW = 10_000


class Relay:
    """Moves deliveries from the database's outbox to the RQ queue."""

    def __init__(
        self,
        connection: redis.Redis,
        settings: Settings,
        redis_outage: Outage | None = None,
        database_outage: Outage | None = None,
    ) -> None:
        self.connection = connection
        self.settings = settings
        self.queue = jobs_queue.queue(connection, settings.webhook_queue)
        self.bulk = jobs_queue.bulk(connection, settings.webhook_queue)
        self.retries = jobs_queue.retries(connection, settings.webhook_queue)
        self.bursting: set[int] = set()  # webhooks with deliveries in the bulk lane of the previous pass (jobs.queue.lanes)
        self.redis_outage: Outage = redis_outage or Outage("Redis", log)
        self.database_outage: Outage = database_outage or Outage("database", log)

    def relay_pending(self, limit: int = BATCH) -> int:
        """Enqueue the jobs of waiting deliveries; return how many were handed over."""
        # The status written into the text, as the partial index's predicate is (models.webhooks, delivery_waiting).
        waiting = (Delivery.relayed.is_null()) & (Delivery.status == peewee.SQL(f"'{PENDING}'"))
        if not Delivery.select(Delivery.id).where(waiting).exists():
            return 0
        now = utcnow()
        with models.atomic():
            rows = self._take(waiting, limit)
            if len(rows) == limit:
                # A backlog: each webhook's oldest waiting delivery goes first, so a webhook with one new
                # delivery does not wait for the passes that take another's burst (bench/isolation.py).
                # Newest heads first: a webhook whose oldest waiting delivery is new has no backlog of its own.
                # Only the newest HEADS_WINDOW deliveries are looked at, so a pass costs the same whatever
                # the backlog (after a long Redis outage, millions may wait).
                # Two statements, not one with a subquery: PostgreSQL planned that one, on the statistics of a
                # table a burst had just filled, as a rescan per row (seconds a pass).
                newest = Delivery.select(peewee.fn.MAX(Delivery.id)).scalar() or 0
                head = peewee.fn.MIN(Delivery.id)
                heads = Delivery.select(head).where(waiting & (Delivery.id > newest - HEADS_WINDOW)).group_by(Delivery.webhook)
                found = [first for (first,) in models.tuples(heads.order_by(head.desc()).limit(HEADS))]
                ahead = self._take(waiting & Delivery.id.in_(found), HEADS, Delivery.id.desc()) if found else []
                taken = {row[0] for row in ahead}
                rows = ahead + [row for row in rows if row[0] not in taken][: limit - len(ahead)]
            if not rows:
                return 0
            ids = [row[0] for row in rows]
            items = [(delivery_id, uuid, generation + 1, tries, hook) for delivery_id, uuid, generation, tries, hook in rows]
            first, rest, self.bursting = jobs_queue.lanes(items, bursting=self.bursting)
            planned, bulk = jobs_queue.plan(first), jobs_queue.plan(rest, jobs_queue.BULK_BATCH_SIZE)
            # The batch named is what rescue must look up for these deliveries.
            named = [(name, [d[0] for d in group]) for name, group in planned + bulk if name is not None]
            delivery_states.relay(ids, named, now)
        try:
            delays, timeout = self.settings.webhook_retry_delays, self.settings.webhook_timeout
            jobs_queue.enqueue(self.queue, planned, delays, timeout)
            jobs_queue.enqueue(self.bulk, bulk, delays, timeout)
        except (redis.RedisError, OSError):
            # Nothing is lost: the rows wait for the next pass (a job that did get through is superseded).
            delivery_states.unrelay(ids, now)
            raise
        return len(rows)

    @staticmethod
    def _take(where: peewee.Expression, limit: int, order: peewee.Node = Delivery.id) -> list[tuple]:
        """Select and lock up to `limit` deliveries in `order` (oldest first), as (id, uuid, generation, tries, webhook)."""
        query = (
            Delivery.select(Delivery.id, Delivery.uuid, Delivery.generation, Delivery.tries, Delivery.webhook)
            .where(where)
            .order_by(order)
            .limit(limit)
        )
        if not models.is_sqlite():
            query = query.for_update(skip_locked=True)
        return list(models.tuples(query))

    def rescue(self, limit: int = BATCH) -> int:
        """Hand back pending deliveries whose job RQ will not run; return how many."""
        now = utcnow()
        cutoff = now - datetime.timedelta(seconds=self.settings.webhook_stale_after)
        rows = list(
            models.tuples(
                Delivery.select(Delivery.id, Delivery.uuid, Delivery.generation, Delivery.batch)
                .where(
                    (Delivery.status == PENDING)
                    & (Delivery.relayed < cutoff)
                    & (Delivery.next_attempt < cutoff)
                    & (Delivery.locked_until.is_null() | (Delivery.locked_until < now))
                )
                .order_by(Delivery.next_attempt)
                .limit(limit)
            )
        )
        lost = self._lost(rows, cutoff) if rows else []
        if not lost:
            return 0
        # A batch that runs longer than stale_after may have claimed one since the select: the claim is kept.
        delivery_states.rescue(lost, now)
        log.warning("handed back %d deliveries whose jobs were lost", len(lost))
        return len(lost)

    def _lost(self, rows: list[tuple], cutoff: datetime.datetime) -> list[tuple[int, int]]:
        """Return the (delivery id, generation) of rows (id, uuid, generation, batch) whose job RQ will not run."""
        # A delivery's job is its batch's while it has one, else its own.
        jobs = [
            (batch or jobs_queue.job_id(uuid, generation), delivery_id, generation)
            for delivery_id, uuid, generation, batch in rows
        ]
        known = jobs_queue.statuses(self.connection, list(dict.fromkeys(name for name, _, _ in jobs)))
        # A job that a worker took off the queue but never started (it died, or lost Redis, in between)
        # still says "queued", though no queue holds it any more: workers serving two queues take jobs
        # with BLPOP, not into RQ's intermediate queue. Only a job still in its queue's list will run.
        waiting: set = set()
        if any(status == "queued" for status, _ in known.values()):
            waiting = {name for lane in (self.queue, self.bulk, self.retries) for name in lane.get_job_ids()}
        lost = []
        for name, delivery_id, generation in jobs:
            status, started = known[name]
            if status == "deferred" or (status == "queued" and name in waiting):
                continue  # a backlog, not a loss
            if status == "started" and started is not None and started > cutoff:
                continue  # picked up just now
            lost.append((delivery_id, generation))
        return lost

    def run(self, stop: threading.Event) -> None:
        """Relay until stop is set, riding out database and Redis outages."""
        interval = max(self.settings.webhook_relay_interval, 0.005)
        rescue_every = min(max(self.settings.webhook_stale_after / 2, 0.5), 10.0)
        next_rescue = 0.0
        backoff = Backoff()
        while not stop.is_set():
            try:
                models.check_out()
                moved = self.relay_pending()
                self.database_outage.back()
                if moved:
                    self.redis_outage.back()  # only a pass that enqueued has heard from Redis
                # The process's outage, whoever noticed it: every relay polls, so each sees a database outage.
                if time.monotonic() >= next_rescue and self.database_outage.quiet_for() >= RESCUE_GRACE:
                    next_rescue = time.monotonic() + rescue_every
                    self.rescue()
                    retention.offer(self.connection, self.queue, self.settings.retention_days)
                backoff.reset()
                models.give_back()  # not held while it waits for a wake
                if moved >= BATCH or self._woken(interval):
                    continue
                delay = 0.0
            except DATABASE_ERRORS as exc:
                models.give_back(exc)
                self.database_outage.lost(exc)
                delay = backoff.next()
            except (redis.RedisError, OSError) as exc:
                self.redis_outage.lost(exc)
                delay = backoff.next()
            except Exception:
                # A thread that dies relays nothing ever again: report and carry on.
                log.exception("relay: unexpected error; retrying")
                delay = backoff.next()
            finally:
                models.give_back()  # a pass takes its connection (models.check_out) and gives it back
            if delay:
                stop.wait(delay)

    def _woken(self, interval: float) -> bool:
        """Wait up to one interval for the API to say a write was answered (webhooks.wakeups); False if none came."""
        try:
            return wake.wait(self.connection, self.settings.webhook_queue, interval)
        except (redis.RedisError, OSError):
            time.sleep(interval)  # polling, as before: the next pass finds out what Redis is up to
            return False
