"""RQ's private internals that the delivery worker relies on, under public names, in this one module.

RQ 2 has no public hook for what jobs.runtime.worker needs: a worker in a helper thread that installs no
signal handlers, a scheduler of its own class, a warm stop asked for without a signal (or a Redis),
a lost Redis waited out quietly by the pubsub thread, a look at the scheduler's process, and a job
that is handed the worker's engine (EngineJob) rather than finding it in a module global.
tests/test_rq_internals.py pins each behaviour relied on here, so an RQ upgrade that changes one
fails there, in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from redis.client import PubSub, PubSubWorkerThread
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.scheduler import RQScheduler

__all__ = [
    "EngineJob",
    "HookedWorker",
    "engine_job",
    "forget_scheduler_process",
    "install_scheduler_signal_handlers",
    "scheduler_process",
    "scheduler_stop_requested",
]


F = TypeVar("F", bound=Callable[..., Any])
# The job functions marked by engine_job (functions, set once at import: no live object).
_TAKE_ENGINE: list[Callable[..., Any]] = []


def engine_job(func: F) -> F:
    """Mark a job function that takes the worker's engine as its `engine` keyword (see EngineJob)."""
    _TAKE_ENGINE.append(func)
    return func


class EngineJob(Job):
    """An RQ job that passes its worker's engine to a function marked by engine_job (the worker sets `engine`)."""

    engine: object | None = None

    def _execute(self) -> Any:
        if self.engine is not None and self.func in _TAKE_ENGINE:
            return self.func(*self.args, engine=self.engine, **self.kwargs)
        return super()._execute()


class HookedWorker(SimpleWorker):
    """SimpleWorker whose private hooks are overridden and read under public names."""

    # False in a helper thread: signal.signal() works only in the main thread.
    installs_signal_handlers = True
    job_class = EngineJob
    engine: object | None = None  # handed to every job this worker performs

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Hand the worker's engine to the job, then perform it as RQ does."""
        if isinstance(job, EngineJob):
            job.engine = self.engine
        return super().execute_job(job, queue)

    @property
    def stop_requested(self) -> bool:
        """Tell whether a warm stop was asked for: the work loop ends before it takes another job."""
        return self._stop_requested

    def request_warm_stop(self) -> None:
        """Ask the work loop to end once the job in hand is done, without a signal."""
        self._stop_requested = True

    @property
    def ordered_queues(self) -> list:
        """Return the queues in the order the next dequeue tries them."""
        return self._ordered_queues

    def start_scheduler(
        self, burst: bool, logging_level: str | None, date_format: str | None = None, log_format: str | None = None
    ) -> None:
        """Start RQ's scheduler, as work(with_scheduler=True) does; override to start another one."""
        formats = {"date_format": date_format, "log_format": log_format}
        super()._start_scheduler(burst, logging_level, **{name: value for name, value in formats.items() if value is not None})

    def pubsub_error(self, exc: Exception, pubsub: PubSub, pubsub_thread: PubSubWorkerThread) -> None:
        """Handle an error of the pubsub thread as RQ does: sleep on a lost connection, raise anything else."""
        super()._pubsub_exception_handler(exc, pubsub, pubsub_thread)

    # RQ's private hooks, routed to the public names above.

    def _install_signal_handlers(self) -> None:
        if self.installs_signal_handlers:
            super()._install_signal_handlers()

    def _start_scheduler(
        self,
        burst: bool = False,
        logging_level: str | None = "INFO",
        date_format: str | None = None,
        log_format: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.start_scheduler(burst, logging_level, date_format, log_format)

    def _pubsub_exception_handler(self, exc: Exception, pubsub: PubSub, pubsub_thread: PubSubWorkerThread) -> None:
        self.pubsub_error(exc, pubsub, pubsub_thread)


def scheduler_process(scheduler: RQScheduler) -> BaseProcess | None:
    """Return the process a scheduler's start() forked, or None if it has not forked one."""
    return scheduler._process


def forget_scheduler_process(scheduler: RQScheduler) -> None:
    """Forget a scheduler's dead process, so that its acquire_locks(auto_start=True) forks a new one."""
    scheduler._process = None


def scheduler_stop_requested(scheduler: RQScheduler) -> bool:
    """Tell whether a scheduler's request_stop() was called (on SIGTERM/SIGINT once its handlers are installed)."""
    return scheduler._stop_requested


def install_scheduler_signal_handlers(scheduler: RQScheduler) -> None:
    """Make SIGTERM/SIGINT call the scheduler's request_stop(), as RQScheduler.work() does first."""
    scheduler._install_signal_handlers()
