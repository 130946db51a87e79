"""Attempts in flight: the HTTP part of deliveries, many at once in each worker process, fair between webhooks.

RQ's threads only claim a delivery (a few milliseconds of database work) and hand it here, so no
receiver, however slow, holds a thread that other deliveries queue behind. Here:

* up to RISKAPI_WEBHOOK_IN_FLIGHT attempts run at once, each in a pool thread of its own (the
  blocking, hardened jobs.transport.post; pool threads never touch the database);
* one webhook has at most RISKAPI_WEBHOOK_PER_WEBHOOK attempts running in a process, and one while
  it is marked slow (an attempt of it, in any process, took half the deadline or more within the
  last RISKAPI_WEBHOOK_SLOW_FOR seconds: a Redis key with that TTL). The rest wait in the webhook's
  own line, and lines take turns, so a backlog of one webhook is never ahead of another's delivery;
* one recorder thread writes every outcome (jobs.delivery._record, as a lone attempt does) and
  schedules retries on RQ; it also renews the claims of deliveries still waiting in a line (so the
  relay's rescue leaves them alone) and re-reads their webhooks (a new url or secret, a disabled one).

A delivery is claimed before it waits here, so no other worker takes it; if the process dies, its
claims expire and the relay's rescue hands them back, as before. A claim that could not be renewed
in time is let go unattempted, so no attempt runs on a claim that may have lapsed.
"""

from __future__ import annotations

import collections
import concurrent.futures
import datetime
import logging
import queue as queues
import threading
import time
from dataclasses import dataclass

import peewee
import redis

import models
from jobs import queue as jobs_queue
from jobs import transport
from jobs.broker import Outage
from jobs.delivery import DATABASE_ERRORS, AttemptFailed, _claim, _finish, _reconnecting, _record, signed_headers, signing_secrets
from jobs.pacing import Pacer
from models import utcnow
from models.webhooks import FAILED, PENDING, Delivery, Event, Webhook
from riskapi.config import Settings

log = logging.getLogger("riskapi.delivery")

_current: Engine | None = None


def current() -> Engine | None:
    """Return the engine of this worker process, if one runs (RQ jobs hand their attempts to it)."""
    return _current


def install(engine: Engine | None) -> None:
    """Make engine the one RQ jobs of this process hand their attempts to."""
    global _current
    _current = engine


@dataclass(eq=False)
class _Item:
    delivery: Delivery  # with its webhook and event body loaded
    generation: int
    due: float  # time.time() before which the attempt must not start (a retry RQ ran early, or its paced slot)
    lease: float  # time.monotonic() until which this process's claim holds


class Engine:
    """The attempts in flight of one worker process, with the lines of those waiting for their turn."""

    def __init__(self, settings: Settings, connection: redis.Redis, database_outage: Outage | None = None):
        self.settings = settings
        self.connection = connection
        self.target = jobs_queue.retries(connection, settings.webhook_queue)
        self.database_outage = database_outage or Outage("database", log)
        self.capacity = max(settings.webhook_in_flight, 1)
        self.per_webhook = max(settings.webhook_per_webhook, 1)
        self.pacer = Pacer(connection, settings.webhook_max_rate, f"riskapi:pace:{settings.webhook_queue}")
        self._cond = threading.Condition()
        self._lines: dict[int, collections.deque] = {}
        self._turns: list[int] = []  # webhooks with a line, in the order they are served
        self._hooks: dict[int, Webhook] = {}  # the latest read of every webhook with a line
        self._running: collections.Counter = collections.Counter()
        self._in_flight = 0
        self._held = 0  # claimed here and not yet settled: waiting, running or being recorded
        self._slow: dict[int, float] = {}  # webhook id -> monotonic time its slow mark ends
        self._asked: dict[int, float] = {}  # webhook id -> monotonic time Redis was last asked about it
        self._done: queues.SimpleQueue = queues.SimpleQueue()
        self._closed = False
        self._renew_every = max(min(settings.webhook_stale_after / 2, 5.0), 0.2)
        self._pool = concurrent.futures.ThreadPoolExecutor(self.capacity, thread_name_prefix="attempt")
        self._threads = [
            threading.Thread(target=self._dispatch, name="delivery-dispatch", daemon=True),
            threading.Thread(target=self._recorder, name="delivery-recorder", daemon=True),
        ]

    def start(self) -> Engine:
        """Start the dispatcher and the recorder."""
        for thread in self._threads:
            thread.start()
        return self

    def key(self, webhook_id: int) -> str:
        """Name the Redis key that marks a webhook slow (per queue: tests share one Redis)."""
        return f"riskapi:slow:{self.settings.webhook_queue}:{webhook_id}"

    # ---- RQ threads --------------------------------------------------------------------------------

    def take(self, delivery_id: int, generation: int) -> str:
        """Claim a delivery (in the calling RQ thread) and put it in its webhook's line; return what happened."""
        claimed = _reconnecting(_claim, delivery_id, generation, self.settings, False)
        if isinstance(claimed, str):
            return claimed
        delivery, webhook, _ = claimed
        due = 0.0
        if delivery.next_attempt is not None:
            early = (delivery.next_attempt - utcnow()).total_seconds()
            due = time.time() + early if 0 < early <= 2 else 0.0
        (wait,) = self.pacer.reserve(webhook.id)
        due = max(due, time.time() + wait) if wait > 0 else due
        lease = time.monotonic() + self.settings.webhook_timeout + self.settings.webhook_stale_after
        self._ask_slow(webhook.id)
        with self._cond:
            self._hooks[webhook.id] = webhook
            if webhook.id not in self._lines:
                self._lines[webhook.id] = collections.deque()
                self._turns.append(webhook.id)
            self._lines[webhook.id].append(_Item(delivery, generation, due, lease))
            self._held += 1
            self._cond.notify_all()
        return "in flight"

    def take_batch(self, deliveries: list) -> list[str]:
        """Claim a batch job's (delivery id, generation) pairs in two queries and put them in their lines.

        A burst of one receiver's deliveries is taken in at this rate, so it must be cheap: a webhook's
        new delivery queues behind it in RQ. Anything unusual goes through take(), one by one.
        """
        wanted = dict(deliveries)
        claimed, rest = _reconnecting(self._claim_batch, wanted)
        outcomes = [self.take(delivery_id, wanted[delivery_id]) for delivery_id in rest]
        per_webhook = collections.Counter(delivery.webhook.id for delivery in claimed)
        for webhook_id in per_webhook:
            self._ask_slow(webhook_id)
        clock = time.time()
        waits = {webhook_id: iter(self.pacer.reserve(webhook_id, n)) for webhook_id, n in per_webhook.items()}
        lease = time.monotonic() + self.settings.webhook_timeout + self.settings.webhook_stale_after
        with self._cond:
            for delivery in claimed:
                webhook = delivery.webhook
                self._hooks[webhook.id] = webhook
                if webhook.id not in self._lines:
                    self._lines[webhook.id] = collections.deque()
                    self._turns.append(webhook.id)
                wait = next(waits[webhook.id])
                self._lines[webhook.id].append(_Item(delivery, delivery.generation, clock + wait if wait > 0 else 0.0, lease))
                self._held += 1
            self._cond.notify_all()
        return outcomes + ["in flight"] * len(claimed)

    def _claim_batch(self, wanted: dict) -> tuple[list, list[int]]:
        """Claim the plainly claimable deliveries at once; return them, and the ids left to take() one by one."""
        rows = list(
            Delivery.select(Delivery, Webhook, Event.body)
            .join_from(Delivery, Webhook)
            .join_from(Delivery, Event)
            .where(Delivery.id.in_(list(wanted)))
        )
        now = utcnow()
        plain = [
            row for row in rows
            if row.generation == wanted[row.id] and row.status == PENDING and row.webhook.disabled is None
            and (row.locked_until is None or row.locked_until < now)
            and (row.next_attempt is None or row.next_attempt <= now)
        ]  # fmt: skip
        lease = now + datetime.timedelta(seconds=self.settings.webhook_timeout + self.settings.webhook_stale_after)
        ids = [row.id for row in plain]
        if ids:
            with models.atomic():
                free = Delivery.locked_until.is_null() | (Delivery.locked_until < now)
                got = Delivery.update(locked_until=lease, updated=now).where(
                    Delivery.id.in_(ids) & (Delivery.status == PENDING) & free
                    & peewee.Tuple(Delivery.id, Delivery.generation).in_([(row.id, row.generation) for row in plain])
                ).execute()  # fmt: skip
                if got < len(ids):  # someone else's claim in between: keep only ours
                    mine = Delivery.id.in_(ids) & (Delivery.locked_until == lease)
                    ours = {i for (i,) in Delivery.select(Delivery.id).where(mine).tuples()}
                    plain = [row for row in plain if row.id in ours]
        # The rest (gone, superseded, done, disabled, busy, early) says why through take().
        taken = {row.id for row in plain}
        return plain, [delivery_id for delivery_id in wanted if delivery_id not in taken]

    def _ask_slow(self, webhook_id: int) -> None:
        """Learn, at most once a second per webhook, whether another process marked it slow."""
        now = time.monotonic()
        if now - self._asked.get(webhook_id, -10.0) < 1.0:
            return
        self._asked[webhook_id] = now
        try:
            left = self.connection.pttl(self.key(webhook_id))
        except (redis.RedisError, OSError):
            return  # unknown: the local view stands
        if left and left > 0:
            with self._cond:
                self._slow[webhook_id] = max(self._slow.get(webhook_id, 0.0), now + left / 1000)

    # ---- the dispatcher --------------------------------------------------------------------------

    def _cap(self, webhook_id: int, now: float) -> int:
        until = self._slow.get(webhook_id)
        if until is not None and until <= now:
            del self._slow[webhook_id]
            until = None
        return 1 if until is not None else self.per_webhook

    def _dispatch(self) -> None:
        """Start every attempt whose turn it is; sleep until an attempt ends, a delivery comes, or one is due."""
        with self._cond:
            while not (self._closed and not self._lines and not self._in_flight):
                self._cond.wait(self._start_due())

    def _start_due(self) -> float | None:
        """Start the attempts that may run now, webhooks taking turns; return seconds until the next due one."""
        now, clock = time.monotonic(), time.time()
        margin = self.settings.webhook_timeout + 0.5  # an attempt must end well within its claim
        order, served, wake = self._turns, 0, None
        for webhook_id in order:
            if self._in_flight >= self.capacity:
                break
            served += 1
            line, cap = self._lines[webhook_id], self._cap(webhook_id, now)
            while line and self._running[webhook_id] < cap and self._in_flight < self.capacity:
                item = line[0]
                if item.due > clock:
                    wake = min(wake or 3600.0, item.due - clock)
                    break
                line.popleft()
                if item.lease - now < margin:
                    self._held -= 1  # not renewed in time (the database is away): rescue hands it back
                    continue
                self._running[webhook_id] += 1
                self._in_flight += 1
                self._pool.submit(self._attempt, item, self._hooks[webhook_id])
            if not line:
                del self._lines[webhook_id]
        # The next round starts after the last webhook served in this one.
        self._turns = [w for w in order[served:] + order[:served] if w in self._lines]
        return wake

    # ---- pool threads ------------------------------------------------------------------------------

    def _attempt(self, item: _Item, webhook: Webhook) -> None:
        """Make one attempt (no database here) and pass its outcome to the recorder."""
        started = utcnow()
        try:
            body = item.delivery.source.body.encode()
            sent = signed_headers(item.delivery.event, item.delivery.uuid, webhook.uuid, body, signing_secrets(webhook, started))
            result = transport.post(
                webhook.url,
                body,
                sent,
                timeout=self.settings.webhook_timeout,
                allow_private=self.settings.webhook_allow_private,
                ca_bundle=self.settings.webhook_ca_bundle or None,
            )
        except Exception as exc:  # a bug must not keep the webhook's slot forever
            log.exception("delivery %s: attempt failed unexpectedly", item.delivery.uuid)
            result = transport.Result(None, f"internal error: {type(exc).__name__}", 0)
        self._done.put((item, webhook, started, result))
        with self._cond:
            self._running[webhook.id] -= 1
            if not self._running[webhook.id]:
                del self._running[webhook.id]
            self._in_flight -= 1
            self._cond.notify_all()

    # ---- the recorder ------------------------------------------------------------------------------

    def _recorder(self) -> None:
        """Record outcomes as they come; renew waiting claims and re-read their webhooks on the side."""
        renew_every = self._renew_every
        next_renew = next_read = time.monotonic()
        while True:
            try:
                done = self._done.get(timeout=0.2)
            except queues.Empty:
                done = None
                with self._cond:
                    if self._closed and not self._held:
                        break
            if done is not None:
                self._settle(*done)
            now = time.monotonic()
            if now >= next_read:
                next_read = now + 1.0
                renewing = now >= next_renew
                if renewing:
                    next_renew = now + renew_every
                self._tend(renewing)
        models.discard_connection()

    def _settle(self, item: _Item, webhook: Webhook, started, result: transport.Result) -> None:
        delivery = item.delivery
        name = jobs_queue.retry_id(delivery.uuid, item.generation, delivery.tries + 1)
        try:
            _reconnecting(_record, delivery, item.generation, webhook, started, result, self.settings, name)
            self.database_outage.back()
        except AttemptFailed as failed:
            self._schedule(delivery.id, item.generation, failed, name)
        except DATABASE_ERRORS as exc:
            # Unrecorded: the claim expires and the relay's rescue hands the delivery back (at least once).
            self.database_outage.lost(exc)
        except Exception:
            log.exception("delivery %s: recording the attempt failed", delivery.uuid)
        finally:
            with self._cond:
                self._held -= 1
                self._cond.notify_all()
        if result.duration_ms >= self.settings.webhook_timeout * 500:
            self._mark_slow(webhook.id)

    def _schedule(self, delivery_id: int, generation: int, failed: AttemptFailed, name: str) -> None:
        try:
            jobs_queue.schedule_retry(
                self.target,
                failed.delivery_uuid,
                delivery_id,
                generation,
                failed.tries,
                failed.next_attempt,
                self.settings.webhook_retry_delays,
                self.settings.webhook_timeout,
                name,
            )
        except (redis.RedisError, OSError) as exc:
            # The database says when the next attempt is due; with no job to make it, rescue will.
            log.warning("%s; retry not scheduled (%s): the relay's rescue will hand it back", failed, exc)
            return
        log.info("%s; retry scheduled", failed)

    def _mark_slow(self, webhook_id: int) -> None:
        """Mark a webhook slow here and, for every other process, in Redis."""
        slow_for = self.settings.webhook_slow_for
        if slow_for <= 0:
            return
        with self._cond:
            self._slow[webhook_id] = time.monotonic() + slow_for
        try:
            self.connection.set(self.key(webhook_id), 1, px=int(slow_for * 1000))
        except (redis.RedisError, OSError):
            pass  # this process knows; the others learn when they time out themselves

    def _tend(self, renewing: bool) -> None:
        """Re-read the webhooks of waiting deliveries and, when renewing, extend their claims."""
        with self._cond:
            waiting = {webhook_id: list(line) for webhook_id, line in self._lines.items()}
        if not waiting:
            return
        try:
            models.db.connect(reuse_if_open=True)
            hooks = {hook.id: hook for hook in Webhook.select().where(Webhook.id.in_(list(waiting)))}
            gone = [item for webhook_id, items in waiting.items() if webhook_id not in hooks for item in items]
            disabled = [item for webhook_id, items in waiting.items() if hooks.get(webhook_id) and hooks[webhook_id].disabled
                        for item in items]  # fmt: skip
            for item in disabled:  # as a claim of a disabled webhook's delivery does
                _finish(item.delivery, item.generation, FAILED)
            if renewing:
                # Only claims that would lapse before the next renewal but one: fewer writes for a long line.
                soon = time.monotonic() + 2 * self._renew_every + self.settings.webhook_timeout + 1
                dropping = set(disabled)
                lapsing = [item for items in waiting.values() for item in items if item.lease < soon]
                gone += self._renew([item for item in lapsing if item not in dropping])
            self.database_outage.back()
        except DATABASE_ERRORS as exc:
            models.discard_connection()
            self.database_outage.lost(exc)
            return
        with self._cond:
            self._hooks.update(hooks)
            self._drop(set(gone) | set(disabled))

    def _renew(self, items: list[_Item]) -> list[_Item]:
        """Extend the claims of waiting deliveries; return those no longer this process's to attempt."""
        lost: list[_Item] = []
        for start in range(0, len(items), 500):
            chunk = items[start : start + 500]
            began = time.monotonic()
            lease = utcnow() + datetime.timedelta(seconds=self.settings.webhook_timeout + self.settings.webhook_stale_after)
            pairs = peewee.Tuple(Delivery.id, Delivery.generation).in_([(i.delivery.id, i.generation) for i in chunk])
            mine = (Delivery.status == PENDING) & Delivery.locked_until.is_null(False)
            renewed = Delivery.update(locked_until=lease).where(pairs & mine).execute()
            if renewed < len(chunk):
                still = {row for (row,) in Delivery.select(Delivery.id).where(pairs & mine).tuples()}
                lost += [item for item in chunk if item.delivery.id not in still]
            for item in chunk:
                item.lease = began + self.settings.webhook_timeout + self.settings.webhook_stale_after
        return lost

    def _drop(self, items: set) -> None:
        """Take waiting items out of their lines unattempted (caller holds the lock)."""
        if not items:
            return
        for webhook_id in list(self._lines):
            line = self._lines[webhook_id]
            kept = [item for item in line if item not in items]
            self._held -= len(line) - len(kept)
            if kept:
                self._lines[webhook_id] = collections.deque(kept)
            else:
                del self._lines[webhook_id]
        self._turns = [w for w in self._turns if w in self._lines]
        self._cond.notify_all()

    # ---- stopping ----------------------------------------------------------------------------------

    def close(self, wait: float, drain: bool = False) -> None:
        """Stop: hand back what waits in a line (or, with drain, attempt it all first), let running attempts
        end and be recorded, for up to `wait` seconds after that."""
        with self._cond:
            if drain and self._threads[0].is_alive():
                self._cond.wait_for(lambda: not self._held)
            self._closed = True
            waiting = [item for line in self._lines.values() for item in line]
            self._drop(set(waiting))
        if waiting:
            self._hand_back(waiting)
        with self._cond:
            self._cond.wait_for(lambda: not self._held, timeout=wait)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if _current is self:
            install(None)

    def _hand_back(self, items: list[_Item]) -> None:
        """Let go of claims at once, so any relay hands these deliveries to a worker still running."""
        try:
            with models.db.connection_context():
                pairs = peewee.Tuple(Delivery.id, Delivery.generation).in_([(i.delivery.id, i.generation) for i in items])
                Delivery.update(relayed=None, locked_until=None).where(pairs & (Delivery.status == PENDING)).execute()
        except DATABASE_ERRORS as exc:
            log.warning("could not hand back %d waiting deliveries (%s): their claims will expire", len(items), exc)


__all__ = ["Engine", "current", "install"]
