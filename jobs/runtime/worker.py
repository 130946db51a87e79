"""A delivery worker process: the outbox relay in a thread, RQ workers in threads, and the engine they feed.

One process holds the pipeline's live objects and hands them on: the relay (jobs.relay) moves committed
deliveries to RQ; RQ workers (jobs.runtime.rq_workers, RISKAPI_WEBHOOK_WORKER_THREADS of them, the main thread's
with RQ's scheduler) run the jobs, which claim deliveries and line them up in the engine (jobs.lines);
the engine's pool threads send (over the process's pool of kept connections, jobs.https.connections) and its
recorder writes the outcomes (jobs.recorder). Nothing is found through a module global.

Redis may go away for any length of time, and come back empty. A worker that loses it is let go,
and a new one is built once Redis answers (RQ's worker registers itself and runs a pubsub thread
and the scheduler: state that a restarted Redis no longer knows). The forked scheduler rides
outages out by itself, and the main worker starts it again within seconds if it died anyway.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable

import redis
from rq.exceptions import StopRequested

import models
from foundation.config import Settings
from jobs import queue as jobs_queue
from jobs.https.connections import Pool
from jobs.lines import Engine
from jobs.outages import Backoff, Outage, wait_for
from jobs.relay import Relay
from jobs.runtime import embedded_redis
from jobs.runtime.rq_workers import DeliveryWorker, MainWorker, QuietRedisErrors, ThreadWorker

log = logging.getLogger("riskapi.worker")

# A worker that ended after running this long was not failing in a loop: build the next one at once.
STEADY = 30.0
# One filter however often run() is called in a process (filters are not deduplicated by logging).
_QUIET = QuietRedisErrors()


class DeliveryProcess:
    """The live parts of one worker process, built once and handed to whoever needs them."""

    def __init__(self, settings: Settings, connection: redis.Redis, relay_connection: redis.Redis, burst: bool, threads: int):
        self.settings = settings
        self.connection = connection
        self.burst = burst
        self.threads = max(threads, 1)
        self.redis_outage, self.database_outage = Outage("Redis", log), Outage("database", log)
        self.relay = Relay(relay_connection, settings, self.redis_outage, self.database_outage)
        # RQ's threads only claim deliveries; their attempts run in the engine, many at once.
        self.engine = Engine(settings, connection, self.database_outage, Pool())
        self.stop = threading.Event()
        # First attempts before bursts' (jobs.queue.lanes), both before retries: RQ takes from the first queue that has a job.
        name = settings.webhook_queue
        self.queues = [jobs_queue.queue(connection, name), jobs_queue.bulk(connection, name)]
        self.queues.append(jobs_queue.retries(connection, name))
        self.scheduler_name = uuid.uuid4().hex
        self.helpers: list = []  # the helper threads' current RQ workers
        self.helper_threads: list = []

    def own_client(self) -> redis.Redis:
        """Return a Redis client with a pool of its own, for one RQ worker.

        RQ names a new worker's connection (CLIENT SETNAME), then looks for that name among Redis's clients to learn
        its address: through a pool shared with the other threads' workers, another's name can land on that
        connection in between, and RQ then warns that CLIENT LIST is not supported (seen on a busy machine).
        """
        return embedded_redis.connect(self.settings.redis_url)

    def thread_worker(self, first_only: bool = False) -> ThreadWorker:
        """Build an RQ worker for a helper thread (first_only: of the queue of first attempts alone)."""
        worker = ThreadWorker(self.queues[:1] if first_only else self.queues, connection=self.own_client())
        worker.database_outage, worker.engine = self.database_outage, self.engine
        return worker

    def main_worker(self) -> MainWorker:
        """Build the main thread's RQ worker, which starts the other threads once its scheduler has forked."""
        worker = MainWorker(self.queues, connection=self.own_client(), maintenance_interval=60)
        worker.ready, worker.stopping, worker.scheduler_name = self.start_threads, self.stop, self.scheduler_name
        worker.database_outage, worker.engine = self.database_outage, self.engine
        return worker

    def start_threads(self) -> None:
        """Start the engine, the relay and the helper threads' workers (once, after RQ's scheduler forked)."""
        if self.helper_threads or self.stop.is_set():
            return
        self.engine.start()
        if not self.burst:
            threading.Thread(target=self.relay.run, args=(self.stop,), name="relay", daemon=True).start()
        for number in range(self.threads - 1):
            # One helper serves first attempts alone: a bulk batch or a retry in every other thread's hands
            # never holds a webhook's new delivery back (bench/isolation.py).
            make = functools.partial(self.thread_worker, first_only=number == 0)
            args = (make, self.stop, self.burst, self.helpers, self.connection, self.redis_outage)
            thread = threading.Thread(target=_serve_jobs, args=args, name=f"delivery-{number + 1}", daemon=True)
            thread.start()
            self.helper_threads.append(thread)
        self.helper_threads.append(threading.current_thread())  # started: never again

    def shut_down(self) -> None:
        """Stop the helpers after the job in hand, then the engine: what waits in a line is handed back (burst: attempted)."""
        self.stop.set()
        for worker in list(self.helpers):
            worker.request_warm_stop()  # each finishes the job in hand
        # Wait for jobs in hand (their deadline is the webhook timeout), and a moment for idle helpers to
        # sign off from Redis; a helper stuck retrying a Redis that is gone dies with the process.
        started, timeout = time.monotonic(), self.settings.webhook_timeout
        others = [thread for thread in self.helper_threads if thread is not threading.current_thread()]
        while any(thread.is_alive() for thread in others):
            waited = time.monotonic() - started
            if waited > timeout + 5 or (waited > 1.5 and not any(w.busy for w in list(self.helpers))):
                break
            time.sleep(0.05)
        # Attempts in flight end within the deadline.
        self.engine.close(timeout + 1, drain=self.burst)


def run(
    settings: Settings, connection: redis.Redis, relay_connection: redis.Redis, burst: bool = False, threads: int = 1
) -> None:
    """Run the relay and `threads` delivery workers until SIGTERM/SIGINT (or, in burst mode, until idle)."""
    rq_log = logging.getLogger("rq.worker")
    rq_log.setLevel(logging.WARNING)
    rq_log.addFilter(_QUIET)
    models.bind(settings.database_url)
    process = DeliveryProcess(settings, connection, relay_connection, burst, threads)
    if burst:
        models.check_out()
        while process.relay.relay_pending():
            pass
        process.relay.rescue()
    try:
        _serve_jobs(process.main_worker, process.stop, burst, [], connection, process.redis_outage)
    finally:
        process.shut_down()


def _let_go(worker: DeliveryWorker, current: list[DeliveryWorker]) -> None:
    """Stop what RQ's teardown leaves running when Redis is gone: the pubsub thread and the scheduler."""
    with contextlib.suppress(ValueError):
        current.remove(worker)
    thread = worker.pubsub_thread
    if thread is not None and thread.is_alive():
        thread.stop()
    if worker.scheduler is not None:
        worker.stop_scheduler()


def _work_once(
    make_worker: Callable[[], DeliveryWorker], burst: bool, current: list[DeliveryWorker]
) -> tuple[DeliveryWorker | None, BaseException | None]:
    """Build an RQ worker and run it until it stops or loses Redis; return it (None if never built) and what ended it."""
    worker, error = None, None
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
    return worker, error


def _serve_jobs(
    make_worker: Callable[[], DeliveryWorker],
    stop: threading.Event,
    burst: bool,
    current: list[DeliveryWorker],
    connection: redis.Redis,
    outage: Outage,
) -> None:
    """Run RQ workers from make_worker until stop is set (or, in burst mode, the queue is empty), whatever Redis does."""
    pacing = Backoff()
    try:
        while not stop.is_set():
            started = time.monotonic()
            worker, error = _work_once(make_worker, burst, current)
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
