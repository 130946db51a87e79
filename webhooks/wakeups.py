"""Wake a relay when a write may have added deliveries, instead of leaving them to its next poll.

The outbox stays the record and polling stays the guarantee: a relay still looks every
RISKAPI_WEBHOOK_RELAY_INTERVAL. The API pushes a token onto a Redis list after each write it
answers with success that left deliveries waiting for a relay (models.delivery_states.left_waiting: a
write no webhook takes pushes nothing), and an idle relay blocks on that list (BLPOP) rather than sleeping, so a new
delivery leaves for RQ about a millisecond after its commit, not half an interval later on average.
A lost or extra token costs nothing but a poll. Requests never wait for Redis: they set an event,
and one thread per API process pushes (coalescing a burst into one token).
"""

from __future__ import annotations

import logging
import os
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger("webhooks.wakeups")


def key(queue: str) -> str:
    """Name the list a relay of `queue` waits on."""
    return f"riskapi:wake:{queue}"


# A BLPOP longer than the client's socket timeout (jobs.runtime.embedded_redis.connect: 10 s) fails with a
# timeout error instead of coming back empty, and the relay then sleeps an interval deaf to wake-ups:
# a longer wait is made of waits no longer than this.
LONGEST_BLPOP = 2.0


def wait(connection: redis.Redis, queue: str, timeout: float) -> bool:
    """Block up to `timeout` seconds for a wake-up; return whether one came (all pending ones are taken)."""
    deadline = time.monotonic() + timeout
    while True:
        step = min(deadline - time.monotonic(), LONGEST_BLPOP)
        # BLPOP's 0 means forever: a wait that has run out still takes one short look.
        woken = connection.blpop([key(queue)], timeout=max(step, 0.01)) is not None
        if woken or step < LONGEST_BLPOP:
            break
    if woken:
        connection.delete(key(queue))  # one pass serves every write before it
    return woken


class Nudger:
    """Pushes wake-up tokens from a thread of its own, so a request only sets an event."""

    def __init__(self, redis_url: str, queue: str):
        # No retries and short timeouts: a token that cannot be pushed is dropped (the relay polls anyway).
        self.connection = redis.Redis.from_url(
            redis_url, socket_connect_timeout=0.5, socket_timeout=0.5, retry=Retry(NoBackoff(), 0)
        )
        self.key = key(queue)
        self._wanted = threading.Event()
        self._lock = threading.Lock()
        self._pid: int | None = None  # the thread is started in the process that serves (after any fork)

    def nudge(self) -> None:
        """Ask for a wake-up token to be pushed soon."""
        if self._pid != os.getpid():
            self._start()
        self._wanted.set()

    def _start(self) -> None:
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="relay-wake", daemon=True).start()

    def _run(self) -> None:
        failing = False
        while True:
            self._wanted.wait()
            self._wanted.clear()
            try:
                with self.connection.pipeline(transaction=False) as pipe:
                    # One statement each: redis-py types a pipeline's commands as returning their replies.
                    pipe.rpush(self.key, 1)
                    pipe.expire(self.key, 60)
                    pipe.execute()
                failing = False
            except (redis.RedisError, OSError) as exc:
                if not failing:
                    log.info("relay wake-ups off while Redis does not answer (%s); relays poll", exc)
                failing = True
                time.sleep(1.0)  # at most one try a second while Redis is away


__all__ = ["Nudger", "key", "wait"]
