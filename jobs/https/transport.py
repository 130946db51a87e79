"""HTTPS POST for webhook delivery, hardened against hostile receivers.

Webhook URLs are user-supplied, so this module assumes the far end may be
an attacker: it dials only public addresses, pinned to the address checked,
within one total deadline (jobs.https.dialing), never follows redirects and caps
how much it reads, so a slow-dripping receiver cannot hold a worker hostage.
A connection the receiver keeps open is kept for the next attempt to it, in
the pool passed in (jobs.https.connections).
"""

from __future__ import annotations

import email.utils
import http.client
import ssl
import time
import urllib.parse
from dataclasses import dataclass

from jobs.https import connections, dialing
from jobs.https.dialing import is_allowed_address
from webhooks.urls import normalise

__all__ = ["MAX_RESPONSE_BYTES", "Answer", "Result", "is_allowed_address", "post", "prepare"]

# Of a receiver's body, this much is kept for the attempt log; one byte more is read, to tell it was cut.
MAX_RESPONSE_BYTES = 16 * 1024

# Framing is ours to decide; letting callers override these would let them
# desynchronise the request or the connection kept for the next attempt.
_OWNED_HEADERS = frozenset({"content-length", "connection", "transfer-encoding"})


@dataclass(frozen=True, slots=True)
class Answer:
    """What a receiver answered besides its status: its headers and the first MAX_RESPONSE_BYTES of its body, as text."""

    headers: dict[str, str]
    body: str
    truncated: bool


@dataclass(frozen=True, slots=True)
class Result:
    """Outcome of one delivery attempt."""

    status: int | None
    error: str | None
    duration_ms: int
    # Seconds a 429 or 503 asked us to wait (its Retry-After, in seconds or as an HTTP date); None otherwise.
    retry_after: float | None = None
    # Every header as it went (Host and Content-Length included); None when nothing was sent.
    request_headers: dict[str, str] | None = None
    # None when there was no complete answer (then `error` says why).
    response: Answer | None = None

    @property
    def ok(self) -> bool:
        """Return True if the receiver answered with a 2xx status."""
        return self.status is not None and 200 <= self.status < 300


class _PinnedConnection(http.client.HTTPConnection):
    """HTTP connection over a TLS socket we opened and verified ourselves."""

    default_port = 443  # keeps the Host header free of a redundant ":443"

    def connect(self) -> None:
        """Refuse to open a second connection behind our back."""
        raise http.client.HTTPException("connection already closed")


def prepare(url: str) -> tuple[str, int, str]:
    """Return the ASCII host, port and request target of an https URL, or refuse it."""
    # The subscription check judged normalise(url), so deliver exactly that:
    # an IDNA host and a percent-encoded path that http.client can send.
    try:
        parts = urllib.parse.urlsplit(normalise(url))
        port = parts.port or 443
    except ValueError as exc:
        raise dialing.Refused(f"invalid URL: {exc}") from None
    if parts.scheme != "https":
        raise dialing.Refused("only https:// URLs are allowed")
    if parts.username is not None or parts.password is not None:
        raise dialing.Refused("URL must not contain credentials")
    if not parts.hostname:
        raise dialing.Refused("URL has no host")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, port, target


def post(
    url: str,
    body: bytes,
    headers: dict,
    *,
    timeout: float = 5.0,
    allow_private: bool = False,
    ca_bundle: str | None = None,
    pool: connections.Pool | None = None,
    watchdog: dialing.Watchdog | None = None,
) -> Result:
    """POST body to an https URL within timeout seconds and report the outcome; keep the connection in pool if given.

    The watchdog, if given, enforces the deadline (one thread for every attempt of the process); else a timer of its own.
    """
    _check_arguments(body, timeout)
    started = time.monotonic()
    deadline = dialing.Deadline(timeout, watchdog)
    status = error = retry_after = None
    tls = response = sent = answer = None
    keep = False
    try:
        host, port, target = prepare(url)
        key = connections.Key(host, port, ca_bundle, allow_private)
        sent = _as_sent(host, port, body, headers)
        tls, opened, response = _exchange(pool, key, target, body, headers, deadline)
        complete, content = _drain(response, tls, deadline)
        answer = _answer(response, content)
        status = response.status
        if status in PUSHBACK:
            retry_after = parse_retry_after(response.getheader("Retry-After"))
        keep = complete and not response.will_close
    except dialing.Refused as exc:
        error = str(exc)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        error = _describe(exc, deadline)
    finally:
        deadline.cancel()
        if response is not None:
            response.close()
        if tls is not None:
            if keep and pool is not None and not deadline.fired:
                pool.give(key, tls, opened)
            else:
                tls.close()
    return Result(status, error, round((time.monotonic() - started) * 1000), retry_after, sent, answer)


def _as_sent(host: str, port: int, body: bytes, headers: dict) -> dict[str, str]:
    """Return the request's headers as _send writes them: Host (unless given), the caller's, then Content-Length."""
    given = {str(name): str(value) for name, value in headers.items() if str(name).lower() not in _OWNED_HEADERS}
    lowered = {name.lower() for name in given}
    shown = {} if "host" in lowered else {"Host": host if port == 443 else f"{host}:{port}"}
    return {**shown, **given, "Content-Length": str(len(body))}


def _answer(response: http.client.HTTPResponse, content: bytes) -> Answer:
    """Return the headers and the kept body of an answer (a repeated header's values joined by ", ")."""
    headers: dict[str, str] = {}
    for name, value in response.getheaders():
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    kept = content[:MAX_RESPONSE_BYTES]
    return Answer(headers, kept.decode("utf-8", errors="replace"), len(content) > MAX_RESPONSE_BYTES)


# What a kept connection the receiver closed meanwhile raises before any answer arrives.
_STALE = (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError)


def _exchange(
    pool: connections.Pool | None, key: connections.Key, target: str, body: bytes, headers: dict, deadline: dialing.Deadline
) -> tuple[ssl.SSLSocket, float, http.client.HTTPResponse]:
    """Send the POST on a kept connection to the receiver, or a new one; return it, when it opened, and the response."""
    kept = pool.take(key) if pool is not None else None
    if kept is not None:
        tls, opened = kept
        try:
            return tls, opened, _send(tls, key.host, key.port, target, body, headers, deadline)
        except _STALE:
            # The receiver closed it as we sent and answered nothing: send again on a new connection.
            tls.close()
            if deadline.fired:
                raise
    tls = dialing.open_tls(key.host, key.port, deadline, allow_private=key.allow_private, ca_bundle=key.ca_bundle)
    opened = time.monotonic()
    try:
        return tls, opened, _send(tls, key.host, key.port, target, body, headers, deadline)
    except BaseException:
        tls.close()
        raise


def _check_arguments(body: bytes, timeout: float) -> None:
    """Reject a non-positive timeout or a body that is not bytes."""
    if not timeout > 0:
        raise ValueError("timeout must be positive")
    if not isinstance(body, (bytes, bytearray)):
        # A str would be silently latin-1 encoded by http.client, breaking
        # the signature computed over the caller's bytes.
        raise TypeError(f"body must be bytes, not {type(body).__name__}")


def _send(
    tls: ssl.SSLSocket, host: str, port: int, target: str, body: bytes, headers: dict, deadline: dialing.Deadline
) -> http.client.HTTPResponse:
    """Send the POST over tls and return the response once its head has arrived."""
    conn = _PinnedConnection(host, port)
    conn.sock = tls
    lowered = {str(name).lower() for name in headers}
    conn.putrequest("POST", target, skip_host="host" in lowered, skip_accept_encoding=True)
    for name, value in headers.items():
        if name.lower() not in _OWNED_HEADERS:
            conn.putheader(name, value)
    conn.putheader("Content-Length", str(len(body)))
    deadline.guard(tls)
    conn.endheaders(body)
    deadline.guard(tls)
    return conn.getresponse()


def _drain(response: http.client.HTTPResponse, tls: ssl.SSLSocket, deadline: dialing.Deadline) -> tuple[bool, bytes]:
    """Read at most MAX_RESPONSE_BYTES + 1 of the body; return whether it was read to its end, and what was read.

    Raises TimeoutError if the deadline cut it short.
    """
    budget = MAX_RESPONSE_BYTES + 1
    chunks = []
    while budget > 0:
        deadline.guard(tls)
        chunk = response.read1(budget)
        if not chunk:
            break
        chunks.append(chunk)
        budget -= len(chunk)
    deadline.remaining()  # a shutdown by the timer looks like a clean EOF
    # A chunked body closes the response at its last chunk; read1 leaves a Content-Length one open at 0 left.
    return response.isclosed() or response.length == 0, b"".join(chunks)


# Receivers that push back: their Retry-After sets when the next attempt goes.
PUSHBACK = frozenset({429, 503})


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Return the seconds a Retry-After header asks for (delta-seconds or HTTP date), or None if absent or malformed."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:  # HTTP dates are GMT; a date without a zone is malformed
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def _describe(exc: Exception, deadline: dialing.Deadline) -> str:
    """Return a short, log-friendly reason for a failed exchange."""
    # Once the timer has fired, whatever broke was collateral of our shutdown.
    if deadline.fired or isinstance(exc, TimeoutError):
        return f"timed out after {float(deadline.timeout)} s"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, http.client.HTTPException):
        return f"invalid HTTP response: {type(exc).__name__}: {exc}"
    if isinstance(exc, OSError):
        return f"connection failed: {exc.strerror or exc}"
    # ValueError: a bad port in the URL, or CR/LF in a header name or value.
    return f"invalid request: {exc}"
