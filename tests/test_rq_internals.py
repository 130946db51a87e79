"""What jobs.rq_internals relies on in RQ's private internals: an RQ upgrade that changes one fails here."""

import signal
import threading
import time

import pytest
import redis
from rq import Queue
from rq.scheduler import RQScheduler
from rq.worker import WorkerStatus

from jobs.rq_internals import (
    EngineJob,
    HookedWorker,
    engine_job,
    forget_scheduler_process,
    install_scheduler_signal_handlers,
    scheduler_process,
    scheduler_stop_requested,
)


@pytest.fixture
def queue(redis_url, queue_name):
    """An empty RQ queue of this test alone."""
    return Queue(queue_name, connection=redis.Redis.from_url(redis_url))


@pytest.fixture
def signal_handlers():
    """Put back this process's SIGTERM/SIGINT handlers, which RQ replaces."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@engine_job
def engine_taker(value, engine=None):
    """A job function that takes its worker's engine."""
    return [value, engine]


def plain_job(value, engine="none given"):
    """A job function that does not."""
    return [value, engine]


def test_a_job_is_handed_its_workers_engine_only_if_its_function_takes_one(queue, signal_handlers):
    """EngineJob._execute passes job.engine (set by HookedWorker.execute_job) to a function marked engine_job."""
    marked, plain = queue.enqueue(engine_taker, 1), queue.enqueue(plain_job, 2)
    worker = HookedWorker([queue], connection=queue.connection)
    worker.engine = "the engine"
    assert worker.job_class is EngineJob
    assert worker.work(burst=True) is True
    results = [EngineJob.fetch(job.id, connection=queue.connection).return_value() for job in (marked, plain)]
    assert results == [[1, "the engine"], [2, "none given"]]


def _work_in_thread(worker) -> BaseException | None:
    """Run worker.work(burst=True) in a helper thread; return what it raised, if anything."""
    raised: list = []

    def work():
        try:
            worker.work(burst=True)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)
    return raised[0] if raised else None


def test_work_installs_signal_handlers_through_the_hook(queue):
    # signal.signal() fails outside the main thread: a helper thread's worker must be able to skip it.
    class Quiet(HookedWorker):
        installs_signal_handlers = False

    assert _work_in_thread(Quiet([queue], connection=queue.connection)) is None
    loud = HookedWorker([queue], connection=queue.connection)
    assert isinstance(_work_in_thread(loud), ValueError)
    loud.teardown()


def test_work_with_scheduler_starts_it_through_the_hook(queue):
    calls = []

    class Recording(HookedWorker):
        def start_scheduler(self, burst, logging_level, date_format=None, log_format=None):
            calls.append((burst, logging_level))
            super().start_scheduler(burst, logging_level, date_format, log_format)

    worker = Recording([queue], connection=queue.connection)
    worker.work(burst=True, with_scheduler=True, logging_level="WARNING")
    assert calls == [(True, "WARNING")]
    assert isinstance(worker.scheduler, RQScheduler)  # RQ's own, run in place in burst mode


def test_a_warm_stop_ends_the_work_loop_before_the_next_job(queue):
    queue.enqueue(time.time)
    worker = HookedWorker([queue], connection=queue.connection)
    assert not worker.stop_requested
    worker.request_warm_stop()
    assert worker.stop_requested
    assert worker.work(burst=True) is False
    assert queue.count == 1
    assert HookedWorker([queue], connection=queue.connection).work(burst=True) is True
    assert queue.count == 0


def test_request_stop_during_a_job_asks_for_a_warm_stop(queue, signal_handlers):
    worker = HookedWorker([queue], connection=queue.connection)
    worker.set_state(WorkerStatus.BUSY)
    worker.request_stop(signal.SIGTERM, None)
    assert worker.stop_requested


def test_ordered_queues_are_the_queues_dequeued_from_in_order(redis_url, queue_name):
    connection = redis.Redis.from_url(redis_url)
    queues = [Queue(queue_name, connection=connection), Queue(queue_name + "-retries", connection=connection)]
    worker = HookedWorker(queues, connection=connection)
    assert [q.name for q in worker.ordered_queues] == [queue_name, queue_name + "-retries"]


def test_the_pubsub_thread_reports_errors_through_the_hook(queue):
    seen = []

    class Recording(HookedWorker):
        def pubsub_error(self, exc, pubsub, pubsub_thread):
            seen.append(exc)

    worker = Recording([queue], connection=queue.connection)
    worker.subscribe()
    try:
        error = redis.ConnectionError("gone")
        worker.pubsub_thread.exception_handler(error, worker.pubsub, worker.pubsub_thread)
    finally:
        worker.unsubscribe()
    assert seen == [error]


def test_the_scheduler_process_is_the_one_start_forked_and_forgetting_it_lets_auto_start_fork_again(queue):
    scheduler = RQScheduler([queue], connection=queue.connection, interval=1)
    assert scheduler_process(scheduler) is None
    started = []
    try:
        started.append(scheduler.start())
        assert scheduler_process(scheduler) is started[0]
        started[0].kill()
        started[0].join(10)
        forget_scheduler_process(scheduler)
        assert scheduler_process(scheduler) is None
        scheduler.acquire_locks(auto_start=True)
        again = scheduler_process(scheduler)
        assert again is not None and again is not started[0] and again.is_alive()
        started.append(again)
    finally:
        for process in started:
            process.kill()
            process.join(10)
        scheduler.release_locks()


def test_the_scheduler_stops_on_sigterm_once_its_handlers_are_installed(queue, signal_handlers):
    scheduler = RQScheduler([queue], connection=queue.connection)
    install_scheduler_signal_handlers(scheduler)
    assert signal.getsignal(signal.SIGTERM) == scheduler.request_stop
    assert not scheduler_stop_requested(scheduler)
    scheduler.request_stop()
    assert scheduler_stop_requested(scheduler)
