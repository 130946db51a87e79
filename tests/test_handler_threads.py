"""api.handler_threads: reads go first, writes wait at most the write delay, calls behave as in a thread pool."""

import threading
import time
import types

import pytest

from api import handler_threads
from api.handler_threads import HandlerThreads
from toolkit.serving import wait_until


def environ(method: str, **headers) -> dict:
    return {"REQUEST_METHOD": method, **{f"HTTP_{name.upper()}": value for name, value in headers.items()}}


class _Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    """Give the pool's due times a clock the test moves: a busy machine's pauses between submits count for nothing."""
    moved = _Clock()
    monkeypatch.setattr(handler_threads, "time", types.SimpleNamespace(monotonic=moved))
    return moved


@pytest.fixture
def blocked(clock):
    """Yield (pool with one thread held busy, order list, record(name) call, release()) so calls queue up."""
    pool, order, gate = HandlerThreads(threads=1, write_delay=5.0), [], threading.Event()
    started = threading.Event()

    def hold(environ):
        started.set()
        gate.wait(60)

    first = pool.submit(hold, environ("POST"))
    assert started.wait(30)

    def record(environ):
        order.append(f"{environ['REQUEST_METHOD']} {environ.get('PATH_INFO', '')}".strip())

    yield pool, order, record, gate, first
    gate.set()
    pool.shutdown()


def test_a_read_overtakes_the_writes_queued_before_it(blocked):
    pool, order, record, gate, first = blocked
    futures = [pool.submit(record, environ(method)) for method in ("POST", "PATCH", "GET", "DELETE", "HEAD")]
    gate.set()
    for future in [first, *futures]:
        future.result(30)
    assert order == ["GET", "HEAD", "POST", "PATCH", "DELETE"]


def test_a_precognition_dry_run_counts_as_a_read(blocked):
    pool, order, record, gate, first = blocked
    futures = [pool.submit(record, {**environ("POST"), "PATH_INFO": "/real"}),
               pool.submit(record, {**environ("POST", precognition="true"), "PATH_INFO": "/dry"})]  # fmt: skip
    gate.set()
    for future in futures:
        future.result(30)
    assert order == ["POST /dry", "POST /real"]


def test_a_write_past_its_delay_goes_before_later_reads(clock):
    pool, order, gate, started = HandlerThreads(threads=1, write_delay=0.2), [], threading.Event(), threading.Event()
    try:
        pool.submit(lambda environ: (started.set(), gate.wait(60)), environ("GET"))
        assert started.wait(30)
        write = pool.submit(lambda environ: order.append("write"), environ("POST"))
        clock.now += 0.1
        within = pool.submit(lambda environ: order.append("read within"), environ("GET"))  # overtakes the write
        clock.now += 0.3  # the write is now due; reads arriving from here on come after it
        reads = [pool.submit(lambda environ: order.append("read"), environ("GET")) for _ in range(3)]
        gate.set()
        for future in [write, within, *reads]:
            future.result(30)
        assert order == ["read within", "write", "read", "read", "read"]
    finally:
        gate.set()
        pool.shutdown()


def test_no_delay_is_first_come_first_served():
    pool, order, gate, started = HandlerThreads(threads=1, write_delay=0.0), [], threading.Event(), threading.Event()
    try:
        pool.submit(lambda environ: (started.set(), gate.wait(60)), environ("GET"))
        assert started.wait(30)
        futures = [pool.submit(lambda environ, m=m: order.append(m), environ(m)) for m in ("POST", "GET", "DELETE", "GET")]
        gate.set()
        for future in futures:
            future.result(30)
        assert order == ["POST", "GET", "DELETE", "GET"]
    finally:
        gate.set()
        pool.shutdown()


def test_at_most_threads_calls_run_at_once_and_results_and_errors_reach_the_caller():
    pool, inside, most, lock = HandlerThreads(threads=3, write_delay=0.5), [0], [0], threading.Lock()
    full = threading.Event()

    def work(environ, n):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            if inside[0] == 3:
                full.set()
        # The first calls hold until three run at once: a busy machine may start the threads late, and a
        # short sleep would then let one finish before the third came in.
        full.wait(30)
        with lock:
            inside[0] -= 1
        if n == 7:
            raise ValueError("seven")
        return n * 2

    futures = [pool.submit(work, environ("GET" if n % 2 else "POST"), n) for n in range(12)]
    try:
        assert [f.result(60) for f in futures if f is not futures[7]] == [n * 2 for n in range(12) if n != 7]
        with pytest.raises(ValueError, match="seven"):
            futures[7].result(30)
        assert most[0] == 3
    finally:
        pool.shutdown()


def test_shutdown_runs_what_waits_then_refuses_new_calls(blocked):
    pool, order, record, gate, first = blocked
    waiting = pool.submit(record, environ("GET"))
    gate.set()
    pool.shutdown(wait=True)
    assert waiting.done() and order == ["GET"]
    with pytest.raises(RuntimeError):
        pool.submit(record, environ("GET"))


def test_at_most_half_the_threads_run_writes_so_a_read_always_finds_one():
    pool, gate, running = HandlerThreads(threads=4, write_delay=0.0), threading.Event(), []
    lock = threading.Lock()

    def write(environ):
        with lock:
            running.append("write")
        gate.wait(60)

    try:
        writes = [pool.submit(write, environ("POST")) for _ in range(4)]
        read = pool.submit(lambda environ: "read", environ("GET"))
        assert read.result(30) == "read"  # while every write that may run is still held
        assert wait_until(lambda: len(running) >= 2, timeout=30)
        time.sleep(0.2)  # no third write starts meanwhile (waiting longer would only be stricter)
        assert running == ["write", "write"]
        gate.set()
        for future in writes:
            future.result(30)
        assert running == ["write"] * 4
    finally:
        gate.set()
        pool.shutdown()


def test_the_thread_idle_last_takes_the_next_call():
    # Under light load the same threads serve, warm, and so do the database connections they keep
    # (models.keep_connection): the thread that went idle last is the first woken, not the one idle longest.
    pool = HandlerThreads(threads=3, write_delay=0.0)
    gates = [threading.Event() for _ in range(3)]
    ran_on: dict[str, str] = {}

    def job(_environ: dict, name: str, gate: threading.Event | None) -> None:
        ran_on[name] = threading.current_thread().name
        if gate is not None:
            gate.wait(30)

    try:
        futures = [pool.submit(job, environ("GET"), *args) for args in zip("abc", gates, strict=True)]
        assert wait_until(lambda: len(ran_on) == 3)
        for idle, (gate, future) in enumerate(zip(gates, futures, strict=True), start=1):
            gate.set()
            future.result(timeout=30)
            assert wait_until(lambda idle=idle: len(pool._sleepers) == idle)
        pool.submit(job, environ("GET"), "next", None).result(timeout=30)
        assert ran_on["next"] == ran_on["c"]
    finally:
        for gate in gates:
            gate.set()
        pool.shutdown()
