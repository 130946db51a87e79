"""The RQ workers of a delivery process: SimpleWorkers that ride out Redis outages and hand jobs the engine.

The worker class is RQ's `SimpleWorker` on purpose: a delivery is a few milliseconds of database
work around one HTTPS POST, and the default worker's fork per job would cost more than the job.
Each worker hands the process's engine to the jobs it performs (jobs.rq_internals.EngineJob).
The main thread's worker handles SIGTERM/SIGINT and runs the scheduler (jobs.runtime.rq_scheduler); job
timeouts are SIGALRM there and a timer in the helper threads' workers.

A worker that loses Redis gives it up quietly (its wait for a job returns with `lost` set): the
process builds a new one once Redis answers (jobs.runtime.worker).
"""

from __future__ import annotations

import logging
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import redis
from redis.client import PubSub, PubSubWorkerThread
from rq import Queue
from rq.exceptions import DequeueTimeout
from rq.job import Job
from rq.timeouts import TimerDeathPenalty
from rq.worker import WorkerStatus

from jobs.outages import DATABASE_ERRORS, UNREACHABLE, Outage
from jobs.outcomes import AttemptFailed
from jobs.rq_internals import HookedWorker, forget_scheduler_process, scheduler_process
from jobs.runtime.rq_scheduler import DyingScheduler

log = logging.getLogger("riskapi.worker")

# Seconds a worker waits for a job in one go: a stop request or a dead scheduler is seen this soon.
SLICE = 1


class QuietRedisErrors(logging.Filter):
    """Drop RQ's own reports of an unreachable Redis: the process's Outage reports each outage once."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], UNREACHABLE):
            return False
        return "Redis connection timeout" not in str(record.msg)


class DeliveryWorker(HookedWorker):
    """SimpleWorker that waits for jobs in slices, gives up its Redis quietly, and logs failed attempts in one line."""

    # RQ raises the socket timeout to outlast its own long waits for a job (415 s); ours are SLICE long,
    # and a Redis that hangs must show as an error within seconds, not minutes.
    connection_timeout = SLICE + 14
    _last_beat = 0.0
    lost: BaseException | None = None  # the Redis error that ended the last wait for a job
    database_outage: Outage | None = None

    def heartbeat(self, timeout: int | None = None, pipeline: redis.client.Pipeline | None = None) -> None:
        """Extend the worker's registration, at most once a second when nothing else changes.

        RQ beats three times per job (7 of its ~17 round trips to Redis); the registration lives
        for minutes, so beats in between add nothing. Beats that carry a job's TTL (a pipeline or
        a timeout) always go through.
        """
        if timeout is None and pipeline is None:
            now = time.monotonic()
            if now - self._last_beat < 1.0:
                return
            self._last_beat = now
        super().heartbeat(timeout, pipeline)

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        """Log an expected failed attempt, or a database outage, in one line; anything else as RQ does."""
        error = exc_info[1] if len(exc_info) > 1 else None
        if isinstance(error, AttemptFailed):
            self.log.info("%s; retry scheduled", error)
        elif isinstance(error, DATABASE_ERRORS) and self.database_outage is not None:
            self.database_outage.lost(error)  # the delivery stays pending: RQ's Retry or the relay's rescue
        else:
            super().handle_exception(job, *exc_info)

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> tuple[Job, Queue] | None:
        """Wait for a job in SLICE-second slices; on losing Redis, return None with `lost` set."""
        # RQ's own version retries a lost Redis in place, logging every try, with a worker whose
        # registration a restarted Redis has forgotten: this one hands the worker back instead.
        try:
            self.set_state(WorkerStatus.IDLE)
            while not self.stop_requested:
                self.heartbeat()
                if self.should_run_maintenance_tasks:
                    self.run_maintenance_tasks()
                if timeout is not None:
                    self.tend()
                try:
                    result = self.queue_class.dequeue_any(
                        self.ordered_queues,
                        None if timeout is None else SLICE,
                        connection=self.connection,
                        job_class=self.job_class,
                        serializer=self.serializer,
                        death_penalty_class=self.death_penalty_class,
                    )
                except DequeueTimeout:
                    continue
                if result is not None:
                    job, queue = result
                    self.reorder_queues(reference_queue=queue)
                    job.redis_server_version = self.get_redis_server_version()
                return result
        except (redis.RedisError, OSError) as exc:
            self.lost = exc
        return None

    def tend(self) -> None:
        """Look after what runs beside the worker between two waits for a job (nothing here)."""

    def stop_scheduler(self) -> None:
        """Stop RQ's scheduler process if it runs; kill it if it does not stop within seconds (RQ waits forever)."""
        process = scheduler_process(self.scheduler) if self.scheduler is not None else None
        if process is None or not process.is_alive():  # is_alive() also reaps one that has exited
            return
        process.terminate()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()

    def pubsub_error(self, exc: Exception, pubsub: PubSub, pubsub_thread: PubSubWorkerThread) -> None:
        """Wait out an unreachable Redis quietly (the worker's loop reports it); anything else as RQ does."""
        if isinstance(exc, UNREACHABLE):
            time.sleep(2.0)
            return
        super().pubsub_error(exc, pubsub, pubsub_thread)


class ThreadWorker(DeliveryWorker):
    """A DeliveryWorker in a helper thread: job timeouts by timer, no signal handlers (the main one's)."""

    death_penalty_class = TimerDeathPenalty
    installs_signal_handlers = False
    busy = False  # a job in hand (known without asking Redis, which may be gone)

    def execute_job(self, job: Job, queue: Queue) -> None:
        self.busy = True
        try:
            return super().execute_job(job, queue)
        finally:
            self.busy = False


class MainWorker(DeliveryWorker):
    """The worker of the main thread: it handles SIGTERM/SIGINT, and runs RQ's scheduler and keeps it running."""

    # Called once RQ's scheduler (a forked process) has started: other threads are best started
    # after the fork, so that the child inherits no lock another thread holds.
    ready: Callable[[], None] | None = None
    # Set on SIGTERM/SIGINT before RQ handles them (RQ's handler may fail when Redis is gone).
    stopping: threading.Event | None = None
    # One per process: a worker built after an outage takes back the scheduler lock its predecessor held.
    scheduler_name: str | None = None
    _next_tend = 0.0

    def request_stop(self, signum: int, frame: types.FrameType | None) -> None:
        if self.stopping is not None:
            self.stopping.set()
        try:
            super().request_stop(signum, frame)
        except (redis.RedisError, OSError):
            self.request_warm_stop()  # Redis is gone: there is nobody to tell

    def request_force_stop(self, signum: int, frame: types.FrameType | None) -> None:
        if self.stopping is not None:
            self.stopping.set()
        super().request_force_stop(signum, frame)

    def tend(self) -> None:
        """Start RQ's scheduler again if its process died (RQ itself looks only every maintenance_interval)."""
        scheduler, now = self.scheduler, time.monotonic()
        if scheduler is None or now < self._next_tend:
            return
        self._next_tend = now + 2.0
        process = scheduler_process(scheduler)
        if process is not None and process.is_alive():
            return
        if process is not None:
            log.warning("RQ's scheduler (pid %s) exited with code %s; starting it again", process.pid, process.exitcode)
            forget_scheduler_process(scheduler)
        scheduler.acquire_locks(auto_start=True)  # unless another process's scheduler holds the lock

    def start_scheduler(
        self, burst: bool, logging_level: str | None, date_format: str | None = None, log_format: str | None = None
    ) -> None:
        """Start RQ's scheduler in a process that dies with this one, then call `ready` (burst: as RQ does)."""
        try:
            if burst:
                super().start_scheduler(burst, logging_level, date_format, log_format)
                return
            # As RQ's own, but with a scheduler process that cannot outlive this one, under the process's name.
            self.scheduler = DyingScheduler(
                self.queues,
                connection=self.connection,
                # Its warnings are lock bookkeeping after an outage, which the worker has reported.
                logging_level="ERROR",
                serializer=self.serializer,
                name=self.scheduler_name,
                **_formats(date_format, log_format),
            )
            self.scheduler.acquire_locks()
            if self.scheduler.acquired_locks:
                self.scheduler.start()
        finally:
            if self.ready is not None:
                self.ready()


def _formats(date_format: str | None, log_format: str | None) -> dict[str, str]:
    formats = {"date_format": date_format, "log_format": log_format}
    return {name: value for name, value in formats.items() if value is not None}


__all__ = ["SLICE", "DeliveryWorker", "MainWorker", "QuietRedisErrors", "ThreadWorker"]
