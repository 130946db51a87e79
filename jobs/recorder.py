"""The recorder: the one thread of a worker process that writes what attempts in flight came to.

Pool threads never touch the database; they hand each outcome here. The recorder writes it exactly
as a lone attempt does (jobs.delivery._record: the attempt log, the next attempt, disabling), gives a
failed delivery its retry job on RQ's retry queue, and marks a webhook slow when an attempt took
half the deadline or more. On the side, once a second, it re-reads the webhooks of deliveries still
waiting in a line (a new url or secret, a disabled webhook) and renews their claims before they
lapse, so the relay's rescue leaves them alone; so it does for attempts made whose outcome still
waits to be written (a recorder behind, on a machine short of CPU, must not let a claim lapse and the
rescue send a delivered event again).
"""

from __future__ import annotations

import logging
import queue as queues
import threading
import time
from typing import TYPE_CHECKING

import redis

import models
from jobs import claims, transport
from jobs import queue as jobs_queue
from jobs.delivery import DATABASE_ERRORS, AttemptFailed, _conclude, _finish, _reconnecting, _record, _write
from models.webhooks import FAILED, Webhook

if TYPE_CHECKING:
    from jobs.inflight import Engine

log = logging.getLogger("riskapi.delivery")

# Outcomes written in one transaction when several wait: one commit (one WAL flush) for them all.
BATCH = 64


class Recorder:
    """Writes the outcomes of one engine's attempts, and tends the claims of its waiting deliveries."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.settings = engine.settings
        self.target = jobs_queue.retries(engine.connection, self.settings.webhook_queue)
        self.renew_every = max(min(self.settings.webhook_stale_after / 2, 5.0), 0.2)
        self._done: queues.SimpleQueue = queues.SimpleQueue()
        self._lock = threading.Lock()
        self._unrecorded: set = set()  # items of the outcomes handed over and not yet written

    def put(self, outcome: tuple) -> None:
        """Hand over (item, webhook, started, result) of an attempt made."""
        with self._lock:
            self._unrecorded.add(outcome[0])
        self._done.put(outcome)

    def run(self) -> None:
        """Record outcomes as they come; renew waiting claims and re-read their webhooks on the side."""
        next_renew = next_read = time.monotonic()
        while True:
            try:
                done = self._done.get(timeout=0.2)
            except queues.Empty:
                done = None
                if self.engine.finished():
                    break
            if done is not None:
                batch = [done]
                while len(batch) < BATCH:
                    try:
                        batch.append(self._done.get_nowait())
                    except queues.Empty:
                        break
                if len(batch) > 1:
                    self._settle_all(batch)
                else:
                    self._settle(*done)
            now = time.monotonic()
            if now >= next_read:
                next_read = now + 1.0
                renewing = now >= next_renew
                if renewing:
                    next_renew = now + self.renew_every
                self._tend(renewing)
        models.discard_connection()

    def _settle(self, item, webhook: Webhook, started, result: transport.Result) -> None:
        delivery = item.delivery
        name = jobs_queue.retry_id(delivery.uuid, item.generation, delivery.tries + 1)
        try:
            _reconnecting(_record, delivery, item.generation, webhook, started, result, self.settings, name)
            self.engine.database_outage.back()
        except AttemptFailed as failed:
            self._schedule(delivery.id, item.generation, failed, name)
        except DATABASE_ERRORS as exc:
            # Unrecorded: the claim expires and the relay's rescue hands the delivery back (at least once).
            self.engine.database_outage.lost(exc)
        except Exception:
            log.exception("delivery %s: recording the attempt failed", delivery.uuid)
        finally:
            self._after(item, webhook, result)

    def _settle_all(self, batch: list) -> None:
        """Write several outcomes in one transaction; should it fail, write them one by one."""
        written = []
        try:
            models.db.connect(reuse_if_open=True)
            with models.atomic():
                for item, webhook, started, result in batch:
                    name = jobs_queue.retry_id(item.delivery.uuid, item.generation, item.delivery.tries + 1)
                    args = (item.delivery, item.generation, webhook, started, result, self.settings, name)
                    written.append((name, _write(*args)))
        except Exception:  # noqa: BLE001 - nothing was committed: each outcome gets its own try (and reconnection) below
            for outcome in batch:
                self._settle(*outcome)
            return
        self.engine.database_outage.back()
        for (item, webhook, _started, result), (name, outcome) in zip(batch, written, strict=True):
            try:
                _conclude(item.delivery, webhook, result, *outcome)
            except AttemptFailed as failed:
                self._schedule(item.delivery.id, item.generation, failed, name)
            finally:
                self._after(item, webhook, result)

    def _after(self, item, webhook: Webhook, result: transport.Result) -> None:
        """Let go of a settled outcome, and mark its webhook slow when the attempt took half the deadline."""
        with self._lock:
            self._unrecorded.discard(item)
        self.engine.settled()
        if result.duration_ms >= self.settings.webhook_timeout * 500:
            self.engine.slow.mark(webhook.id)

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

    def _tend(self, renewing: bool) -> None:
        """Re-read the webhooks of waiting deliveries and, when renewing, extend their claims and those of
        the outcomes still to write."""
        waiting = self.engine.waiting()
        # Outcomes still to write are looked at every time (each second): their claims have little left.
        soon = time.monotonic() + 2 * self.renew_every + self.settings.webhook_timeout + 1
        with self._lock:
            unrecorded = [item for item in self._unrecorded if item.lease < soon]
        if not waiting and not unrecorded:
            return
        try:
            models.db.connect(reuse_if_open=True)
            hooks = {hook.id: hook for hook in Webhook.select().where(Webhook.id.in_(list(waiting)))} if waiting else {}
            gone = [item for webhook_id, items in waiting.items() if webhook_id not in hooks for item in items]
            disabled = [item for webhook_id, items in waiting.items() if hooks.get(webhook_id) and hooks[webhook_id].disabled
                        for item in items]  # fmt: skip
            for item in disabled:  # as a claim of a disabled webhook's delivery does
                _finish(item.delivery, item.generation, FAILED)
            lapsing = list(unrecorded)
            if renewing:
                # Only claims that would lapse before the next renewal but one: fewer writes for a long line.
                lapsing += [item for items in waiting.values() for item in items if item.lease < soon]
            if lapsing:
                dropping = set(disabled)
                gone += claims.renew([item for item in lapsing if item not in dropping], self.settings)
            self.engine.database_outage.back()
        except DATABASE_ERRORS as exc:
            models.discard_connection()
            self.engine.database_outage.lost(exc)
            return
        self.engine.refresh(hooks, set(gone) | set(disabled))


__all__ = ["Recorder"]
