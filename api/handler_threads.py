"""Which waiting request a free handler thread takes next: first come, first served, at most half of them writing.

The handler threads of an API process are few (RISKAPI_THREADS, 8: the GIL makes many more of them slower), so
under load requests queue for them, in the order they came. With closed-loop clients the mean wait is
clients / throughput whatever the order (Little's law): holding writes back only moves latency from
reads to writes. At most half the threads run writes at once: a thread is always left for reads, so a
read does not queue behind a run of bulk writes that would otherwise take every thread (and the GIL).

RISKAPI_WRITE_DELAY_MS (default 0) may give reads a head start: a read (GET, HEAD, OPTIONS, or a
Precognition dry run) is due when it arrives, a write that much later, and the earliest due goes first;
a write is then overtaken by the reads that arrive within its delay, never starved.
"""

import functools
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["READS", "HandlerThreads"]

log = logging.getLogger("riskapi")

READS = frozenset({"GET", "HEAD", "OPTIONS"})


class HandlerThreads(Executor):
    """A thread pool running the earliest-due call first; a call's first argument is its WSGI environ."""

    def __init__(self, threads: int, write_delay: float):
        self.threads = threads
        self.write_delay = write_delay
        self.most_writes = max(1, threads // 2)
        self._reads: list = []  # heaps of (due, sequence, job, its Future or None)
        self._writes: list = []
        self._writing = 0
        self._sequence = itertools.count()  # first come, first served among equal due times
        # A plain lock, and a lock of its own for each idle thread to wait on (all in C): a threading.Condition costs a
        # request more in Python. The thread idle last is woken first: under light load the same few threads (and
        # the database connections they keep, models.keep_connection) serve, warm, instead of all in turn.
        self._lock = threading.Lock()
        self._sleepers: list[threading.Lock] = []  # the idle threads' locks, held until they are to wake
        self._started: list[threading.Thread] = []
        self._closed = False

    @staticmethod
    def is_read(environ: dict) -> bool:
        """Tell whether a request only reads: a read method, or a Precognition dry run."""
        return environ.get("REQUEST_METHOD") in READS or environ.get("HTTP_PRECOGNITION", "").lower() == "true"

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Queue fn(*args, **kwargs) at its request's due time; return its Future."""
        environ = args[0] if args and isinstance(args[0], dict) else {}
        future: Future = Future()
        self._queue(self.is_read(environ), functools.partial(fn, *args, **kwargs), future)
        return future

    def start(self, read: bool, job: Callable[[], None]) -> None:
        """Queue job() at its request's due time; the job hands its own outcome on (api.flask_bridge)."""
        self._queue(read, job, None)

    def _queue(self, read: bool, job: Callable[[], Any], future: Future | None) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            due = time.monotonic() + (0.0 if read else self.write_delay)
            heapq.heappush(self._reads if read else self._writes, (due, next(self._sequence), job, future))
            if len(self._started) < self.threads:
                self._start_thread()
                return
            sleeper = self._sleepers.pop() if self._sleepers else None
        if sleeper is not None:
            sleeper.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more calls; run (or cancel) those waiting; with wait, join the threads."""
        with self._lock:
            self._closed = True
            if cancel_futures:
                for _due, _sequence, _job, future in self._reads + self._writes:
                    if future is not None:
                        future.cancel()
                self._reads.clear()
                self._writes.clear()
            sleepers, self._sleepers = self._sleepers, []
        for sleeper in sleepers:
            sleeper.release()
        if wait:
            for thread in self._started:
                thread.join()

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._work, name=f"handler-{len(self._started) + 1}", daemon=True)
        self._started.append(thread)
        thread.start()

    def _work(self) -> None:
        wake = threading.Lock()
        wake.acquire()
        while True:
            with self._lock:
                heap = self._next()
                if heap is None:
                    if self._closed and not self._reads and not self._writes:
                        return
                    self._sleepers.append(wake)
                else:
                    _, _, job, future = heapq.heappop(heap)
                    writing = heap is self._writes
                    self._writing += writing
            if heap is None:
                # A wake-up given after this thread listed itself idle is never lost: its lock is released by then.
                wake.acquire()
                continue
            try:
                if future is None:
                    _run(job)
                elif future.set_running_or_notify_cancel():
                    try:
                        result = job()
                    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request, as ThreadPoolExecutor does
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                if writing:
                    # This thread looks for the next call itself, a write held back by the cap included.
                    with self._lock:
                        self._writing -= 1

    def _next(self) -> list | None:
        """Return the heap whose first call goes next (the earliest due a thread may take now), or None."""
        writes = self._writes if self._writes and self._writing < self.most_writes else None
        if self._reads and (writes is None or self._reads[0] < writes[0]):
            return self._reads
        return writes


def _run(job: Callable[[], None]) -> None:
    try:
        job()
    except Exception:  # a job answers its request itself; one that fails to must not take its thread down
        log.exception("a handler thread's job failed")
