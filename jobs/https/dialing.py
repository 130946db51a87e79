"""Dialing a receiver: resolve within the deadline, refuse internal addresses, open a verified TLS connection.

Webhook URLs are user-supplied, so the far end may be an attacker: every resolved address must be a
public unicast one (unless private addresses are allowed, in tests), the connection is pinned to the
address checked (no DNS rebinding between check and connect), and one total `Deadline` shuts the
socket down when spent, so a slow-dripping receiver cannot hold an attempt past it.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import socket
import ssl
import threading
import time

__all__ = ["Deadline", "Refused", "is_allowed_address", "open_tls"]

_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class Refused(Exception):
    """Raised when a delivery is rejected before or during the exchange."""


class Deadline:
    """Total time budget that can forcibly unblock the socket when spent."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.expires = time.monotonic() + timeout
        self.fired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout, self._fire)
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
        self._timer.cancel()
        with self._lock:
            self._sock = None

    def _fire(self) -> None:
        # Per-call socket timeouts restart on every byte, so a trickling
        # receiver would never trip them; shutting the socket down makes the
        # blocked read in the worker thread return immediately.
        with self._lock:
            self.fired = True
            if self._sock is not None:
                # The base-class shutdown touches only the fd, not the SSL
                # object the worker thread is using; ENOTCONN is harmless.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(self._sock, socket.SHUT_RDWR)


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
