"""Kept-alive TLS connections to webhook receivers, reused by later attempts of the same process.

A TLS handshake costs both ends more CPU than the delivery it carries, and a busy webhook gets
hundreds of attempts a second, so an attempt takes an idle connection to the same receiver when
there is one. The key holds everything that decided how the connection was opened: host, port,
trusted CAs and whether private addresses were allowed; the address it reached passed the same
SSRF check a new connection would. A connection is reused only while it is young enough
(LIFETIME, so a changed DNS record is followed within a minute), has been idle briefly (IDLE: less
than the 5 s idle timeout of common servers, so the receiver is unlikely to be closing it just
then) and has nothing to read: a receiver that closed it or sent something unasked loses it.

A worker process has one Pool (built by jobs.runtime.worker, held by its engine) handed to every attempt.
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import ssl
import threading
import time
from typing import NamedTuple

__all__ = ["IDLE", "LIFETIME", "Key", "Pool"]

IDLE = 4.0
LIFETIME = 60.0
# Idle connections kept per receiver. One receiver may serve many webhooks (an integration platform),
# each with several attempts in flight: with 8 kept, 10 busy webhooks on one receiver opened a TLS
# connection every 5 deliveries (bench/README.md, soak). Never more are idle than were open at once,
# and the engine's in-flight cap (RISKAPI_WEBHOOK_IN_FLIGHT, 256) bounds that, so a larger bound costs no sockets.
PER_KEY = 64
KEYS = 256  # receivers remembered; the least recently used is forgotten first


class Key(NamedTuple):
    """What a connection was opened for: only an attempt with the same key may use it."""

    host: str
    port: int
    ca_bundle: str | None
    allow_private: bool


class _Idle(NamedTuple):
    sock: ssl.SSLSocket
    opened: float
    since: float


class Pool:
    """Idle connections by Key, safe to share between the threads of one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: collections.OrderedDict[Key, list[_Idle]] = collections.OrderedDict()
        self._pid = os.getpid()

    def take(self, key: Key) -> tuple[ssl.SSLSocket, float] | None:
        """Return an idle connection for key and when it was opened, or None."""
        stale = []
        try:
            with self._lock:
                self._forget_after_fork()
                idle = self._idle.get(key, [])
                now = time.monotonic()
                while idle:
                    entry = idle.pop()  # the most recently used is the likeliest to be alive
                    if now - entry.since < IDLE and now - entry.opened < LIFETIME and _quiet(entry.sock):
                        return entry.sock, entry.opened
                    stale.append(entry.sock)
                return None
        finally:
            for sock in stale:
                _close(sock)

    def give(self, key: Key, sock: ssl.SSLSocket, opened: float) -> None:
        """Keep sock for the next attempt with key, or close it if enough are kept already."""
        closing = []
        with self._lock:
            self._forget_after_fork()
            idle = self._idle.setdefault(key, [])
            self._idle.move_to_end(key)
            if len(idle) < PER_KEY:
                idle.append(_Idle(sock, opened, time.monotonic()))
            else:
                closing.append(sock)
            while len(self._idle) > KEYS:
                closing += [entry.sock for entry in self._idle.popitem(last=False)[1]]
        for extra in closing:
            _close(extra)

    def clear(self) -> None:
        """Close every idle connection."""
        with self._lock:
            entries = [entry for idle in self._idle.values() for entry in idle]
            self._idle.clear()
        for entry in entries:
            _close(entry.sock)

    def _forget_after_fork(self) -> None:
        # A forked child shares the parent's sockets: using one would interleave two processes'
        # bytes on one TLS stream, so the child starts with none (and leaves the parent's open).
        if self._pid != os.getpid():
            self._idle, self._pid = collections.OrderedDict(), os.getpid()


def _quiet(sock: ssl.SSLSocket) -> bool:
    """Return True if nothing (data, EOF, an error) is waiting on sock: the receiver still holds it open."""
    try:
        if isinstance(sock, ssl.SSLSocket) and sock.pending():  # decrypted bytes the kernel no longer shows
            return False
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _close(sock: ssl.SSLSocket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
