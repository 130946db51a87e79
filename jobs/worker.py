"""A delivery worker process: the outbox relay in a thread, and RQ workers (one with RQ's scheduler).

The worker class is RQ's `SimpleWorker` on purpose: a delivery is a few milliseconds of database
work around one HTTPS POST, and the default worker's fork per job would cost more than the job.
Deliveries mostly wait on the network (up to the 5 s deadline), so a process runs one worker per
thread (RISKAPI_WEBHOOK_WORKER_THREADS): one slow receiver does not hold up every other delivery.
The main thread's worker handles SIGTERM/SIGINT and runs the scheduler; job timeouts are SIGALRM
there and a timer in the other threads.
"""

from __future__ import annotations

import logging
import threading
import time

import redis
from rq import SimpleWorker
from rq.scheduler import RQScheduler
from rq.timeouts import TimerDeathPenalty

import models
from jobs import queue as jobs_queue
from jobs.broker import die_with_parent
from jobs.delivery import AttemptFailed
from jobs.relay import Relay
from riskapi.config import Settings

log = logging.getLogger("riskapi.worker")


class DeliveryWorker(SimpleWorker):
    """SimpleWorker that reconnects to Redis quickly and logs failed attempts in one line."""

    # RQ's default backoff grows to 60 s, which would keep deliveries waiting long after Redis is back.
    max_connection_wait_time = 5.0
    _last_beat = 0.0

    def heartbeat(self, timeout=None, pipeline=None):
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
        return super().heartbeat(timeout, pipeline)

    def handle_exception(self, job, *exc_info):
        """Log an expected failed attempt without a traceback; anything else as RQ does."""
        if len(exc_info) > 1 and isinstance(exc_info[1], AttemptFailed):
            self.log.info("%s; retry scheduled", exc_info[1])
            return
        super().handle_exception(job, *exc_info)


class ThreadWorker(DeliveryWorker):
    """A DeliveryWorker in a helper thread: job timeouts by timer, no signal handlers (the main one's)."""

    death_penalty_class = TimerDeathPenalty
    busy = False  # a job in hand (known without asking Redis, which may be gone)

    def _install_signal_handlers(self):
        pass

    def execute_job(self, job, queue):
        self.busy = True
        try:
            return super().execute_job(job, queue)
        finally:
            self.busy = False

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        """Wait for a job in one-second slices, so that a stop request is seen within a second."""
        if timeout is None:  # burst
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        while not self._stop_requested:
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time=1)
            if result is not None:
                return result
        return None


def _serve_jobs(make_worker, stop: threading.Event, burst: bool, current: list) -> None:
    """Run RQ workers from make_worker until stop is set (or, in burst mode, the queue is empty)."""
    while not stop.is_set():
        worker = make_worker()
        current.append(worker)
        try:
            worker.work(burst=burst, with_scheduler=isinstance(worker, MainWorker), logging_level="WARNING")
            return  # asked to stop (or burst done)
        except redis.ConnectionError as exc:
            if worker.scheduler is not None:
                worker.stop_scheduler()
            if stop.is_set() or getattr(worker, "_stop_requested", False):
                return
            log.warning("worker lost Redis (%s); restarting", exc)
            time.sleep(1)
        finally:
            current.remove(worker)


class DyingScheduler(RQScheduler):
    """RQ's scheduler, whose forked process dies with its worker even when the worker is SIGKILLed."""

    def work(self):
        die_with_parent()
        super().work()


class MainWorker(DeliveryWorker):
    """The worker of the main thread: it handles SIGTERM/SIGINT and runs RQ's scheduler."""

    # Called once RQ's scheduler (a forked process) has started: other threads are best started
    # after the fork, so that the child inherits no lock another thread holds.
    ready = None
    # Set on SIGTERM/SIGINT before RQ handles them (RQ's handler may fail when Redis is gone).
    stopping: threading.Event | None = None

    def request_stop(self, signum, frame):
        if self.stopping is not None:
            self.stopping.set()
        super().request_stop(signum, frame)

    def request_force_stop(self, signum, frame):
        if self.stopping is not None:
            self.stopping.set()
        super().request_force_stop(signum, frame)

    def _start_scheduler(self, burst=False, logging_level="INFO", date_format=None, log_format=None, **kwargs):
        try:
            if burst:
                super()._start_scheduler(burst, logging_level, **_formats(date_format, log_format))
                return
            # As RQ's own, but with a scheduler process that cannot outlive this one.
            self.scheduler = DyingScheduler(
                self.queues,
                connection=self.connection,
                logging_level=logging_level if logging_level is not None else self.log.level,
                serializer=self.serializer,
                **_formats(date_format, log_format),
            )
            self.scheduler.acquire_locks()
            if self.scheduler.acquired_locks:
                self.scheduler.start()
        finally:
            if self.ready is not None:
                self.ready()


def _formats(date_format, log_format) -> dict:
    formats = {"date_format": date_format, "log_format": log_format}
    return {name: value for name, value in formats.items() if value is not None}


def run(
    settings: Settings,
    connection: redis.Redis,
    relay_connection: redis.Redis,
    burst: bool = False,
    threads: int = 1,
) -> None:
    """Run the relay and `threads` delivery workers until SIGTERM/SIGINT (or, in burst mode, until idle).

    Deliveries wait on the network, so one process delivers several at once: one RQ worker per
    thread (SimpleWorker: no fork per job), the main thread's with RQ's scheduler.
    """
    logging.getLogger("rq.worker").setLevel(logging.WARNING)
    models.bind(settings.database_url)
    relay = Relay(relay_connection, settings)
    stop = threading.Event()
    queue = jobs_queue.queue(connection, settings.webhook_queue)
    helpers: list = []
    helper_threads: list = []
    if burst:
        models.db.connect(reuse_if_open=True)
        while relay.relay_pending():
            pass
        relay.rescue()

    def start_threads() -> None:
        if helper_threads or stop.is_set():
            return
        if not burst:
            threading.Thread(target=relay.run, args=(stop,), name="relay", daemon=True).start()
        for number in range(max(threads, 1) - 1):
            thread = threading.Thread(
                target=_serve_jobs,
                args=(lambda: ThreadWorker([queue], connection=connection), stop, burst, helpers),
                name=f"delivery-{number + 1}",
                daemon=True,
            )
            thread.start()
            helper_threads.append(thread)
        helper_threads.append(threading.current_thread())  # started: never again

    def main_worker() -> MainWorker:
        worker = MainWorker([queue], connection=connection, maintenance_interval=60)
        worker.ready = start_threads
        worker.stopping = stop
        return worker

    try:
        _serve_jobs(main_worker, stop, burst, [])
    finally:
        stop.set()
        for worker in list(helpers):
            worker._stop_requested = True  # warm: each finishes the job in hand
        # Wait for jobs in hand (their deadline is the webhook timeout), and a moment for idle helpers to
        # sign off from Redis; a helper stuck retrying a Redis that is gone dies with the process.
        started = time.monotonic()
        others = [thread for thread in helper_threads if thread is not threading.current_thread()]
        while any(thread.is_alive() for thread in others):
            waited = time.monotonic() - started
            if waited > settings.webhook_timeout + 5 or (waited > 1.5 and not any(w.busy for w in list(helpers))):
                break
            time.sleep(0.05)
