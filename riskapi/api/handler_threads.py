"""Which waiting request a free handler thread takes next: reads first, a write once it has waited long enough.

The handler threads of an API process are few (RISKAPI_THREADS: the GIL makes more of them slower), so
under load requests queue for them. First come, first served puts a page of a list behind bulk writes
that each cost several times more; here each request gets a due time instead, and the earliest due
goes first: a read (GET, HEAD, OPTIONS, or a Precognition dry run: a person waiting on a screen) is due
when it arrives, a write RISKAPI_WRITE_DELAY_MS later. A read therefore overtakes the writes that arrived
less than that before it, and no write waits behind reads that arrived after its due time: writes are
delayed by a bounded amount, never starved. With a delay of 0 it is first come, first served.

At most half the threads run writes at once: a thread is always left for reads, so a read does not
queue behind a run of overdue bulk writes that would otherwise take every thread (and the GIL).
"""

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["READS", "HandlerThreads"]

READS = frozenset({"GET", "HEAD", "OPTIONS"})


class HandlerThreads(Executor):
    """A thread pool running the earliest-due call first; a call's first argument is its WSGI environ."""

    def __init__(self, threads: int, write_delay: float):
        self.threads = threads
        self.write_delay = write_delay
        self.most_writes = max(1, threads // 2)
        self._reads: list = []  # heaps of (due, sequence, future, fn, args, kwargs)
        self._writes: list = []
        self._writing = 0
        self._sequence = itertools.count()  # first come, first served among equal due times
        self._ready = threading.Condition()
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
        with self._ready:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            read = self.is_read(environ)
            due = time.monotonic() + (0.0 if read else self.write_delay)
            heapq.heappush(self._reads if read else self._writes, (due, next(self._sequence), future, fn, args, kwargs))
            if len(self._started) < self.threads:
                self._start_thread()
            self._ready.notify()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more calls; run (or cancel) those waiting; with wait, join the threads."""
        with self._ready:
            self._closed = True
            if cancel_futures:
                for _due, _sequence, future, *_ in self._reads + self._writes:
                    future.cancel()
                self._reads.clear()
                self._writes.clear()
            self._ready.notify_all()
        if wait:
            for thread in self._started:
                thread.join()

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._work, name=f"handler-{len(self._started) + 1}", daemon=True)
        self._started.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            with self._ready:
                while (heap := self._next()) is None and not (self._closed and not self._reads and not self._writes):
                    self._ready.wait()
                if heap is None:
                    return
                _, _, future, fn, args, kwargs = heapq.heappop(heap)
                writing = heap is self._writes
                self._writing += writing
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args, **kwargs)
                    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request, as ThreadPoolExecutor does
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                if writing:
                    with self._ready:
                        self._writing -= 1
                        self._ready.notify()  # a write may be waiting for this turn

    def _next(self) -> list | None:
        """Return the heap whose first call goes next (the earliest due a thread may take now), or None."""
        writes = self._writes if self._writes and self._writing < self.most_writes else None
        if self._reads and (writes is None or self._reads[0] < writes[0]):
            return self._reads
        return writes
