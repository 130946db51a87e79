"""Tests for jobs.https.transport against a real local HTTPS receiver; no mocks."""

from __future__ import annotations

import dataclasses
import email.utils
import socket
import time
import types

import pytest

from jobs.https import dialing
from jobs.https.connections import Pool
from jobs.https.transport import MAX_RESPONSE_BYTES, Result, is_allowed_address, post
from toolkit.receiver import Receiver, Reply
from toolkit.serving import wait_until

BODY = b'{"event":"risk.updated","score":0.73}'
# Kept connections, as a worker's engine holds them (each receiver has its own port, so its own keys).
POOL = Pool()
# One thread keeps every attempt's deadline, as a worker's engine has it.
WATCHDOG = dialing.Watchdog()


@pytest.fixture
def rx():
    """Yield a fresh receiver per test, so scripted replies never leak."""
    with Receiver() as receiver:
        yield receiver


# An exchange that must succeed gets this long: a busy machine may take seconds over a loopback handshake,
# and a generous deadline costs nothing when it passes.
ROOMY = 30.0


def deliver(rx: Receiver, *, timeout: float = ROOMY, url: str | None = None, **kwargs) -> Result:
    """POST BODY to the receiver, trusting its CA and allowing loopback."""
    kwargs.setdefault("allow_private", True)
    kwargs.setdefault("ca_bundle", rx.ca_path)
    kwargs.setdefault("pool", POOL)
    kwargs.setdefault("watchdog", WATCHDOG)
    return post(url or rx.url, BODY, kwargs.pop("headers", {}), timeout=timeout, **kwargs)


def closed_port() -> int:
    """Return a loopback port that nothing is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- Result ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "ok"),
    [
        (200, True),
        (204, True),
        (299, True),
        (199, False),
        (302, False),
        (500, False),
        (None, False),
    ],
)
def test_result_ok_means_2xx(status, ok):
    """Result.ok is derived from the status alone."""
    assert Result(status, None, 1).ok is ok


def test_result_is_frozen():
    """Results are values; a retry loop must not mutate a logged one."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        Result(200, None, 1).status = 500


# --- happy path -------------------------------------------------------------


def test_200_delivers_exact_body_and_headers(rx):
    """The receiver gets the raw body, the caller's headers verbatim, our framing."""
    headers = {
        "Content-Type": "application/json",
        "Webhook-Signature": "abc123",
        "X-Mixed-Case": "Keep Me",
    }
    result = deliver(rx, headers=headers)
    assert (result.status, result.error, result.retry_after) == (200, None, None)
    assert result.ok and result.error is None
    assert rx.wait_for(1)
    path, got, body, *_ = rx.requests[0]
    # What the result says went is what arrived, every header of it.
    assert {name.lower(): value for name, value in (result.request_headers or {}).items()} == got
    assert result.response is not None and (result.response.body, result.response.truncated) == ("", False)
    assert path == "/hook"
    assert body == BODY
    assert got["content-type"] == "application/json"
    assert got["webhook-signature"] == "abc123"
    assert got["x-mixed-case"] == "Keep Me"
    assert got["content-length"] == str(len(BODY))
    assert "connection" not in got  # HTTP/1.1: kept alive unless the receiver closes it
    assert got["host"] == f"localhost:{rx.port}"
    assert "accept-encoding" not in got


def test_caller_cannot_override_framing_headers(rx):
    """A wrong Content-Length or a Connection header from the caller is replaced, not sent."""
    result = deliver(rx, headers={"Content-Length": "999", "Connection": "close"})
    assert result.ok, result
    _, got, body, *_ = rx.requests[0]
    assert (got["content-length"], got.get("connection"), body) == (str(len(BODY)), None, BODY)


def test_query_string_is_kept(rx):
    """The path and query of the URL reach the receiver unchanged."""
    assert deliver(rx, url=rx.url + "?tenant=7&x=%20").ok
    assert rx.requests[0].path == "/hook?tenant=7&x=%20"


def test_header_injection_is_an_error_not_an_exception(rx):
    """CR/LF in a header value is refused before anything is sent."""
    result = deliver(rx, headers={"X-Evil": "a\r\nInjected: yes"})
    assert result.status is None and "invalid request" in result.error
    assert not rx.wait_for(1, timeout=0.2)


# --- non-2xx answers ----------------------------------------------------------


@pytest.mark.parametrize("status", [500, 410, 404])
def test_error_status_is_returned_not_ok(rx, status):
    """Error statuses are reported as such with no transport error."""
    rx.responses.append(Reply(status, body=b"nope"))
    result = deliver(rx)
    assert (result.status, result.error, result.ok) == (status, None, False)


def test_redirect_is_not_followed(rx):
    """A 302 is just a non-2xx status; following it would bypass the address check."""
    rx.responses.append(Reply.redirect(rx.url + "/elsewhere"))
    result = deliver(rx)
    assert (result.status, result.ok) == (302, False)
    assert not rx.wait_for(2, timeout=0.3)
    assert [r.path for r in rx.requests] == ["/hook"]


def test_huge_response_is_not_read_to_the_end(rx):
    """Only the first 64 KiB are read, so a receiver claiming 1 GiB can't stall us."""
    # The receiver sends 4x the cap, claims far more, then holds the line open past the deadline: a client
    # that read to Content-Length would sit there until the deadline and fail; one that stops at the cap succeeds.
    rx.responses.append(Reply(200, body=b"x" * (4 * MAX_RESPONSE_BYTES), content_length=1 << 30, hold=3 * ROOMY))
    result = deliver(rx)
    assert (result.status, result.error) == (200, None)


# --- deadlines ----------------------------------------------------------------

# A deadline can't fire early, so the lower bounds hold on any machine (less a little for rounding).
# How late it fires depends on how busy the machine is: the upper bound only catches a deadline that
# did not cut the exchange at all (the receiver's stall or trickle lasts far longer than this).
LATE = 10.0


@pytest.mark.parametrize("keeper", [WATCHDOG, None], ids=["watchdog", "own-timer"])
def test_stall_fails_at_timeout(rx, keeper):
    """A receiver that never answers costs exactly the timeout."""
    rx.responses.append(Reply(200, delay=6 * LATE))
    started = time.monotonic()
    result = deliver(rx, timeout=1.0, watchdog=keeper)
    elapsed = time.monotonic() - started
    assert result.status is None and not result.ok
    assert result.error == "timed out after 1.0 s"
    assert 0.9 <= elapsed <= 1.0 + LATE
    assert 900 <= result.duration_ms <= (1.0 + LATE) * 1000


@pytest.mark.parametrize("keeper", [WATCHDOG, None], ids=["watchdog", "own-timer"])
def test_trickle_fails_at_total_deadline(rx, keeper):
    """A byte every 0.3 s defeats per-read timeouts but not a total deadline."""
    rx.responses.append(Reply(200, body=b"x" * 100, trickle=0.3))  # 30 s of body: well past LATE
    started = time.monotonic()
    result = deliver(rx, timeout=1.0, watchdog=keeper)
    elapsed = time.monotonic() - started
    assert result.status is None and not result.ok
    assert result.error == "timed out after 1.0 s"
    assert 0.9 <= elapsed <= 1.0 + LATE


@pytest.mark.parametrize("keeper", [WATCHDOG, None], ids=["watchdog", "own-timer"])
def test_trickled_headers_fail_at_total_deadline(rx, keeper):
    """Headers dripped byte by byte can't keep the exchange alive past the deadline."""
    rx.responses.append(Reply(200, trickle=0.5, trickle_head=True))  # about 60 bytes of head: 30 s, well past LATE
    started = time.monotonic()
    result = deliver(rx, timeout=1.0, watchdog=keeper)
    elapsed = time.monotonic() - started
    assert (result.status, result.error) == (None, "timed out after 1.0 s")
    assert 0.9 <= elapsed <= 1.0 + LATE


class _Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        # From the real clock's reading: the shared WATCHDOG's leftover deadlines are not made due by it.
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


def test_one_watchdog_fires_deadlines_in_expiry_order_and_never_a_cancelled_one(monkeypatch):
    """Deadlines handed over out of order fire at their own expiry; a cancelled one stays unfired and is dropped."""
    clock = _Clock()
    # dialing's own time reference: the rest of the process keeps the real clock.
    monkeypatch.setattr(dialing, "time", types.SimpleNamespace(monotonic=clock))
    watchdog = dialing.Watchdog()
    late, cancelled, early = dialing.Deadline(0.6, watchdog), dialing.Deadline(0.3, watchdog), dialing.Deadline(0.2, watchdog)
    cancelled.cancel()
    clock.now += 0.4
    # The thread sees the moved clock when its (real-time) wait ends; waiting longer only makes "late" surer unfired.
    assert wait_until(lambda: early.fired, timeout=30)
    time.sleep(0.3)
    assert (early.fired, cancelled.fired, late.fired) == (True, False, False)
    with pytest.raises(TimeoutError):
        early.remaining()
    assert late.remaining() == pytest.approx(0.2)
    clock.now += 0.4
    assert wait_until(lambda: late.fired, timeout=30)
    assert not cancelled.fired
    assert watchdog.pending() == 0  # the cancelled one was dropped, not kept
    with pytest.raises(TimeoutError):
        late.remaining()


def test_trickle_within_deadline_succeeds(rx):
    """A slow but finite response that completes in time is a normal success."""
    rx.responses.append(Reply(202, body=b"abc", trickle=0.005, trickle_head=True))
    result = deliver(rx)
    assert (result.status, result.error) == (202, None)


# --- destination checks -------------------------------------------------------


def test_localhost_refused_by_default(rx):
    """Loopback is refused before connecting, and the error names the address."""
    result = deliver(rx, allow_private=False)
    assert result.status is None
    assert result.error == "destination address 127.0.0.1 is not allowed"
    assert not rx.wait_for(1, timeout=0.2)


def test_localhost_allowed_when_private_allowed(rx):
    """allow_private=True is the escape hatch for tests and on-prem receivers."""
    assert deliver(rx, allow_private=True).ok
    assert rx.wait_for(1)


@pytest.mark.parametrize(
    "host",
    [
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:10.0.0.1]",
    ],
)
def test_private_literals_refused_without_connecting(host, monkeypatch):
    """IP literals skip DNS but not the check; nothing is contacted."""
    dialed: list = []
    monkeypatch.setattr(dialing, "connect", lambda *args: dialed.append(args))
    result = post(f"https://{host}:{closed_port()}/hook", BODY, {}, timeout=1.0)
    assert result.status is None
    assert result.error == f"destination address {host.strip('[]')} is not allowed"
    assert dialed == []


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("8.8.8.8", True),
        ("1.1.1.1", True),
        ("2606:4700:4700::1111", True),
        ("127.0.0.1", False),
        ("127.8.9.10", False),
        ("10.1.2.3", False),
        ("172.31.255.255", False),
        ("192.168.0.1", False),
        ("169.254.169.254", False),  # cloud metadata endpoint
        ("100.64.0.1", False),  # CGNAT
        ("100.127.255.254", False),
        ("224.0.0.1", False),
        ("240.0.0.1", False),
        ("0.0.0.0", False),
        ("255.255.255.255", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fe80::1%1", False),
        ("fc00::1", False),
        ("ff02::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:100.64.0.1", False),
        ("::ffff:8.8.8.8", True),
        ("2002:a00:1::", False),  # 6to4 wrapping 10.0.0.1
        ("not an ip", False),
    ],
)
def test_is_allowed_address(address, allowed):
    """Internal, special-purpose and IPv4-mapped internal addresses are refused."""
    assert is_allowed_address(address) is allowed


# --- refusals and failures ----------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost/hook",
        "ftp://example.com/x",
        "localhost/hook",
        "",
        "https:///nohost",
    ],
)
def test_non_https_refused(rx, url):
    """Anything but an https URL with a host is refused without a connection."""
    result = post(url, BODY, {}, allow_private=True)
    assert result.status is None and result.error
    assert not result.ok


def test_plain_http_url_to_live_receiver_is_not_contacted(rx):
    """Even a reachable http:// URL is never connected to."""
    result = post(rx.url.replace("https://", "http://"), BODY, {}, allow_private=True)
    assert result.error == "only https:// URLs are allowed"
    assert not rx.wait_for(1, timeout=0.2)
    assert rx.errors == []


def test_untrusted_ca_is_a_tls_error(rx):
    """Without the receiver's CA in the bundle, the system store rejects its cert."""
    result = deliver(rx, ca_bundle=None)
    assert result.status is None
    assert result.error.startswith("TLS certificate verification failed")
    assert not rx.wait_for(1, timeout=0.2)


def test_certificate_checked_against_url_hostname(rx):
    """A cert for localhost does not pass for 127.0.0.1, even from a trusted CA."""
    result = deliver(rx, url=f"https://127.0.0.1:{rx.port}/hook")
    assert result.status is None
    assert "TLS certificate verification failed" in result.error
    assert "127.0.0.1" in result.error


def test_unknown_host_fails_without_raising():
    """A name that cannot resolve is a DNS error (or timeout), never an exception."""
    started = time.monotonic()
    result = post("https://does-not-exist.invalid/hook", BODY, {}, timeout=1.0)
    assert result.status is None and not result.ok
    assert "does-not-exist.invalid" in result.error or result.error.startswith("timed out")
    # A slow resolver is cut at the deadline; LATE covers a busy machine firing it late.
    assert time.monotonic() - started <= 1.0 + LATE


def test_connection_refused_is_reported():
    """Nothing listening is a connection error, not an exception."""
    result = post(
        f"https://localhost:{closed_port()}/hook",
        BODY,
        {},
        allow_private=True,
        timeout=ROOMY,  # a refusal comes at once; a short deadline could beat it on a busy machine
    )
    assert result.status is None
    assert result.error.startswith("connection failed")


def test_caller_bugs_raise():
    """A non-positive timeout or a str body is a bug, not a delivery failure."""
    with pytest.raises(ValueError):
        post("https://example.com/", BODY, {}, timeout=0)
    with pytest.raises(TypeError):
        post("https://example.com/", BODY.decode(), {})


def test_retry_after_in_seconds_or_as_an_http_date():
    from jobs.https.transport import parse_retry_after

    now = 1_800_000_000.0
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after(" 0 ", now) == 0.0
    when = email.utils.formatdate(now + 90, usegmt=True)
    assert parse_retry_after(when, now) == 90.0
    assert parse_retry_after(email.utils.formatdate(now - 90, usegmt=True), now) == 0.0  # already past
    for bad in (None, "", "soon", "-5", "1.5", "Fri, 99 Foo 2027"):
        assert parse_retry_after(bad, now) is None


def test_a_429_carries_its_retry_after(receiver):
    receiver.responses.append(Reply(429, headers={"Retry-After": "7"}))
    result = post(receiver.url, b"{}", {}, timeout=ROOMY, allow_private=True, ca_bundle=receiver.ca_path)
    assert result.status == 429 and result.retry_after == 7.0
    receiver.responses.append(Reply(500, headers={"Retry-After": "7"}))
    assert post(receiver.url, b"{}", {}, timeout=ROOMY, allow_private=True, ca_bundle=receiver.ca_path).retry_after is None


# --- kept connections -----------------------------------------------------------


@pytest.fixture
def kept():
    """Yield a receiver that keeps connections open, as most do."""
    with Receiver(keep_alive=True) as receiver:
        yield receiver


def test_a_kept_connection_carries_the_next_attempts(kept):
    """Attempts to a receiver that keeps the connection open reuse it: one TLS handshake for three."""
    assert all(deliver(kept).ok for _ in range(3))
    assert kept.wait_for(3) and kept.connections == 1
    assert [r.body for r in kept.requests] == [BODY] * 3


def test_a_receiver_that_closes_gets_a_new_connection_each_time(rx):
    """A receiver answering "Connection: close" gets a fresh connection for every attempt."""
    assert deliver(rx).ok and deliver(rx).ok
    assert rx.connections == 2


def test_a_connection_the_receiver_closed_while_idle_is_not_used(kept):
    """An idle connection the receiver has since closed is dropped; the attempt opens a new one."""
    assert deliver(kept).ok
    kept.close_connections()
    assert deliver(kept).ok
    assert kept.wait_for(2) and kept.connections == 2


def test_a_connection_closed_as_it_is_taken_is_replaced_without_losing_the_attempt(kept, monkeypatch):
    """The receiver closing the kept connection between the idle check and the send: sent once, on a new one."""
    assert deliver(kept).ok
    monkeypatch.setattr("jobs.https.connections._quiet", lambda sock: True)  # the check saw it still open
    kept.close_connections()
    result = deliver(kept)
    assert (result.status, result.error) == (200, None)
    assert kept.wait_for(2) and len(kept.requests) == 2 and kept.connections == 2


def test_a_connection_idle_too_long_is_not_used(kept, monkeypatch):
    """Past connections.IDLE the receiver may be closing it: a new connection is opened."""
    monkeypatch.setattr("jobs.https.connections.IDLE", 0.0)
    assert deliver(kept).ok and deliver(kept).ok
    assert kept.connections == 2


def test_connections_are_kept_per_trust_and_address_policy(kept, tmp_path):
    """Only an attempt with the same host, port, CA bundle and private-address rule reuses a connection."""
    other_ca = tmp_path / "same-ca-other-file.pem"
    other_ca.write_bytes(open(kept.ca_path, "rb").read())
    assert deliver(kept).ok and deliver(kept, ca_bundle=str(other_ca)).ok
    assert kept.connections == 2
    refused = deliver(kept, allow_private=False)  # a kept loopback connection must not dodge the address rule
    assert refused.status is None and "not allowed" in refused.error
    assert kept.connections == 2 and len(kept.requests) == 2


@pytest.mark.parametrize(
    "reply",
    [
        Reply(200, body=b"x" * (2 * MAX_RESPONSE_BYTES)),  # not read to its end
        Reply(200, headers={"Connection": "close"}),
    ],
    ids=["body-over-the-cap", "connection-close"],
)
def test_a_connection_is_kept_only_after_a_complete_exchange(kept, reply):
    """A response not read to its end, or one that says it closes, leaves nothing to reuse."""
    kept.responses.append(reply)
    assert deliver(kept).ok and deliver(kept).ok
    assert kept.connections == 2


def test_a_timed_out_connection_is_not_kept(kept):
    """After the deadline cut an exchange short, the next attempt starts on a new connection."""
    # The answer comes long after the deadline, however late a busy machine fires it; the deadline is
    # roomy for the handshake and request, which must get through for the connection to be one to keep.
    kept.responses.append(Reply(200, delay=6 * LATE))
    assert deliver(kept, timeout=2.0).error == "timed out after 2.0 s"
    assert kept.wait_for(1, timeout=ROOMY)
    assert deliver(kept).ok
    assert kept.connections == 2


def test_the_receiver_records_no_request_whose_body_never_came(kept):
    """A sender killed between the head and the body leaves the test receiver nothing to record, as a real server."""
    import ssl

    context = ssl.create_default_context(cafile=kept.ca_path)
    with socket.create_connection(("127.0.0.1", kept.port)) as raw, context.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(b"POST /hook HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nabc")
    assert deliver(kept).ok  # the receiver is still fine
    assert kept.wait_for(1) and [r.body for r in kept.requests] == [BODY]
