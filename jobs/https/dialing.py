"""Dialing a receiver: resolve within the deadline, refuse internal addresses, open a verified TLS connection.

Webhook URLs are user-supplied, so the far end may be an attacker: every resolved address must be a
public unicast one (unless the operator allows private ones: RISKAPI_WEBHOOK_ALLOW_PRIVATE), the connection is pinned to the
address checked (no DNS rebinding between check and connect), and one total `Deadline` shuts the
socket down when spent, so a slow-dripping receiver cannot hold an attempt past it.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import ipaddress
import itertools
import socket
import ssl
import threading
import time

__all__ = ["Deadline", "Refused", "Watchdog", "is_allowed_address", "open_tls"]

_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class Refused(Exception):
    """Raised when a delivery is rejected before or during the exchange."""


class Deadline:
    """Total time budget that can forcibly unblock the socket when spent.

    With a Watchdog, that one thread fires it; without one, a timer thread of its own does (a thread
    started and stopped per attempt: about a tenth of a busy worker's CPU, so the engine passes its Watchdog).
    """

    def __init__(self, timeout: float, watchdog: Watchdog | None = None) -> None:
        self.timeout = timeout
        self.expires = time.monotonic() + timeout
        self.fired = False
        self.cancelled = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        if watchdog is not None:
            watchdog.watch(self)
        else:
            self._timer = threading.Timer(timeout, self.fire)
            self._timer.daemon = True
            self._timer.start()

    def remaining(self) -> float:
        """Return seconds left, raising TimeoutError if none are."""
        left = self.expires - time.monotonic()
        if left <= 0 or self.fired:
            raise TimeoutError
        return left

    def guard(self, sock: socket.socket | None) -> None:
        """Make sock the socket to shut down when the deadline passes."""
        with self._lock:
            self._sock = sock
            if sock is not None:
                sock.settimeout(self.remaining())

    def cancel(self) -> None:
        """Stop the timer so it cannot touch a socket we are done with."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self.cancelled = True
            self._sock = None

    def fire(self) -> None:
        """Spend the deadline now: shut its socket down (the timer or the watchdog calls this when time is up)."""
        # Per-call socket timeouts restart on every byte, so a trickling
        # receiver would never trip them; shutting the socket down makes the
        # blocked read in the worker thread return immediately.
        with self._lock:
            if self.cancelled:
                return
            self.fired = True
            if self._sock is not None:
                # The base-class shutdown touches only the fd, not the SSL
                # object the worker thread is using; ENOTCONN is harmless.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(self._sock, socket.SHUT_RDWR)


class Watchdog:
    """One thread that fires every Deadline handed to it when its time is up, for all of a process's attempts.

    Deadlines wait in a heap by expiry; a cancelled one is dropped when it reaches the top. The thread
    starts with the first deadline (and again in a forked child, which inherits no threads).
    """

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: Deadline) -> None:
        """Fire deadline at its expiry unless it is cancelled first."""
        with self._wake:
            heapq.heappush(self._heap, (deadline.expires, next(self._order), deadline))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="riskapi-deadlines", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is deadline:  # sooner than what the thread sleeps towards
                self._wake.notify()

    def pending(self) -> int:
        """Return how many deadlines wait in the heap, cancelled ones not yet dropped included."""
        with self._wake:
            return len(self._heap)

    def _run(self) -> None:
        with self._wake:
            while True:
                heap = self._heap
                while heap and heap[0][2].cancelled:
                    heapq.heappop(heap)
                if not heap:
                    self._wake.wait()
                    continue
                delay = heap[0][0] - time.monotonic()
                if delay > 0:
                    self._wake.wait(delay)
                    continue
                heapq.heappop(heap)[2].fire()


def is_allowed_address(address: str) -> bool:
    """Return True if address is a public unicast IP we may deliver to."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    # Addresses that embed an IPv4 address route to it, so judge that one.
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is not None:
            return is_allowed_address(str(embedded))
    return not (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or ip in _CGNAT
    )


@functools.lru_cache(maxsize=8)
def tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """Return a verifying client context trusting the system CAs plus ca_bundle."""
    # Loading the system trust store costs milliseconds; contexts are
    # thread-safe, so build each one once per process.
    context = ssl.create_default_context()
    if ca_bundle is not None:
        context.load_verify_locations(ca_bundle)
    return context


def resolve(host: str, port: int, deadline: Deadline) -> list[tuple]:
    """Return getaddrinfo results for host, giving up at the deadline."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    # getaddrinfo has no timeout knob, so run it aside and stop waiting at
    # the deadline; the abandoned daemon thread finishes on its own.
    box: list = []

    def lookup() -> None:
        try:
            box.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            box.append(exc)

    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(deadline.remaining())
    if not box:
        raise TimeoutError
    if isinstance(box[0], OSError):
        reason = box[0].strerror or box[0]
        raise Refused(f"DNS lookup for {host} failed: {reason}")
    return box[0]


def connect(addresses: list[tuple], host: str, context: ssl.SSLContext, deadline: Deadline) -> ssl.SSLSocket:
    """Open a verified TLS connection to the first reachable checked address."""
    last_error: OSError | None = None
    for family, type_, proto, _, sockaddr in addresses:
        sock = socket.socket(family, type_, proto)
        try:
            # http.client writes a request's head and body apart: with Nagle's algorithm the body waited for
            # the receiver's delayed ACK, some 40 ms a delivery on a kept connection (docs/capacity.md).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            deadline.guard(sock)
            sock.connect(sockaddr)
            # Wrapping detaches sock's fd, so from here on only the TLS
            # socket owns (and must close) the connection.
            sock = context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
            deadline.guard(sock)
            sock.do_handshake()
            return sock
        except OSError as exc:
            sock.close()
            # TLS failures and an exhausted budget would only repeat on the
            # next address; refused connections are worth another try.
            if isinstance(exc, (ssl.SSLError, TimeoutError)) or deadline.fired:
                raise
            last_error = exc
    raise last_error or OSError("no usable address")


def open_tls(host: str, port: int, deadline: Deadline, *, allow_private: bool, ca_bundle: str | None) -> ssl.SSLSocket:
    """Resolve host, refuse internal addresses unless allowed, and open a verified TLS connection."""
    context = tls_context(ca_bundle)
    addresses = resolve(host, port, deadline)
    if not allow_private:
        refuse_internal(addresses)
    return connect(addresses, host, context, deadline)


def refuse_internal(addresses: list[tuple]) -> None:
    """Refuse the delivery if any resolved address is not a public unicast one."""
    # Every address is checked, not just the first: connect may fall back to any of them.
    for *_, sockaddr in addresses:
        if not is_allowed_address(sockaddr[0]):
            raise Refused(f"destination address {sockaddr[0]} is not allowed")
