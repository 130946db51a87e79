"""RQ's scheduler as the delivery worker runs it: in a process that dies with its worker and outlasts Redis outages.

The scheduler moves due jobs (retries) to their queue. RQ forks it from the main thread's worker;
Linux's parent-death signal ends it with that worker even when it is SIGKILLed, and it rides out
an unreachable Redis by itself (registering again once Redis is back, perhaps empty).
"""

from __future__ import annotations

import contextlib
import time

import redis
from rq.scheduler import RQScheduler

from jobs.outages import Backoff
from jobs.rq_internals import install_scheduler_signal_handlers, scheduler_stop_requested
from jobs.runtime.embedded_redis import die_with_parent


class DyingScheduler(RQScheduler):
    """RQ's scheduler, in a process that dies with its worker (even a SIGKILLed one) and outlasts Redis outages."""

    def work(self) -> None:
        """Move due jobs to their queue every `interval` seconds until SIGTERM/SIGINT, whether Redis answers or not."""
        die_with_parent()
        install_scheduler_signal_handlers(self)
        backoff = Backoff()
        registered = False
        while not scheduler_stop_requested(self):
            try:
                if not registered:  # again after an outage: Redis may have come back empty
                    self.register_birth()
                    registered = True
                if self.should_reacquire_locks:
                    self.acquire_locks()
                self.heartbeat()  # takes back a lock that expired while Redis was away
                self.enqueue_scheduled_jobs()
                backoff.reset()
                pause = self.interval
            except (redis.RedisError, OSError):
                registered = False  # the worker reports the outage; this process only waits it out
                pause = backoff.next()
            deadline = time.monotonic() + pause
            while not scheduler_stop_requested(self) and time.monotonic() < deadline:
                time.sleep(0.1)
        with contextlib.suppress(redis.RedisError, OSError):
            self.stop()


__all__ = ["DyingScheduler"]
