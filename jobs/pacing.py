"""Per-webhook pacing: at most RISKAPI_WEBHOOK_MAX_RATE attempts a second to one webhook, across every worker.

Each attempt reserves the next free slot of its webhook when a worker takes it: slots are 1/rate seconds
apart, kept in Redis as the webhook's next free moment on Redis's own clock (a generic cell rate
algorithm), so the rate holds for all worker processes on all hosts together and no host's clock
matters. A burst of 10,000 events thus reaches a receiver spread over 10,000/rate seconds, while the
waiting deliveries stay claimed in their webhook's line (jobs.lines), not in a thread.

Slots are reserved, never returned: a delivery dropped while it waits (its webhook disabled, the
process stopped) leaves a gap, which only delays the next one. When Redis does not answer, each
process paces by its own clock, so the rate then holds per process.
"""

from __future__ import annotations

import threading
import time

import redis

# KEYS[1]: the webhook's next free moment (microseconds, Redis time); ARGV: interval (us), slots wanted.
# Returns the wait (us) before the first reserved slot; the others follow one interval apart.
_RESERVE = """
local now = redis.call('TIME')
local t = tonumber(now[1]) * 1000000 + tonumber(now[2])
local interval = tonumber(ARGV[1])
local free = tonumber(redis.call('GET', KEYS[1]) or '0')
if free < t then free = t end
local after = free + interval * tonumber(ARGV[2])
redis.call('SET', KEYS[1], string.format('%.0f', after), 'PX', math.floor((after - t) / 1000) + 1000)
return math.floor(free - t)
"""


class Pacer:
    """The slots of every webhook's attempts, in Redis (or, while Redis is away, in this process)."""

    def __init__(self, connection: redis.Redis, rate: float, prefix: str):
        self.rate = rate
        self.prefix = prefix
        self._interval_us = int(1_000_000 / rate) if rate > 0 else 0
        self._connection = connection
        self._script = connection.register_script(_RESERVE) if rate > 0 else None
        self._local: dict[int, float] = {}  # webhook id -> monotonic next free moment, used without Redis
        self._lock = threading.Lock()

    def key(self, webhook_id: int) -> str:
        """Name the Redis key of a webhook's next free slot."""
        return f"{self.prefix}:{webhook_id}"

    def reserve(self, webhook_id: int, slots: int = 1) -> list[float]:
        """Reserve the next `slots` attempts of a webhook; return the seconds to wait before each (0 without a rate)."""
        return self.reserve_many({webhook_id: slots})[webhook_id]

    def reserve_many(self, wanted: dict[int, int]) -> dict[int, list[float]]:
        """Reserve {webhook id: slots} in one round trip; return each webhook's waits, as `reserve` does."""
        if self._script is None:
            return {webhook_id: [0.0] * max(slots, 0) for webhook_id, slots in wanted.items()}
        asked = {webhook_id: slots for webhook_id, slots in wanted.items() if slots > 0}
        interval = self._interval_us / 1_000_000
        try:
            with self._connection.pipeline(transaction=False) as pipe:
                for webhook_id, slots in asked.items():
                    self._script(keys=[self.key(webhook_id)], args=[self._interval_us, slots], client=pipe)
                firsts = [int(us) / 1_000_000 for us in pipe.execute()]
        except (redis.RedisError, OSError):
            firsts = [self._reserve_here(webhook_id, slots) for webhook_id, slots in asked.items()]
        waits = {
            webhook_id: [first + i * interval for i in range(slots)]
            for (webhook_id, slots), first in zip(asked.items(), firsts, strict=True)
        }
        return {webhook_id: waits.get(webhook_id, []) for webhook_id in wanted}

    def _reserve_here(self, webhook_id: int, slots: int) -> float:
        now = time.monotonic()
        with self._lock:
            free = max(self._local.get(webhook_id, now), now)
            self._local[webhook_id] = free + slots * self._interval_us / 1_000_000
            if len(self._local) > 10_000:  # forget webhooks whose slots are all in the past
                self._local = {k: v for k, v in self._local.items() if v > now}
        return free - now


__all__ = ["Pacer"]
