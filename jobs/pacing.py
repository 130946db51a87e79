"""Per-webhook pacing: at most RISKAPI_WEBHOOK_MAX_RATE attempts start in any one second to one webhook, across
every worker on every host, however late a worker runs.

Two steps, both on Redis's own clock, so no host's clock matters:

* **Slots** (`reserve_many`), when a worker lines deliveries up: each takes the webhook's next free slot,
  slots one interval apart (a generic cell rate algorithm). A burst of 10,000 events is thus spread over
  10,000/rate seconds while its deliveries wait claimed in their webhook's line (jobs.lines), holding no
  thread, and the workers serve one webhook's deliveries in the order they reserved.
* **Starts** (`admit_many`), at the moment attempts would start: the webhook's starts of the last window are
  kept in a sorted set, and an attempt starts only while fewer than the allowed number lie in it; else it
  is told how long to wait and goes back to its line. Slots alone promise nothing when a worker is late
  (a stalled process, a busy machine): every slot that passed meanwhile would start at once. The start
  moment is Redis's, and it is what the attempt records (its `at`) and signs (`webhook-timestamp`).
  The dispatcher asks once for all the attempts it would start in a round, whatever their webhooks
  (a call per attempt was a tenth of a worker's CPU in the soak).

A rate r of 1 or more allows floor(r) starts in any one-second window; below 1, one start in any 1/r
seconds. Slots are reserved, never returned: a delivery dropped while it waits leaves a gap, which only
delays the next one. When Redis does not answer, each process paces by its own clock, so the rate then
holds per process.
"""

from __future__ import annotations

import collections
import math
import os
import threading
import time

import redis

# KEYS[1]: the webhook's next free slot (microseconds, Redis time); ARGV: interval (us), slots wanted.
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

# KEYS[1]: the webhook's starts of the last window (a sorted set, scores in us of Redis time); ARGV: window (us),
# starts allowed in it, a token that makes this call's members unique, the starts wanted. One key a call, so each
# webhook's key may live on any shard of a cluster (docs/capacity.md); a round's calls share one pipeline.
# Returns {now (us), starts admitted now (and recorded), wait (us) before the rest may start}.
_ADMIT = """
local now = redis.call('TIME')
local t = tonumber(now[1]) * 1000000 + tonumber(now[2])
local window, wanted = tonumber(ARGV[1]), tonumber(ARGV[4])
local at = string.format('%.0f', t)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', t - window))
local admitted = math.max(math.min(wanted, tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1])), 0)
for j = 1, admitted do
  redis.call('ZADD', KEYS[1], at, at .. ':' .. ARGV[3] .. ':' .. j)
end
if admitted > 0 then redis.call('PEXPIRE', KEYS[1], math.floor(window / 1000) + 1000) end
local wait = 0
if admitted < wanted then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  wait = tonumber(oldest[2]) + window - t
end
return {at, admitted, string.format('%.0f', wait)}
"""


def allowance(rate: float) -> tuple[int, int]:
    """Return (starts allowed, window in microseconds) for a rate a second; (0, 0) without a rate."""
    if rate <= 0:
        return 0, 0
    if rate >= 1:
        return math.floor(rate), 1_000_000
    return 1, round(1_000_000 / rate)


class Pacer:
    """The slots and the starts of every webhook's attempts, in Redis (or, while Redis is away, in this process)."""

    def __init__(self, connection: redis.Redis, rate: float, prefix: str):
        self.rate = rate
        self.prefix = prefix
        self.allowed, self._window_us = allowance(rate)
        self._interval_us = self._window_us // self.allowed if self.allowed else 0
        self._connection = connection
        self._reserve = connection.register_script(_RESERVE) if self.allowed else None
        self._admit = connection.register_script(_ADMIT) if self.allowed else None
        self._token = os.urandom(6).hex()  # this process's part of a start's member in the sorted set
        self._count = 0
        self._slots: dict[int, int] = {}  # webhook id -> next free slot (us, this host's clock), used without Redis
        self._starts: dict[int, collections.deque[int]] = {}  # webhook id -> starts of the window, without Redis
        self._lock = threading.Lock()

    def key(self, webhook_id: int) -> str:
        """Name the Redis key of a webhook's next free slot."""
        return f"{self.prefix}:{webhook_id}"

    def starts_key(self, webhook_id: int) -> str:
        """Name the Redis key of a webhook's starts in the last window."""
        return f"{self.prefix}:{webhook_id}:starts"

    def reserve(self, webhook_id: int, slots: int = 1) -> list[float]:
        """Reserve the next `slots` attempts of a webhook; return the seconds to wait before each (0 without a rate)."""
        return self.reserve_many({webhook_id: slots})[webhook_id]

    def reserve_many(self, wanted: dict[int, int]) -> dict[int, list[float]]:
        """Reserve {webhook id: slots} in one round trip; return each webhook's waits, as `reserve` does."""
        if self._reserve is None:
            return {webhook_id: [0.0] * max(slots, 0) for webhook_id, slots in wanted.items()}
        asked = {webhook_id: slots for webhook_id, slots in wanted.items() if slots > 0}
        interval = self._interval_us / 1_000_000
        try:
            with self._connection.pipeline(transaction=False) as pipe:
                for webhook_id, slots in asked.items():
                    self._reserve(keys=[self.key(webhook_id)], args=[self._interval_us, slots], client=pipe)
                firsts = [int(us) / 1_000_000 for us in pipe.execute()]
        except (redis.RedisError, OSError):
            firsts = [self._reserve_here(webhook_id, slots) for webhook_id, slots in asked.items()]
        waits = {
            webhook_id: [first + i * interval for i in range(slots)]
            for (webhook_id, slots), first in zip(asked.items(), firsts, strict=True)
        }
        return {webhook_id: waits.get(webhook_id, []) for webhook_id in wanted}

    def admit(self, webhook_id: int) -> tuple[float, int | None]:
        """Start an attempt to a webhook now if its window allows: return (0, the start in us since the epoch),
        or (seconds to wait, None). Without a rate every attempt starts, and the moment is left to the caller."""
        admitted, at, wait = self.admit_many({webhook_id: 1})[webhook_id]
        return (0.0, at) if admitted else (wait, None)

    def admit_many(self, wanted: dict[int, int]) -> dict[int, tuple[int, int | None, float]]:
        """Start up to {webhook id: n} attempts now, as far as each window allows, in one round trip: return each
        webhook's (starts admitted, their start in us since the epoch, seconds the rest must wait). A webhook's
        starts share one moment of Redis's clock. Without a rate all start, at a moment left to the caller (None)."""
        asked = {webhook_id: n for webhook_id, n in wanted.items() if n > 0}
        if self._admit is None or not asked:
            return {webhook_id: (n, None, 0.0) for webhook_id, n in wanted.items()}
        with self._lock:
            self._count += 1
            token = f"{self._token}{self._count}"
        try:
            with self._connection.pipeline(transaction=False) as pipe:
                for i, (webhook_id, n) in enumerate(asked.items()):
                    args: list[int | str] = [self._window_us, self.allowed, f"{token}:{i}", n]
                    self._admit(keys=[self.starts_key(webhook_id)], args=args, client=pipe)
                told = pipe.execute()
            each = {
                webhook_id: (int(admitted), int(at), int(wait) / 1_000_000)
                for webhook_id, (at, admitted, wait) in zip(asked, told, strict=True)
            }
        except (redis.RedisError, OSError):
            each = {webhook_id: self._admit_here(webhook_id, n) for webhook_id, n in asked.items()}
        return {webhook_id: each.get(webhook_id, (0, None, 0.0)) for webhook_id in wanted}

    def _reserve_here(self, webhook_id: int, slots: int) -> float:
        now = time.time_ns() // 1000
        with self._lock:
            free = max(self._slots.get(webhook_id, now), now)
            self._slots[webhook_id] = free + slots * self._interval_us
            if len(self._slots) > 10_000:  # forget webhooks whose slots are all in the past
                self._slots = {k: v for k, v in self._slots.items() if v > now}
        return (free - now) / 1_000_000

    def _admit_here(self, webhook_id: int, wanted: int) -> tuple[int, int, float]:
        now = time.time_ns() // 1000
        with self._lock:
            starts = self._starts.setdefault(webhook_id, collections.deque())
            while starts and starts[0] <= now - self._window_us:
                starts.popleft()
            admitted = max(min(wanted, self.allowed - len(starts)), 0)
            starts.extend([now] * admitted)
            wait = (starts[0] + self._window_us - now) / 1_000_000 if admitted < wanted else 0.0
            if len(self._starts) > 10_000:  # forget webhooks with no start in their window
                self._starts = {k: v for k, v in self._starts.items() if v and v[-1] > now - self._window_us}
        return admitted, now, wait


__all__ = ["Pacer", "allowance"]
