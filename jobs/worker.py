"""A delivery worker process: the outbox relay in a thread, and RQ workers (one with RQ's scheduler).

The worker class is RQ's `SimpleWorker` on purpose: a delivery is a few milliseconds of database
work around one HTTPS POST, and the default worker's fork per job would cost more than the job.
RQ's threads (RISKAPI_WEBHOOK_WORKER_THREADS) only claim deliveries and hand them to the process's
attempts in flight (jobs.inflight), so a slow receiver holds none of them.
The main thread's worker handles SIGTERM/SIGINT and runs the scheduler; job timeouts are SIGALRM
there and a timer in the other threads.

Redis may go away for any length of time, and come back empty. A worker that loses it is let go,
and a new one is built once Redis answers (RQ's worker registers itself and runs a pubsub thread
and the scheduler: state that a restarted Redis no longer knows). The forked scheduler rides
outages out by itself, and the main worker starts it again within seconds if it died anyway.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid

import redis
from rq.exceptions import DequeueTimeout, StopRequested
from rq.scheduler import RQScheduler
from rq.timeouts import TimerDeathPenalty
from rq.worker import WorkerStatus

import models
from jobs import inflight
from jobs import queue as jobs_queue
from jobs.broker import UNREACHABLE, Backoff, Outage, die_with_parent, wait_for
from jobs.delivery import DATABASE_ERRORS, AttemptFailed
from jobs.relay import Relay
from jobs.rq_internals import (
    HookedWorker,
    forget_scheduler_process,
    install_scheduler_signal_handlers,
    scheduler_process,
    scheduler_stop_requested,
)
from riskapi.config import Settings

log = logging.getLogger("riskapi.worker")

# Seconds a worker waits for a job in one go: a stop request or a dead scheduler is seen this soon.
SLICE = 1
# A worker that ended after running this long was not failing in a loop: build the next one at once.
STEADY = 30.0


class _QuietRedisErrors(logging.Filter):
    """Drop RQ's own reports of an unreachable Redis: the process's Outage reports each outage once."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], UNREACHABLE):
            return False
        return "Redis connection timeout" not in str(record.msg)


_QUIET = _QuietRedisErrors()


class DeliveryWorker(HookedWorker):
    """SimpleWorker that waits for jobs in slices, gives up its Redis quietly, and logs failed attempts in one line."""

    # RQ raises the socket timeout to outlast its own long waits for a job (415 s); ours are SLICE long,
    # and a Redis that hangs must show as an error within seconds, not minutes.
    connection_timeout = SLICE + 14
    _last_beat = 0.0
    lost: BaseException | None = None  # the Redis error that ended the last wait for a job
    database_outage: Outage | None = None

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
        """Log an expected failed attempt, or a database outage, in one line; anything else as RQ does."""
        error = exc_info[1] if len(exc_info) > 1 else None
        if isinstance(error, AttemptFailed):
            self.log.info("%s; retry scheduled", error)
        elif isinstance(error, DATABASE_ERRORS) and self.database_outage is not None:
            self.database_outage.lost(error)  # the delivery stays pending: RQ's Retry or the relay's rescue
        else:
            super().handle_exception(job, *exc_info)

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
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

    def stop_scheduler(self):
        """Stop RQ's scheduler process if it runs; kill it if it does not stop within seconds (RQ waits forever)."""
        process = scheduler_process(self.scheduler) if self.scheduler is not None else None
        if process is None or not process.is_alive():  # is_alive() also reaps one that has exited
            return
        process.terminate()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()

    def pubsub_error(self, exc, pubsub, pubsub_thread):
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

    def execute_job(self, job, queue):
        self.busy = True
        try:
            return super().execute_job(job, queue)
        finally:
            self.busy = False


class DyingScheduler(RQScheduler):
    """RQ's scheduler, in a process that dies with its worker (even a SIGKILLed one) and outlasts Redis outages."""

    def work(self):
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


class MainWorker(DeliveryWorker):
    """The worker of the main thread: it handles SIGTERM/SIGINT, and runs RQ's scheduler and keeps it running."""

    # Called once RQ's scheduler (a forked process) has started: other threads are best started
    # after the fork, so that the child inherits no lock another thread holds.
    ready = None
    # Set on SIGTERM/SIGINT before RQ handles them (RQ's handler may fail when Redis is gone).
    stopping: threading.Event | None = None
    # One per process: a worker built after an outage takes back the scheduler lock its predecessor held.
    scheduler_name: str | None = None
    _next_tend = 0.0

    def request_stop(self, signum, frame):
        if self.stopping is not None:
            self.stopping.set()
        try:
            super().request_stop(signum, frame)
        except (redis.RedisError, OSError):
            self.request_warm_stop()  # Redis is gone: there is nobody to tell

    def request_force_stop(self, signum, frame):
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

    def start_scheduler(self, burst, logging_level, date_format=None, log_format=None):
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


def _formats(date_format, log_format) -> dict:
    formats = {"date_format": date_format, "log_format": log_format}
    return {name: value for name, value in formats.items() if value is not None}


def _let_go(worker, current: list) -> None:
    """Stop what RQ's teardown leaves running when Redis is gone: the pubsub thread and the scheduler."""
    with contextlib.suppress(ValueError):
        current.remove(worker)
    thread = worker.pubsub_thread
    if thread is not None and thread.is_alive():
        thread.stop()
    if worker.scheduler is not None:
        worker.stop_scheduler()


def _serve_jobs(make_worker, stop: threading.Event, burst: bool, current: list, connection, outage: Outage) -> None:
    """Run RQ workers from make_worker until stop is set (or, in burst mode, the queue is empty), whatever Redis does."""
    pacing = Backoff()
    try:
        while not stop.is_set():
            started, worker, error = time.monotonic(), None, None
            try:
                worker = make_worker()  # RQ's constructor already talks to Redis (CLIENT SETNAME)
                current.append(worker)
                worker.work(burst=burst, with_scheduler=isinstance(worker, MainWorker), logging_level="WARNING")
                error = worker.lost
            except (redis.RedisError, OSError) as exc:
                error = exc
            except Exception:
                log.exception("delivery worker failed; starting another")
            finally:
                if worker is not None:
                    _let_go(worker, current)
            if stop.is_set() or (worker is not None and worker.stop_requested):
                return
            if burst and error is None:
                return  # the queue is empty
            if error is not None:
                outage.lost(error)
            if time.monotonic() - started > STEADY:
                pacing.reset()
            if stop.wait(pacing.next()) or not wait_for(connection, stop, outage):
                return
    except StopRequested:  # SIGTERM/SIGINT between two workers: RQ's handler raises it wherever we are
        return


def run(
    settings: Settings,
    connection: redis.Redis,
    relay_connection: redis.Redis,
    burst: bool = False,
    threads: int = 1,
) -> None:
    """Run the relay and `threads` delivery workers until SIGTERM/SIGINT (or, in burst mode, until idle).

    One RQ worker per thread (SimpleWorker: no fork per job), the main thread's with RQ's scheduler;
    their attempts run in the process's jobs.inflight.Engine, started with them (after the fork).
    """
    rq_log = logging.getLogger("rq.worker")
    rq_log.setLevel(logging.WARNING)
    rq_log.addFilter(_QUIET)
    models.bind(settings.database_url)
    redis_outage, database_outage = Outage("Redis", log), Outage("database", log)
    relay = Relay(relay_connection, settings, redis_outage, database_outage)
    # RQ's threads only claim deliveries; their attempts run here, many at once (see jobs.inflight).
    engine = inflight.Engine(settings, connection, database_outage)
    inflight.install(engine)
    stop = threading.Event()
    # First attempts before retries: RQ takes from the first queue that has a job.
    queues = [jobs_queue.queue(connection, settings.webhook_queue), jobs_queue.retries(connection, settings.webhook_queue)]
    scheduler_name = uuid.uuid4().hex
    helpers: list = []
    helper_threads: list = []
    if burst:
        models.db.connect(reuse_if_open=True)
        while relay.relay_pending():
            pass
        relay.rescue()

    def thread_worker() -> ThreadWorker:
        worker = ThreadWorker(queues, connection=connection)
        worker.database_outage = database_outage
        return worker

    def start_threads() -> None:
        if helper_threads or stop.is_set():
            return
        engine.start()
        if not burst:
            threading.Thread(target=relay.run, args=(stop,), name="relay", daemon=True).start()
        for number in range(max(threads, 1) - 1):
            thread = threading.Thread(
                target=_serve_jobs,
                args=(thread_worker, stop, burst, helpers, connection, redis_outage),
                name=f"delivery-{number + 1}",
                daemon=True,
            )
            thread.start()
            helper_threads.append(thread)
        helper_threads.append(threading.current_thread())  # started: never again

    def main_worker() -> MainWorker:
        worker = MainWorker(queues, connection=connection, maintenance_interval=60)
        worker.ready = start_threads
        worker.stopping = stop
        worker.scheduler_name = scheduler_name
        worker.database_outage = database_outage
        return worker

    try:
        _serve_jobs(main_worker, stop, burst, [], connection, redis_outage)
    finally:
        stop.set()
        for worker in list(helpers):
            worker.request_warm_stop()  # each finishes the job in hand
        # Wait for jobs in hand (their deadline is the webhook timeout), and a moment for idle helpers to
        # sign off from Redis; a helper stuck retrying a Redis that is gone dies with the process.
        started = time.monotonic()
        others = [thread for thread in helper_threads if thread is not threading.current_thread()]
        while any(thread.is_alive() for thread in others):
            waited = time.monotonic() - started
            if waited > settings.webhook_timeout + 5 or (waited > 1.5 and not any(w.busy for w in list(helpers))):
                break
            time.sleep(0.05)
        # Attempts in flight end within the deadline; what waits in a line is handed back (burst: attempted).
        engine.close(settings.webhook_timeout + 1, drain=burst)
