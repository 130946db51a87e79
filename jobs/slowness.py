"""Slow marks: which webhooks answered slowly of late, known to every worker process through Redis.

An attempt that took half the deadline or more marks its webhook slow for RISKAPI_WEBHOOK_SLOW_FOR
seconds: here at once, and for the other processes as a Redis key with that TTL, which each process
asks about at most once a second per webhook. A slow webhook gets one attempt in flight per process
(jobs.lines), so a receiver that stopped answering cannot fill a worker's pool. A webhook counts as proven
while it answered an attempt within that half deadline here in the last RISKAPI_WEBHOOK_SLOW_FOR seconds
(at least a minute): until then, jobs.lines gives it fewer attempts at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

import redis


class SlowMarks:
    """This process's view of which webhooks are slow, kept in step with Redis."""

    def __init__(self, connection: redis.Redis, queue: str, slow_for: float):
        self.connection = connection
        self.queue = queue
        self.slow_for = slow_for
        self._until: dict[int, float] = {}  # webhook id -> monotonic time its slow mark ends
        self._asked: dict[int, float] = {}  # webhook id -> monotonic time Redis was last asked about it
        self._proven: dict[int, float] = {}  # webhook id -> monotonic time its last quick answer here stops counting
        self._lock = threading.Lock()

    def key(self, webhook_id: int) -> str:
        """Name the Redis key that marks a webhook slow (per queue: tests share one Redis)."""
        return f"riskapi:slow:{self.queue}:{webhook_id}"

    def is_slow(self, webhook_id: int, now: float) -> bool:
        """Say whether a webhook is marked slow at monotonic time `now` (no Redis: a dispatcher asks this)."""
        with self._lock:
            until = self._until.get(webhook_id)
            if until is not None and until <= now:
                del self._until[webhook_id]
                until = None
        return until is not None

    def proven(self, webhook_id: int, now: float) -> bool:
        """Say whether a webhook answered quickly here lately (no Redis: a dispatcher asks this)."""
        with self._lock:
            return self._proven.get(webhook_id, 0.0) > now

    def answered(self, webhook_id: int) -> None:
        """Note that an attempt to a webhook ended within half the deadline (answered, or refused at once)."""
        now = time.monotonic()
        with self._lock:
            self._proven[webhook_id] = now + max(self.slow_for, 60.0)
            if len(self._proven) > 10_000:  # forget webhooks not heard from lately
                self._proven = {k: v for k, v in self._proven.items() if v > now}

    def ask(self, webhook_ids: Iterable[int]) -> None:
        """Learn, at most once a second per webhook, whether another process marked them slow (one round trip)."""
        now = time.monotonic()
        with self._lock:
            due = [w for w in webhook_ids if now - self._asked.get(w, -10.0) >= 1.0]
            for webhook_id in due:
                self._asked[webhook_id] = now
        if not due:
            return
        try:
            with self.connection.pipeline(transaction=False) as pipe:
                for webhook_id in due:
                    pipe.pttl(self.key(webhook_id))
                lefts = pipe.execute()
        except (redis.RedisError, OSError):
            return  # unknown: the local view stands
        with self._lock:
            for webhook_id, left in zip(due, lefts, strict=True):
                if left and left > 0:
                    self._until[webhook_id] = max(self._until.get(webhook_id, 0.0), now + left / 1000)

    def mark(self, webhook_id: int) -> None:
        """Mark a webhook slow here and, for every other process, in Redis."""
        if self.slow_for <= 0:
            return
        with self._lock:
            self._until[webhook_id] = time.monotonic() + self.slow_for
        try:
            self.connection.set(self.key(webhook_id), 1, px=int(self.slow_for * 1000))
        except (redis.RedisError, OSError):
            pass  # this process knows; the others learn when they time out themselves


__all__ = ["SlowMarks"]
