"""The handler of streamListenSession (`riskapi listen`): server-sent events answered in the event loop.

A handler thread held for a session's life would leave the process one fewer of its few threads per
developer listening, so this ASGI middleware (installed by api.app) answers the operation itself, after Connexion has
routed the request, checked its token and validated its parameters. The database is read in short
calls off the loop; it holds everything, so any API process may hold any session's stream. Polls
find new deliveries within POLL seconds; a comment line every HEARTBEAT seconds keeps proxies from
closing an idle stream and pushes the session's end ahead (services.listen_sessions.TTL),
so a session whose process died ends by itself. The client going away ends the session. A server
asked to stop ends its streams (not their sessions), which it would otherwise wait for: the CLI opens
the stream again, on another process or host when there is one.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import models
from models import timestamp
from services import listen_sessions

log = logging.getLogger("riskapi.listen")

OPERATION = "streamListenSession"
POLL = 0.25
HEARTBEAT = 15.0
_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx would hold the events back in its buffer
]

T = TypeVar("T")


def event(name: str, data: Any) -> bytes:
    """Return one server-sent event whose data is a line of JSON."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


async def _db(call: Callable[..., T], *args: Any) -> T:
    """Run a database call in a thread of the loop's executor, on a connection of its own."""

    def run() -> T:
        with models.connection():
            return call(*args)

    return await asyncio.to_thread(run)


class ListenStreamMiddleware:
    """Answer streamListenSession as a `text/event-stream`; pass every other request on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extensions = scope.get("extensions", {})
        # Connexion names the operation by its resolved id: `<x-openapi-router-controller>.<operationId>`.
        routed = extensions.get("connexion_routing", {}).get("operation_id") or ""
        if scope["type"] != "http" or routed.rpartition(".")[2] != OPERATION:
            await self.app(scope, receive, send)
            return
        agency_id = extensions["connexion_context"]["user"]
        # An unknown or ended session raises its 404 here, answered by the error handlers before anything is sent.
        session = await _db(listen_sessions.live, agency_id, scope["path_params"]["session"])
        timeout = int(parse_qs(scope.get("query_string", b"").decode("latin-1")).get("timeout", ["300"])[-1])
        gone = asyncio.Event()
        watcher = asyncio.create_task(_watch(receive, gone))
        try:
            if await self._stream(session, timeout, send, gone):
                await _db(listen_sessions.end, session)
        finally:
            watcher.cancel()

    async def _stream(self, session: Any, timeout: int, send: Send, gone: asyncio.Event) -> bool:
        """Stream until the timeout, the session's end or the client's; return whether the client went away."""
        await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
        await _db(listen_sessions.hold, session)
        ready = {"object": "listen_session", "uuid": str(session.uuid), "expires": timestamp(session.listen_expires)}
        if not await _send(send, event("ready", ready), gone):
            return True
        deadline = time.monotonic() + timeout
        beat = time.monotonic() + HEARTBEAT
        while True:
            try:
                for delivery in await _db(listen_sessions.take, session):
                    if not await _send(send, event("delivery", delivery), gone):
                        return True
                if time.monotonic() >= beat:
                    beat = time.monotonic() + HEARTBEAT
                    if not await _db(listen_sessions.hold, session):
                        break  # ended elsewhere: nothing more will come
                    if not await _send(send, b": heartbeat\n\n", gone):
                        return True
            except Exception:  # the database away: end the stream, not the session; the CLI opens it again
                log.exception("listen stream of session %s", session.uuid)
                break
            if time.monotonic() >= deadline or _server_stopping():
                break
            try:
                await asyncio.wait_for(gone.wait(), POLL)
                return True
            except TimeoutError:
                pass
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return False


def _server_stopping() -> bool:
    """Tell whether uvicorn was asked to stop: its signal handler, while it serves, is its Server's handle_exit."""
    server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return bool(getattr(server, "should_exit", False))


async def _send(send: Send, chunk: bytes, gone: asyncio.Event) -> bool:
    """Send a chunk of the stream; False when the client has gone."""
    if gone.is_set():
        return False
    try:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except OSError:
        gone.set()
        return False
    return not gone.is_set()


async def _watch(receive: Receive, gone: asyncio.Event) -> None:
    """Set `gone` when the client disconnects (the request has no body to read)."""
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


__all__ = ["ListenStreamMiddleware", "event"]
