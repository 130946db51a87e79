"""The engine: each webhook's line of claimed deliveries, and the attempts in flight, fair between webhooks.

RQ's threads only claim a delivery (jobs.claims, a few milliseconds of database work) and line it up
here (`Engine.line_up`), so no
receiver, however slow, holds a thread that other deliveries queue behind. Here:

* up to RISKAPI_WEBHOOK_IN_FLIGHT attempts run at once, each in a pool thread of its own (the
  blocking, hardened jobs.https.transport.post; pool threads never touch the database);
* one webhook has at most RISKAPI_WEBHOOK_PER_WEBHOOK attempts running in a process, two until it has
  answered quickly here, and one while it is marked slow (jobs.slowness). The rest wait in the webhook's
  own line, each until its paced slot (jobs.pacing), and lines take turns (jobs.turns), so a backlog of one
  webhook is never ahead of another's delivery. The dispatcher thread takes a round's due attempts out of
  their lines and starts them a part at a time without the lock, each part admitted by the pacer in one
  round trip, a quick webhook's delivery that came meanwhile next (`_start`);
* one recorder thread (jobs.recorder) writes every outcome and schedules retries on RQ; every second
  it has the engine tend its lines (`tend`): renew the claims of waiting deliveries, re-read their webhooks.

A delivery is claimed before it waits here, so no other worker takes it; if the process dies, its
claims expire and the relay's rescue hands them back, as before. A claim that could not be renewed
in time is let go unattempted, so no attempt runs on a claim that may have lapsed. While the recorder
cannot reach the database no attempt starts (`pause`, `resume`): one it could not record would be
sent again. The worker builds one engine per process and hands it to its RQ jobs
(jobs.rq_internals.EngineJob).
"""

from __future__ import annotations

import collections
import concurrent.futures
import datetime
import logging
import threading
import time

import redis

import models
from foundation.config import Settings
from jobs import claims, send
from jobs.https import transport
from jobs.https.connections import Pool
from jobs.https.dialing import Watchdog
from jobs.outages import DATABASE_ERRORS, Outage
from jobs.pacing import Pacer
from jobs.recorder import Claimed, Recorder
from jobs.slowness import SlowMarks
from jobs.turns import Item, Turns
from models import utcnow
from models.webhooks import Webhook

log = logging.getLogger("riskapi.delivery")

# Attempts at once to a webhook this process has not yet seen answer quickly: one may hang while another proves
# it. A burst to 50 new receivers that all hang opens 100 connections at once, not 200 (jobs.slowness).
UNPROVEN = 2
# Attempts the dispatcher starts before it looks whether a quick webhook's delivery came meanwhile (`Engine._start`).
ROUND_PART = 8
EPOCH = datetime.datetime(1970, 1, 1)  # naive UTC, as the database stores moments


class Engine:
    """The attempts in flight of one worker process, with the lines of those waiting for their turn."""

    def __init__(
        self, settings: Settings, connection: redis.Redis, database_outage: Outage | None = None, pool: Pool | None = None
    ):
        self.settings = settings
        self.connection = connection
        self.pool = pool if pool is not None else Pool()  # kept TLS connections, shared by the pool threads
        self.watchdog = Watchdog()  # one thread keeps every attempt's deadline (a timer thread each cost a tenth of the CPU)
        self.database_outage = database_outage or Outage("database", log)
        self.capacity = max(settings.webhook_in_flight, 1)
        self.per_webhook = max(settings.webhook_per_webhook, 1)
        self.pacer = Pacer(connection, settings.webhook_max_rate, f"riskapi:pace:{settings.webhook_queue}")
        self._cond = threading.Condition()
        self.turns = Turns()  # the lines, their turns, the attempts running (under the lock)
        self._held = 0  # claimed here and not yet settled: waiting, running or being recorded
        self._paused = False  # the recorder cannot write: no attempt starts
        self._quick_came: set[int] = set()  # webhooks that answer quickly with a delivery lined up since the round began
        self.slow = SlowMarks(connection, settings.webhook_queue, settings.webhook_slow_for)
        self._closed = False
        self.recorder = Recorder(self)
        self._executor = concurrent.futures.ThreadPoolExecutor(self.capacity, thread_name_prefix="attempt")
        self._threads = [
            threading.Thread(target=self._dispatch, name="delivery-dispatch", daemon=True),
            threading.Thread(target=self.recorder.run, name="delivery-recorder", daemon=True),
        ]

    def start(self) -> Engine:
        """Start the dispatcher and the recorder."""
        for thread in self._threads:
            thread.start()
        return self

    # ---- RQ threads --------------------------------------------------------------------------------

    def line_up(self, entries: list[tuple]) -> None:
        """Put claimed (delivery, webhook, generation, due) at the end of their webhooks' lines, each due no
        earlier than the paced slot it reserves."""
        per_webhook = collections.Counter(webhook.id for _, webhook, _, _ in entries)
        self.slow.ask(per_webhook)
        clock = time.time()
        slots = {webhook_id: iter(waits) for webhook_id, waits in self.pacer.reserve_many(dict(per_webhook)).items()}
        lease = time.monotonic() + claims.lease_for(self.settings).total_seconds()
        with self._cond:
            now = time.monotonic()
            for delivery, webhook, generation, due in entries:
                wait = next(slots[webhook.id])
                if self._cap(webhook.id, now)[1]:
                    self._quick_came.add(webhook.id)
                self.turns.enter(webhook, Item(delivery, generation, max(due, clock + wait) if wait > 0 else due, lease))
                self._held += 1
            self._cond.notify_all()

    # ---- the dispatcher --------------------------------------------------------------------------

    def _cap(self, webhook_id: int, now: float) -> tuple[int, bool]:
        """Return how many attempts a webhook may have running here, and whether it answered quickly here lately."""
        if self.slow.is_slow(webhook_id, now):
            return 1, False
        if self.slow.proven(webhook_id, now):
            return self.per_webhook, True
        return min(self.per_webhook, UNPROVEN), False

    def _dispatch(self) -> None:
        """Start every attempt whose turn it is; sleep until an attempt ends, a delivery comes, or one is due."""
        with self._cond:
            while not (self._closed and not self.turns.lines and not self.turns.in_flight):
                picked, wake = self._take_due()
                if picked:
                    self._start(picked)
                else:
                    self._cond.wait(wake)

    def _take_due(self, only: set[int] | None = None) -> tuple[list[tuple[Item, Webhook]], float | None]:
        """Take the attempts that may run now out of their lines (of the webhooks `only` names, if given), webhooks
        taking turns, and count them running; return them, those to webhooks that answered quickly lately first,
        and the seconds until the next due one (caller holds the lock)."""
        if self._paused:
            return [], None  # resume() wakes the dispatcher
        now, margin = time.monotonic(), self.settings.webhook_timeout + 0.5  # an attempt must end well within its claim
        self._quick_came = set()
        picked, wake, lapsed = self.turns.take(lambda w: self._cap(w, now), self.capacity, now, time.time(), margin, only)
        self._held -= lapsed
        return picked, wake

    def _start(self, picked: list[tuple[Item, Webhook]]) -> None:
        """Start a round's attempts a few at a time, without the lock (the caller's): an attempt's start (a thread
        woken, a connection opened) takes a millisecond or more of the GIL, so a round of a hundred takes a tenth
        of a second, while RQ's threads line new deliveries up. One to a webhook that answers quickly, come
        meanwhile, starts before the rest of the round (bench/isolation.py: it waited for a burst's round)."""
        self._cond.release()
        try:
            back: list[tuple[Item, Webhook, float]] = []
            for begin in range(0, len(picked), ROUND_PART):
                if begin and self._paused:  # the recorder cannot write: the rest waits in their lines
                    back += [(item, webhook, item.due) for item, webhook in picked[begin:]]
                    break
                if begin and self._quick_came:
                    with self._cond:
                        quick, _ = self._take_due(only=self._quick_came)
                    back += self._start_part(quick)
                back += self._start_part(picked[begin : begin + ROUND_PART])
            lines: dict[int, list[tuple[Item, float]]] = {}
            for item, webhook, due in back:
                lines.setdefault(webhook.id, []).append((item, due))
            # A line emptied by the round opens again last in the turns, in the round's order; in it, the last
            # item goes back first, each at the line's front.
            for webhook_id, items in lines.items():
                for entry in reversed(items):
                    self._release(webhook_id, back=entry)
        finally:
            self._cond.acquire()

    def _start_part(self, picked: list[tuple[Item, Webhook]]) -> list[tuple[Item, Webhook, float]]:
        """Start the attempts that their webhooks' windows of starts allow, asked of the pacer in one round trip;
        return the others, each with the moment its window allows it."""
        wanted = collections.Counter(webhook.id for _, webhook in picked)
        try:
            admitted = self.pacer.admit_many(dict(wanted))
        except Exception:  # a bug must not hold deliveries back forever: they go unpaced
            log.exception("pacing failed unexpectedly: %d attempts start unpaced", len(picked))
            admitted = {webhook_id: (n, None, 0.0) for webhook_id, n in wanted.items()}
        clock, back = time.time(), []
        for item, webhook in picked:
            starts, at, wait = admitted[webhook.id]
            if starts > 0:
                admitted[webhook.id] = (starts - 1, at, wait)
                self._submit(item, webhook, at)
            else:
                back.append((item, webhook, clock + wait))
        return back

    def _submit(self, item: Item, webhook: Webhook, at: int | None) -> None:
        try:
            self._executor.submit(self._attempt, item, webhook, at)
        except RuntimeError:  # closed meanwhile (close() waited its time out): unattempted, the claim lapses
            self._release(webhook.id)
            self.settled()

    # ---- pool threads ------------------------------------------------------------------------------

    def _attempt(self, item: Item, webhook: Webhook, at: int | None) -> None:
        """Make one attempt started at `at` (us since the epoch on Redis's clock; None: now on this host's),
        with no database here, and pass its outcome to the recorder."""
        started = utcnow() if at is None else EPOCH + datetime.timedelta(microseconds=at)
        try:
            result = send.send(item.delivery, webhook, self.settings, self.pool, started, self.watchdog)
        except Exception as exc:  # a bug must not keep the webhook's slot forever
            log.exception("delivery %s: attempt failed unexpectedly", item.delivery.uuid)
            result = transport.Result(None, f"internal error: {type(exc).__name__}", 0)
        self.recorder.put((item, webhook, started, result))
        if result.duration_ms >= self.settings.webhook_timeout * 500:
            # Before the slot is free: else the next attempt to a hung webhook starts before the recorder marks it.
            self.slow.mark(webhook.id)
        else:
            self.slow.answered(webhook.id)
        self._release(webhook.id)

    def _release(self, webhook_id: int, back: tuple[Item, float] | None = None) -> None:
        """Free an attempt's place; `back` = (item, due) puts an item that did not start back in its line."""
        with self._cond:
            self.turns.finish(webhook_id, back)
            self._cond.notify_all()

    # ---- for the recorder ------------------------------------------------------------------------

    def settled(self) -> None:
        """Count one held delivery as settled (recorded, or left to rescue)."""
        with self._cond:
            self._held -= 1
            self._cond.notify_all()

    def finished(self) -> bool:
        """Say whether the engine is closed and holds nothing more to record."""
        with self._cond:
            return self._closed and not self._held

    def waiting(self) -> dict[int, list[Item]]:
        """Return a snapshot of the lines: webhook id -> its waiting items."""
        with self._cond:
            return self.turns.waiting()

    def tend(self, unrecorded: list[Claimed], renewing: bool, soon: float) -> bool:
        """Re-read the webhooks of waiting deliveries and, when renewing, extend the claims that lapse before
        `soon` (monotonic), with those of `unrecorded`; drop the waiting items no longer ours to attempt.
        Return False when the database did not answer."""
        waiting = self.waiting()
        if not waiting and not unrecorded:
            return True
        try:
            with models.connection():
                hooks, dropped = claims.tend(waiting, unrecorded, renewing, soon, self.settings)
            self.database_outage.back()
        except DATABASE_ERRORS as exc:
            self.database_outage.lost(exc)
            return False
        with self._cond:
            self.turns.hooks.update(hooks)
            self._drop(dropped)
        return True

    def pause(self) -> int:
        """Start no attempt until resume() (those in flight go on); return how many are in flight."""
        with self._cond:
            self._paused = True
            return self.turns.in_flight

    def resume(self) -> None:
        """Start attempts again."""
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def _drop(self, items: set) -> None:
        """Take waiting items out of their lines unattempted (caller holds the lock)."""
        if items:
            self._held -= self.turns.drop(items)
            self._cond.notify_all()

    # ---- stopping ----------------------------------------------------------------------------------

    def close(self, wait: float, drain: bool = False) -> None:
        """Stop: hand back what waits in a line (or, with drain, attempt it all first), let running attempts
        end and be recorded, for up to `wait` seconds after that."""
        with self._cond:
            if drain and self._threads[0].is_alive():
                self._cond.wait_for(lambda: not self._held)
            self._closed = True
            waiting = [item for line in self.turns.lines.values() for item in line]
            self._drop(set(waiting))
        if waiting:
            claims.hand_back(waiting)
        with self._cond:
            self._cond.wait_for(lambda: not self._held, timeout=wait)
        self._executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["Engine", "Item"]
