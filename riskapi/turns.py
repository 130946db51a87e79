"""Which waiting request a free handler thread takes next: reads first, a write once it has waited long enough.

The handler threads of an API process are few (RISKAPI_THREADS: the GIL makes more of them slower), so
under load requests queue for them. First come, first served puts a page of a list behind bulk writes
that each cost several times more; here each request gets a due time instead, and the earliest due
goes first: a read (GET, HEAD, OPTIONS, or a Precognition dry run: a person waiting on a screen) is due
when it arrives, a write RISKAPI_WRITE_DELAY_MS later. A read therefore overtakes the writes that arrived
less than that before it, and no write waits behind reads that arrived after its due time: writes are
delayed by a bounded amount, never starved. With a delay of 0 it is first come, first served.
"""

import heapq
import itertools
import threading
import time
from concurrent.futures import Executor, Future

__all__ = ["READS", "Turns"]

READS = frozenset({"GET", "HEAD", "OPTIONS"})


class Turns(Executor):
    """A thread pool running the earliest-due call first; a call's first argument is its WSGI environ."""

    def __init__(self, threads: int, write_delay: float):
        self.threads = threads
        self.write_delay = write_delay
        self._waiting: list = []  # heap of (due, sequence, future, fn, args, kwargs)
        self._sequence = itertools.count()  # first come, first served among equal due times
        self._ready = threading.Condition()
        self._started: list[threading.Thread] = []
        self._closed = False

    def due(self, environ: dict) -> float:
        """Return when a request is due: now for a read or a dry run, write_delay later for a write."""
        now = time.monotonic()
        if environ.get("REQUEST_METHOD") in READS or environ.get("HTTP_PRECOGNITION", "").lower() == "true":
            return now
        return now + self.write_delay

    def submit(self, fn, /, *args, **kwargs) -> Future:
        """Queue fn(*args, **kwargs) at its request's due time; return its Future."""
        environ = args[0] if args and isinstance(args[0], dict) else {}
        future: Future = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            heapq.heappush(self._waiting, (self.due(environ), next(self._sequence), future, fn, args, kwargs))
            if len(self._started) < self.threads:
                self._start_thread()
            self._ready.notify()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more calls; run (or cancel) those waiting; with wait, join the threads."""
        with self._ready:
            self._closed = True
            if cancel_futures:
                for *_, future, _fn, _args, _kwargs in self._waiting:
                    future.cancel()
                self._waiting.clear()
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
                while not self._waiting and not self._closed:
                    self._ready.wait()
                if not self._waiting:
                    return
                _, _, future, fn, args, kwargs = heapq.heappop(self._waiting)
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request, as ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)
