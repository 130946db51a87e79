"""The soak's webhook receiver in a process of its own, and the tally of what it got against what was due."""

import collections
import contextlib
import hashlib
import hmac
import json
import multiprocessing
import signal
import tempfile
import time
from pathlib import Path
from queue import Empty
from typing import NamedTuple

import psutil

from toolkit.receiver import Receiver


class Delivery(NamedTuple):
    """What tally needs of one request the receiver got: three headers, the body, and when (time.monotonic())."""

    hook: str | None
    signature: str
    delivery: str | None
    body: bytes
    at: float


def _receive(records, control, stop, count: int) -> None:
    """The receiver process: count receivers answer 200 to every request, each put on records as a Delivery's fields.

    control gets (urls, CA bundle path) once serving, and the number of TLS connections accepted once stop is set."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides when to stop.

    def record(request) -> int:
        headers = request.headers
        fields = headers.get("service-webhook"), headers.get("service-signature", ""), headers.get("service-delivery")
        records.put((*fields, request.body, request.at))  # Monotonic clocks are system-wide: the parent compares.
        return 200

    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory(prefix="soak-cas-") as cas:
        receivers = [stack.enter_context(Receiver(keep_alive=True)) for _ in range(count)]
        bundle = Path(cas) / "cas.pem"  # Each receiver has a CA of its own: the service trusts them all.
        bundle.write_text("".join(Path(r.ca_path).read_text() for r in receivers))
        for receiver in receivers:
            receiver.responses = record
        control.put(([r.url for r in receivers], str(bundle)))
        stop.wait()
        control.put(sum(r.connections for r in receivers))


class Receiving:
    """count of toolkit/receiver.py's Receiver(keep_alive=True), each on a port of its own, in a process of their own:
    their TLS handshakes then use neither the load's GIL nor its CPU time. `requests` holds the Deliveries drained
    from its queue so far."""

    def __init__(self, count: int = 1):
        context = multiprocessing.get_context("spawn")  # No copy of the parent's threads or loop.
        self._records, self._control, self._stop = context.Queue(), context.Queue(), context.Event()
        self._process = context.Process(target=_receive, args=(self._records, self._control, self._stop, count),
                                        name="soak-receiver", daemon=True)  # fmt: skip
        self.requests: list[Delivery] = []
        self.connections: int | None = None

    def __enter__(self) -> "Receiving":
        self._process.start()
        try:
            self.urls, self.ca_path = self._get(self._control, 60.0)
        except BaseException:
            self.close()
            raise
        self.pid = self._process.pid
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _get(self, source, timeout: float):
        """Return the next item of source; fail if the receiver process dies or nothing comes within timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return source.get(timeout=0.2)
            except Empty:
                if not self._process.is_alive():
                    raise RuntimeError(f"the receiver process exited with {self._process.exitcode}") from None
        raise RuntimeError(f"the receiver process said nothing within {timeout:g} s")

    def wait_for(self, n: int, timeout: float = 0.0) -> bool:
        """Drain what has arrived; wait up to timeout until at least n requests are in. Return whether they are."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                while True:
                    self.requests.append(Delivery(*self._records.get_nowait()))
            except Empty:
                pass
            if len(self.requests) >= n or (left := deadline - time.monotonic()) <= 0:
                return len(self.requests) >= n
            try:
                self.requests.append(Delivery(*self._records.get(timeout=left)))
            except Empty:
                pass

    def cpu_seconds(self) -> float:
        """Return the CPU time (user + system, every thread) the receiver process used so far."""
        times = psutil.Process(self.pid).cpu_times()
        return times.user + times.system

    def close(self) -> None:
        """Stop the receiver, learn how many connections it accepted, and join it (kill it if it will not go)."""
        if self._stop.is_set():
            return
        self._stop.set()
        with contextlib.suppress(RuntimeError):
            if self._process.pid is not None:
                self.connections = self._get(self._control, 10.0)
        # A process that put items on a queue exits only once they are read: keep draining while it stops.
        deadline = time.monotonic() + 10.0
        while self._process.is_alive() and time.monotonic() < deadline:
            self.wait_for(0)
            self._process.join(0.1)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5.0)
        self.wait_for(0)
        for channel in (self._records, self._control):
            channel.close()


def tally(receiver: Receiving, tenants: list, expected: collections.Counter) -> dict:
    """Match what arrived against what is due: by delivery id (duplicates) and by (webhook, event, driver)."""
    secrets = {t.webhook: t.secret.encode() for t in tenants}
    seen, got, bad, duplicated = set(), collections.Counter(), 0, 0
    for request in receiver.requests:
        hook, signature = request.hook, request.signature
        digest = hmac.new(secrets.get(hook, b""), request.body, hashlib.sha256).hexdigest()
        bad += hook not in secrets or not hmac.compare_digest(digest, signature)
        delivery = request.delivery
        if delivery in seen:
            duplicated += 1
            continue
        seen.add(delivery)
        event = json.loads(request.body)
        got[(hook, event["event"], event["data"]["uuid"])] += 1
    return {"received": len(seen), "duplicated": duplicated, "bad": bad, "lost": expected - got, "unexpected": got - expected}
