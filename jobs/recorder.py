"""Record: one thread per engine writes the outcomes of its attempts, and keeps them while the database is away.

The Recorder thread writes every outcome (jobs.outcomes) of the engine's attempts: several
waiting together in one transaction (one commit, one WAL flush) and in few statements (jobs.outcomes.write_all:
one insert of their attempt rows, one update of those that succeeded), one by one should that fail. It
also asks the engine, every second, to tend its waiting claims (jobs.lines.Engine.tend), and keeps
the claims of outcomes not yet written from lapsing.

An outcome that cannot be written because the database is away is kept (up to KEEP), and the engine
starts no attempt until it is back (a sent attempt that is never recorded is sent again). The recorder
tries the database again at least every second (jobs.outages.RECONNECT_CAP); when it answers, it first
renews every claim the engine holds (the relay's rescue waits a grace for that), then writes what it
kept, then lets attempts start again. Only a process that dies holding kept outcomes has them sent
again, by the relay's rescue once their claims lapse: at least once.
"""

from __future__ import annotations

import datetime
import logging
import math
import queue as queues
import threading
import time
from typing import Protocol

import peewee
import redis

import models
from foundation.config import Settings
from jobs import queue as jobs_queue
from jobs.https.transport import Result
from jobs.outages import DATABASE_AWAY, RECONNECT_CAP, Backoff, Outage, reconnecting
from jobs.outcomes import Attempted, AttemptFailed, Written, conclude, record, schedule, write_all
from models.webhooks import Delivery, Webhook

log = logging.getLogger("riskapi.delivery")

# Outcomes written in one transaction when several wait: one commit (one WAL flush) for them all.
BATCH = 64
# While outcomes keep coming, the recorder lets a few more arrive before it writes: a statement and a
# commit for several deliveries instead of one each. Nothing waits on it but the delivery's row.
LINGER = 0.01
# Outcomes kept while the database is away, at most (no attempt starts meanwhile: those in flight
# when it went are all there is to keep); beyond, the oldest are left to the rescue.
KEEP = 4096


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

    def settled(self) -> None: ...
    def finished(self) -> bool: ...
    def tend(self, unrecorded: list[Claimed], renewing: bool, soon: float) -> bool: ...
    def pause(self) -> int: ...
    def resume(self) -> None: ...


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
        self._kept: list[Outcome] = []  # outcomes not written while the database is away, oldest first
        self._away = False  # the database did not answer: keep outcomes, start no attempt
        self._kept_in_outage = 0
        self._retry, self._next_try = Backoff(0.1, RECONNECT_CAP), 0.0

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
            if batch is None and not self._kept and self.engine.finished():
                break  # (never while outcomes are kept: the engine holds them)
            try:  # a batch's steps take this thread's connection (models.check_out); it is given back after them
                if self._away:
                    self._keep(batch or [])
                    self._reconnect()
                    continue
                if batch and len(batch) > 1:
                    self._settle_all(batch)
                elif batch:
                    self._settle_each(batch)
                now = time.monotonic()
                if now >= next_read and not self._away:
                    next_read, renewing = now + 1.0, now >= next_renew
                    if renewing:
                        next_renew = now + self.renew_every
                    self._tend(renewing)
            finally:
                models.give_back()

    def _next_batch(self) -> list[Outcome] | None:
        """Wait up to 0.2 s for an outcome; return it with those waiting behind it (up to BATCH), or None.
        When others wait already, first give more a moment (LINGER) to arrive."""
        try:
            batch = [self._done.get(timeout=0.2)]
        except queues.Empty:
            return None
        if not self._done.empty():  # more are coming: let them
            time.sleep(LINGER)
        while len(batch) < BATCH:
            try:
                batch.append(self._done.get_nowait())
            except queues.Empty:
                break
        return batch

    def _settle(self, item: Claimed, webhook: Webhook, started: datetime.datetime, result: Result) -> None:
        """Write one outcome (raises DATABASE_AWAY, and keeps nothing, when the database is away)."""
        delivery = item.delivery
        name = jobs_queue.retry_id(delivery.uuid, item.generation, delivery.tries + 1)
        try:
            reconnecting(record, delivery, item.generation, webhook, started, result, self.settings, name)
            self.engine.database_outage.back()
        except AttemptFailed as failed:
            schedule(self.target, delivery.id, item.generation, failed, self.settings, name)
        except DATABASE_AWAY:
            raise
        except Exception:
            # Unrecorded (a bug: a webhook or delivery deleted meanwhile is record's outcome, no error): the claim
            # expires and the relay's rescue hands it back.
            log.exception("delivery %s: recording the attempt failed", delivery.uuid)
        self._after(item, webhook, result)

    def _settle_each(self, batch: list[Outcome]) -> None:
        """Write outcomes one by one; from the first that finds the database away, keep them."""
        for index, one in enumerate(batch):
            try:
                self._settle(*one)
            except DATABASE_AWAY as exc:
                self._go_away(exc, batch[index:])
                return

    def _settle_all(self, batch: list[Outcome]) -> None:
        """Write several outcomes in one transaction; should it fail, write them one by one."""
        try:
            written = reconnecting(self._write, batch)  # a cut connection is replaced once, as for one outcome
        except DATABASE_AWAY as exc:
            models.give_back(exc)
            self._go_away(exc, batch)
            return
        except Exception:  # noqa: BLE001 - nothing was committed: each outcome gets its own try (and reconnection) below
            self._settle_each(batch)
            return
        self.engine.database_outage.back()
        self._conclude(batch, written)

    def _write(self, batch: list[Outcome]) -> list[tuple[str, Written]]:
        """Write outcomes in one transaction; return each one's retry job name and what was written."""
        names = [jobs_queue.retry_id(item.delivery.uuid, item.generation, item.delivery.tries + 1) for item, *_ in batch]
        attempts: list[Attempted] = [
            (item.delivery, item.generation, webhook, started, result, name)
            for (item, webhook, started, result), name in zip(batch, names, strict=True)
        ]
        models.check_out()
        with models.atomic():
            written = write_all(attempts, self.settings)
        return list(zip(names, written, strict=True))

    def _conclude(self, batch: list[Outcome], written: list[tuple[str, Written]]) -> None:
        """Once committed: count, log, schedule the retries, and let go of the outcomes."""
        for (item, webhook, _started, result), (name, done) in zip(batch, written, strict=True):
            try:
                conclude(item.delivery, webhook, result, *done)
            except AttemptFailed as failed:
                schedule(self.target, item.delivery.id, item.generation, failed, self.settings, name)
            finally:
                self._after(item, webhook, result)

    def _go_away(self, exc: BaseException | None, outcomes: list[Outcome]) -> None:
        """The database is away: keep these outcomes, and have the engine start no attempt until it is back."""
        if exc is not None:
            self.engine.database_outage.lost(exc)
        if not self._away:
            self._away, self._kept_in_outage = True, 0
            in_flight = self.engine.pause()
            log.warning("database away: no attempt starts until it is back; %d in flight finish", in_flight)
            self._retry.reset()
            self._next_try = time.monotonic() + self._retry.next()
        self._keep(outcomes)

    def _keep(self, outcomes: list[Outcome]) -> None:
        """Keep outcomes to write when the database is back; past KEEP, leave the oldest to the rescue."""
        self._kept += outcomes
        self._kept_in_outage += len(outcomes)
        if len(self._kept) > KEEP:
            dropped, self._kept = self._kept[:-KEEP], self._kept[-KEEP:]
            log.warning("%d outcomes not written: their deliveries will be sent again", len(dropped))
            for item, webhook, _started, result in dropped:
                self._after(item, webhook, result)

    def _reconnect(self) -> None:
        """Once the database answers: renew every claim held, write the kept outcomes, start attempts again."""
        if time.monotonic() < self._next_try:
            return
        try:
            models.check_out()
            models.db.execute_sql("SELECT 1")  # it answers, even when there is nothing to renew or write
            # Claims first, every one however far off its end: the relay's rescue waits a grace for this.
            if not self.engine.tend(self._pending(math.inf), True, math.inf):
                raise peewee.OperationalError("the claims could not be renewed")
            while self._kept:
                self._write_kept(self._kept[:BATCH])
        except DATABASE_AWAY as exc:
            models.give_back(exc)
            self.engine.database_outage.lost(exc)
            self._next_try = time.monotonic() + self._retry.next()
            return
        self._away = False
        self.engine.database_outage.back()
        log.warning("database back: %d outcomes kept while it was away written; attempts start again", self._kept_in_outage)
        self.engine.resume()

    def _write_kept(self, batch: list[Outcome]) -> None:
        """Write the first kept outcomes in one transaction (or one by one should that fail); raise if the database is away."""
        try:
            written = self._write(batch)
        except DATABASE_AWAY:
            raise
        except Exception:  # noqa: BLE001 - one outcome that cannot be written: each gets its own try
            for one in batch:
                self._settle(*one)
                del self._kept[0]
            return
        del self._kept[: len(batch)]
        self._conclude(batch, written)

    def _after(self, item: Claimed, webhook: Webhook, result: Result) -> None:
        """Let go of a settled outcome (its webhook was marked slow, if it was, when the attempt ended: jobs.lines)."""
        with self._lock:
            self._unrecorded.discard(item)
        self.engine.settled()

    def _pending(self, soon: float) -> list[Claimed]:
        """Return the items of outcomes not yet written whose claims end before `soon` (monotonic)."""
        with self._lock:
            return [item for item in self._unrecorded if item.lease < soon]

    def _tend(self, renewing: bool) -> None:
        """Have the engine re-read its waiting webhooks and renew lapsing claims, with those of outcomes still to write."""
        # Outcomes still to write are looked at every time (each second): their claims have little left.
        soon = time.monotonic() + 2 * self.renew_every + self.settings.webhook_timeout + 1
        if not self.engine.tend(self._pending(soon), renewing, soon):
            self._go_away(None, [])  # claims that cannot be renewed: attempts on them could not be recorded either


__all__ = ["BATCH", "KEEP", "Claimed", "Outcome", "Owner", "Recorder"]
