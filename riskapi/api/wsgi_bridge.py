"""Flask under the event loop: a request crosses to a handler thread once, and its answer comes back once.

a2wsgi (Connexion's bridge) crosses threads for every message: each read of the body, the response
start and each chunk is a run_coroutine_threadsafe the handler thread blocks on, and the call itself a
concurrent Future. Here the body is read whole on the event loop first (BodyMiddleware bounds its
size), Flask runs to its last byte in a handler thread (riskapi.api.handler_threads), and the answer
returns whole by one call_soon_threadsafe. No handler streams: Flask builds each response whole, so
holding it costs nothing a2wsgi's queue of ten messages did not. The environ is a2wsgi's own.
"""

import asyncio
import contextvars
import io
from typing import Any, cast

from a2wsgi.asgi_typing import HTTPScope
from a2wsgi.wsgi import build_environ
from starlette.types import Receive, Scope, Send

from riskapi.api.handler_threads import READS, HandlerThreads

__all__ = ["WsgiBridge"]


class WsgiBridge:
    """An ASGI app running a WSGI app in handler threads, one crossing each way per request."""

    def __init__(self, app: Any, threads: HandlerThreads) -> None:
        self.app = app
        self.threads = threads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # as a2wsgi answers it
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1000})
            return
        body = await _body(receive)
        loop = asyncio.get_running_loop()
        answer = loop.create_future()
        call = _Call(self.app, scope, body, loop, answer)
        # Connexion hands the request's context (connexion.context) to the handler in context variables.
        context = contextvars.copy_context()
        self.threads.start(_is_read(scope), lambda: context.run(call.run))
        status, headers, content = await answer
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})


def _is_read(scope: Scope) -> bool:
    if scope["method"] in READS:
        return True
    return any(name == b"precognition" and value.lower() == b"true" for name, value in scope["headers"])


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left: Flask reads what came
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _settle(answer: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if answer.done():  # the request was cancelled meanwhile
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(result)


class _Call:
    """One WSGI call, run in a handler thread, its answer handed to the event loop."""

    def __init__(self, app: Any, scope: Scope, body: bytes, loop: asyncio.AbstractEventLoop, answer: asyncio.Future):
        self.app, self.scope, self.body, self.loop, self.answer = app, scope, body, loop, answer
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []

    def start_response(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        # Nothing is sent before the call ends, so a later start_response (with exc_info) replaces the first.
        self.status = int(status.split(" ", 1)[0])
        self.headers = [(name.strip().encode("latin1").lower(), value.strip().encode("latin1")) for name, value in headers]
        return self.chunks.append

    def run(self) -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            # a2wsgi types the input as its own Body; PEP 3333 asks only for a file-like object.
            environ = build_environ(cast(HTTPScope, self.scope), cast(Any, io.BytesIO(self.body)))
            iterable = self.app(environ, self.start_response)
            try:
                self.chunks.extend(iterable)
            finally:
                close = getattr(iterable, "close", None)
                if close is not None:
                    close()
            if not self.status:
                raise RuntimeError("the WSGI app returned without calling start_response")
            result = (self.status, self.headers, b"".join(self.chunks))
        except BaseException as exc:  # noqa: BLE001 - raised in the request's coroutine, as a2wsgi does
            error = exc
        try:
            self.loop.call_soon_threadsafe(_settle, self.answer, result, error)
        except RuntimeError:  # the loop has closed: nobody waits for this answer
            pass
