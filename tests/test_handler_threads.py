"""riskapi.api.handler_threads: reads go first, writes wait at most the write delay, calls behave as in a thread pool."""

import threading
import time

import pytest

from riskapi.api.handler_threads import HandlerThreads


def environ(method: str, **headers) -> dict:
    return {"REQUEST_METHOD": method, **{f"HTTP_{name.upper()}": value for name, value in headers.items()}}


@pytest.fixture
def blocked():
    """Yield (pool with one thread held busy, order list, record(name) call, release()) so calls queue up."""
    pool, order, gate = HandlerThreads(threads=1, write_delay=5.0), [], threading.Event()
    started = threading.Event()

    def hold(environ):
        started.set()
        gate.wait(10)

    first = pool.submit(hold, environ("POST"))
    assert started.wait(5)

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
        future.result(5)
    assert order == ["GET", "HEAD", "POST", "PATCH", "DELETE"]


def test_a_precognition_dry_run_counts_as_a_read(blocked):
    pool, order, record, gate, first = blocked
    futures = [pool.submit(record, {**environ("POST"), "PATH_INFO": "/real"}),
               pool.submit(record, {**environ("POST", precognition="true"), "PATH_INFO": "/dry"})]  # fmt: skip
    gate.set()
    for future in futures:
        future.result(5)
    assert order == ["POST /dry", "POST /real"]


def test_a_write_past_its_delay_goes_before_later_reads():
    pool, order, gate, started = HandlerThreads(threads=1, write_delay=0.2), [], threading.Event(), threading.Event()
    try:
        pool.submit(lambda environ: (started.set(), gate.wait(10)), environ("GET"))
        assert started.wait(5)
        write = pool.submit(lambda environ: order.append("write"), environ("POST"))
        time.sleep(0.4)  # the write is now due; reads arriving from here on come after it
        reads = [pool.submit(lambda environ: order.append("read"), environ("GET")) for _ in range(3)]
        gate.set()
        for future in [write, *reads]:
            future.result(5)
        assert order == ["write", "read", "read", "read"]
    finally:
        gate.set()
        pool.shutdown()


def test_no_delay_is_first_come_first_served():
    pool, order, gate, started = HandlerThreads(threads=1, write_delay=0.0), [], threading.Event(), threading.Event()
    try:
        pool.submit(lambda environ: (started.set(), gate.wait(10)), environ("GET"))
        assert started.wait(5)
        futures = [pool.submit(lambda environ, m=m: order.append(m), environ(m)) for m in ("POST", "GET", "DELETE", "GET")]
        gate.set()
        for future in futures:
            future.result(5)
        assert order == ["POST", "GET", "DELETE", "GET"]
    finally:
        gate.set()
        pool.shutdown()


def test_at_most_threads_calls_run_at_once_and_results_and_errors_reach_the_caller():
    pool, inside, most, lock = HandlerThreads(threads=3, write_delay=0.5), [0], [0], threading.Lock()

    def work(environ, n):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.02)
        with lock:
            inside[0] -= 1
        if n == 7:
            raise ValueError("seven")
        return n * 2

    futures = [pool.submit(work, environ("GET" if n % 2 else "POST"), n) for n in range(12)]
    try:
        assert [f.result(5) for f in futures if f is not futures[7]] == [n * 2 for n in range(12) if n != 7]
        with pytest.raises(ValueError, match="seven"):
            futures[7].result(5)
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
        gate.wait(10)

    try:
        writes = [pool.submit(write, environ("POST")) for _ in range(4)]
        read = pool.submit(lambda environ: "read", environ("GET"))
        assert read.result(5) == "read"  # while every write that may run is still held
        time.sleep(0.2)
        assert running == ["write", "write"]
        gate.set()
        for future in writes:
            future.result(5)
        assert running == ["write"] * 4
    finally:
        gate.set()
        pool.shutdown()
