"""A real HTTPS webhook receiver on 127.0.0.1 for tests and benches, with scriptable misbehaviour.

Usage::

    with Receiver() as rx:
        rx.responses.append(Reply(500))
        post(rx.url, b"{}", {}, allow_private=True, ca_bundle=rx.ca_path)
        assert rx.wait_for(1)
        path, headers, body, at, peer = rx.requests[0]

``responses`` is a deque consumed one item per request (a ``Reply`` or a bare
status code; 200 once empty), or may be replaced by a callable that gets the
``Recorded`` request and returns a ``Reply`` or status code.
"""

from __future__ import annotations

import collections
import contextlib
import http
import http.server
import shutil
import socket
import socketserver
import ssl
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Self

import trustme

__all__ = ["Receiver", "Recorded", "Reply"]


class Recorded(NamedTuple):
    """One request as the receiver saw it."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    peer: str = ""  # the client's address: which host sent it


@dataclass(frozen=True)
class Reply:
    """How the receiver answers one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0  # stall this long before sending anything
    trickle: float | None = None  # send the body one byte per this many seconds
    trickle_head: bool = False  # with trickle, drip the status line and headers too
    content_length: int | None = None  # declared length, to lie about the body
    hold: float = 0.0  # keep the connection open this long after the body
    until: threading.Event | None = None  # send nothing until this is set (or the receiver closes): an attempt held in flight

    @classmethod
    def redirect(cls, location: str, status: int = 302) -> Reply:
        """Return a redirect reply pointing at location."""
        return cls(status, headers={"Location": location})


class _Handler(http.server.BaseHTTPRequestHandler):
    """Hands every request to the owning Receiver."""

    protocol_version = "HTTP/1.1"
    timeout = 5  # a client that goes silent must not pin a server thread

    def do_POST(self) -> None:
        """Record the request and answer as scripted."""
        self.server.receiver._handle(self)

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

    def log_message(self, format: str, *args: object) -> None:
        """Keep the output of tests and benches quiet."""


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """Threaded server doing the TLS handshake in each request thread."""

    # Non-daemon threads are what server_close() joins.
    daemon_threads = False
    block_on_close = True
    # socketserver's default backlog of 5 drops connections of a burst (clients then wait for SYN retries).
    request_queue_size = 128

    def __init__(self, receiver: Receiver, context: ssl.SSLContext, host: str) -> None:
        self.receiver = receiver
        self.context = context
        super().__init__((host, 0), _Handler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of our own name."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "localhost", self.server_address[1]

    def finish_request(self, request: socket.socket, client_address: tuple) -> None:
        """Handshake here, not in accept(), so one bad client can't stall the rest."""
        request.settimeout(_Handler.timeout)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except OSError as exc:
            self.receiver._note_error(exc)
            return
        self.receiver._track(tls, True)
        with self.receiver._cond:
            self.receiver.connections += 1
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            self.receiver._track(tls, False)
            tls.close()

    def handle_error(self, request: object, client_address: tuple) -> None:
        """Record instead of printing a traceback; clients hanging up is normal."""
        self.receiver._note_error(sys.exc_info()[1])


class Receiver:
    """HTTPS server on 127.0.0.1 (or `host`, an address of its own) with a trustme-issued certificate for `name`."""

    def __init__(self, keep_alive: bool = False, host: str = "127.0.0.1", name: str = "localhost") -> None:
        # keep_alive: answer HTTP/1.1 requests without "Connection: close" and serve the next request on the
        # same connection, as most real receivers do (an idle connection is closed after _Handler.timeout).
        self.keep_alive = keep_alive
        self.connections = 0  # TLS connections accepted
        self.responses: collections.deque | object = collections.deque()
        self.errors: list[BaseException] = []
        self._requests: list[Recorded] = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._active: set[ssl.SSLSocket] = set()
        self._tmp = Path(tempfile.mkdtemp(prefix="receiver-"))
        self.ca = trustme.CA()
        self.ca_path = str(self._tmp / "ca.pem")
        self.ca.cert_pem.write_to_path(self.ca_path)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(name).configure_cert(context)
        self._server = _Server(self, context, host)
        self.port = self._server.server_address[1]
        self.url = f"https://{name}:{self.port}/hook"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
        )
        self._thread.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def requests(self) -> list[Recorded]:
        """Return a snapshot of the requests recorded so far."""
        with self._cond:
            return list(self._requests)

    def wait_for(self, n: int, timeout: float = 30.0) -> bool:
        """Wait until at least n requests are recorded; return whether they were.

        The default is for requests that must come: roomy for a busy machine, and it costs nothing when they
        do. A check that nothing comes passes its own short timeout (waiting longer would only be stricter).
        """
        with self._cond:
            return self._cond.wait_for(lambda: len(self._requests) >= n, timeout)

    def close(self) -> None:
        """Stop serving, unblock stalled handlers and join every thread."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._server.shutdown()
        with self._cond:
            active = list(self._active)
        for sock in active:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        self._server.server_close()
        self._thread.join()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def close_connections(self) -> None:
        """Close every open connection from this side, as a receiver's idle timeout would."""
        with self._cond:
            active = list(self._active)
        for sock in active:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        # Wait until the handler threads have seen it, so the client side reads EOF (however busy the machine).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(sock in self._active for sock in active):
            time.sleep(0.01)

    def _track(self, sock: ssl.SSLSocket, active: bool) -> None:
        with self._cond:
            (self._active.add if active else self._active.discard)(sock)

    def _note_error(self, exc: BaseException | None) -> None:
        with self._cond:
            self.errors.append(exc)

    def _next_reply(self, request: Recorded) -> Reply:
        with self._cond:
            responses = self.responses
            if callable(responses):
                item = responses(request)
            elif responses:
                item = responses.popleft() if hasattr(responses, "popleft") else responses.pop(0)
            else:
                item = Reply()
        return Reply(item) if isinstance(item, int) else item

    def _handle(self, handler: _Handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length)
        if len(body) < length:
            # The client went away mid-request (a worker killed between the head and the body): a server
            # hands no such request to its application, so nothing is recorded or answered.
            handler.close_connection = True
            return
        request = Recorded(
            handler.path,
            {name.lower(): value for name, value in handler.headers.items()},
            body,
            time.monotonic(),
            handler.client_address[0],
        )
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()
        reply = self._next_reply(request)
        # BaseHTTPRequestHandler keeps an HTTP/1.1 connection unless the client asked to close it.
        keep = self.keep_alive and not handler.close_connection and reply.content_length is None and not reply.hold
        handler.close_connection = not keep
        # The client hanging up mid-reply is often the point of the test.
        with contextlib.suppress(OSError):
            self._send(handler, reply, keep)

    def _send(self, handler: _Handler, reply: Reply, keep: bool = False) -> None:
        # Waiting on the stop event lets close() cut every stall short.
        if reply.delay and self._stop.wait(reply.delay):
            return
        while reply.until is not None and not reply.until.wait(0.05):
            if self._stop.is_set():
                return
        declared = len(reply.body) if reply.content_length is None else reply.content_length
        head = [f"HTTP/1.1 {reply.status} {_reason(reply.status)}"]
        head += [f"{name}: {value}" for name, value in reply.headers.items()]
        head += [f"Content-Length: {declared}"] + ([] if keep else ["Connection: close"]) + ["", ""]
        data = "\r\n".join(head).encode("latin-1") + reply.body
        if reply.trickle is None:
            handler.wfile.write(data)
        else:
            # Dripping the head too defeats clients that only bound the body.
            start = 0 if reply.trickle_head else len(data) - len(reply.body)
            handler.wfile.write(data[:start])
            for i in range(start, len(data)):
                handler.wfile.write(data[i : i + 1])
                if self._stop.wait(reply.trickle):
                    return
        if reply.hold:
            self._stop.wait(reply.hold)


def _reason(status: int) -> str:
    """Return the standard reason phrase for status, or a placeholder."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
