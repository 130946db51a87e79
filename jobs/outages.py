"""Riding out outages: Redis or the database may go away for any length of time, and come back.

Whoever notices retries with capped backoff (`Backoff`) and reports to the process's `Outage`, which
logs once when it goes and once when it is back, however many threads notice and however often they
retry. A broken database connection is thrown away and the step that needed it runs once more on a
new one (`reconnecting`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import peewee
import redis

import models

T = TypeVar("T")

# Redis errors that say nothing about the command, only that Redis could not be reached in time.
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError, OSError)
# What a lost or broken database connection raises (peewee wraps the driver's errors in these).
DATABASE_ERRORS = (peewee.DatabaseError, peewee.InterfaceError)
# Of those, what says the database could not be reached (or was busy), not that the statement was wrong:
# worth waiting for, unlike an IntegrityError or a DataError, which would fail the same way again.
DATABASE_AWAY = (peewee.OperationalError, peewee.InterfaceError)

# A recorder waiting for the database tries it at least this often (jobs.recorder), and renews its
# claims first thing when it answers; a relay's rescue waits RESCUE_GRACE after the database last
# failed in its process (jobs.relay), so it never takes a claim that a live worker is about to renew.
RECONNECT_CAP = 1.0
RESCUE_GRACE = 3 * RECONNECT_CAP


def reconnecting(step: Callable[..., T], *args: Any) -> T:
    """Run a database step; after a database error, run it once more on a new connection."""
    for last in (False, True):
        try:
            # This thread's connection, held until its unit of work gives it back (models.give_back).
            models.check_out()
            return step(*args)
        except DATABASE_ERRORS as exc:
            models.give_back(exc)  # never back into the pool: it may be broken
            if last:
                raise
    raise AssertionError("unreachable: the last try returns or raises")


class Backoff:
    """Capped exponential delays: `first`, doubling up to `cap`, until reset()."""

    def __init__(self, first: float = 0.5, cap: float = 5.0):
        self.first = first
        self.cap = cap
        self.current = 0.0

    def next(self) -> float:
        """Return the delay before the next try."""
        self.current = min(self.current * 2, self.cap) if self.current else self.first
        return self.current

    def reset(self) -> None:
        """Start again from `first` (after a success)."""
        self.current = 0.0


class Outage:
    """Whether a dependency answers, as all threads of a process see it: logged once as it goes and once as it returns."""

    # A failure this soon after the dependency answered again most likely comes from a call made before
    # it did (each call retries for a while): not a new outage.
    SETTLE = 1.0

    def __init__(self, name: str, log: logging.Logger):
        self.name = name
        self.log = log
        self._lock = threading.Lock()
        self._since: float | None = None
        self._back_at = -self.SETTLE
        self._failed_at = -float("inf")  # the last failure any thread reported

    def quiet_for(self) -> float:
        """Return the seconds since a call last failed (infinite when none ever did)."""
        return time.monotonic() - self._failed_at

    def lost(self, exc: BaseException) -> None:
        """Report a failed call; only the first since the dependency last answered is logged."""
        with self._lock:
            self._failed_at = time.monotonic()
            if self._since is not None or time.monotonic() - self._back_at < self.SETTLE:
                return
            self._since = time.monotonic()
        reason = " ".join(str(exc).split())  # drivers' messages may run over several lines
        self.log.warning("%s unreachable (%s: %s); retrying until it is back", self.name, type(exc).__name__, reason)

    def back(self) -> None:
        """Report a successful call; the first after an outage is logged."""
        if self._since is None:
            return
        with self._lock:
            since, self._since = self._since, None
            self._back_at = time.monotonic()
        if since is not None:
            self.log.warning("%s reachable again after %.1f s", self.name, time.monotonic() - since)


def wait_for(connection: redis.Redis, stop: threading.Event, outage: Outage) -> bool:
    """Ping Redis with capped backoff until it answers (True) or stop is set (False)."""
    backoff = Backoff()
    while not stop.is_set():
        try:
            connection.ping()
        except (redis.RedisError, OSError) as exc:
            outage.lost(exc)
            stop.wait(backoff.next())
            continue
        outage.back()
        return True
    return False
