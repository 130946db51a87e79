"""Flask under Connexion, through Connexion's and Flask's public names, where Connexion's stock path costs more.

Connexion's FlaskApp as shipped serves the drivers page at 0.73 of this module's rate (bench.run --against,
PostgreSQL, 3 x 10 s, 2026-11-29: 4.91 against 3.55 server CPU ms a page; bench/README.md, "Issue 52"). What
earns it, each built on a public extension point:
- WsgiBridge, the last of FlaskApp's `middlewares=`: Flask runs in handler threads (api.handler_threads),
  one crossing each way per request, where Connexion runs it in a2wsgi's pool of ten, which crosses threads for
  every message. With the bridge alone the page is at 0.86 (4.17 against 3.50 ms).
- A body read once: Connexion reads a write's JSON body again, through Flask, to pass it as `body`; the request
  here hands it the one the body validator read (api.request_validation, in Connexion's per-request context), where
  the second reading took 7.5 % of a 1,000-driver create's CPU (bench.profile bulk).
- Operations wrapped once: Connexion's FlaskOperation builds its decorators anew on every request (the handler's
  signature read, a URI parser built, each query key's Python name worked out). Each of its Flask views is
  replaced, once its API is added, by one built from Connexion's own decorator classes once.
No private name of Connexion, Flask, Starlette, a2wsgi or werkzeug is read or overridden (tools.private_names).
"""

import asyncio
import contextvars
import functools
import inspect
import io
from typing import Any, cast

import flask
from a2wsgi.asgi_typing import HTTPScope
from a2wsgi.wsgi import build_environ
from connexion import context
from connexion.apps.flask import FlaskOperation
from connexion.decorators import FlaskDecorator
from connexion.decorators.parameter import SyncParameterDecorator
from connexion.decorators.response import SyncResponseDecorator
from connexion.lifecycle import WSGIRequest
from starlette.types import Receive, Scope, Send

from api.handler_threads import READS, HandlerThreads

__all__ = ["WsgiBridge", "wrap_once"]

_UNREAD = object()  # no body was read by the body validator (no JSON body declared)


class WsgiBridge:
    """Connexion's innermost middleware: runs the Flask app under it in handler threads, one crossing each way per request.

    Given as the last of FlaskApp's `middlewares=`, it wraps Connexion's Flask ASGI app and calls that app's Flask
    app (its `app`) as WSGI itself, in place of the a2wsgi pool Connexion runs it in.
    """

    def __init__(self, app: Any, threads: HandlerThreads) -> None:
        self.app = app.app  # Connexion's Flask ASGI app holds its Flask app as `app`
        self.threads = threads
        self.wrapped = False

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
        if not self.wrapped:  # Connexion added its APIs to Flask as it built its middleware stack, before this call
            wrap_once(self.app)
            self.wrapped = True
        body = await _body(receive)
        loop = asyncio.get_running_loop()
        answer = loop.create_future()
        call = _Call(self.app.wsgi_app, scope, body, loop, answer)
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


def wrap_once(app: flask.Flask) -> None:
    """Replace each of Connexion's Flask views by one whose handler is wrapped once, not on every request."""
    for endpoint, view in app.view_functions.items():
        if isinstance(view, FlaskOperation):
            app.view_functions[endpoint] = _Operation(view)


class _Operation:
    """A FlaskOperation whose handler is wrapped once, as FlaskDecorator wraps it on each call."""

    def __init__(self, operation: FlaskOperation) -> None:
        functools.update_wrapper(self, operation)
        handler = operation.__wrapped__  # the resolved handler: FlaskOperation wraps it with functools.update_wrapper
        if inspect.iscoroutinefunction(handler):
            raise TypeError(f"{operation.operation_id}: a handler here is a plain function")
        self.decorator = FlaskDecorator(pythonic_params=operation.pythonic_params, jsonifier=operation.jsonifier)
        framework = FlaskDecorator.framework
        parameters = SyncParameterDecorator(framework=framework, pythonic_params=operation.pythonic_params)
        # Each query key's Python name, worked out once.
        parameters.sanitize_fn = functools.lru_cache(maxsize=256)(parameters.sanitize_fn)
        self.function = SyncResponseDecorator(framework=framework, jsonifier=operation.jsonifier)(parameters(handler))
        self.uri_parser: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        uri_parser = self.uri_parser
        if uri_parser is None:
            # Built from connexion.context.operation, which is only set during a request: this view's operation.
            # A parser holds the operation's parameter definitions and nothing of a request.
            uri_parser = self.uri_parser = self.decorator.uri_parser
        # The request object itself, as werkzeug files it in its environ: each of Connexion's reads through Flask's
        # proxy looked it up again (8 % of a small write's CPU, bench.profile bulk --size 1).
        request = flask.request.environ["werkzeug.request"]
        return self.function(_Request(request, uri_parser=uri_parser, view_args=request.view_args))


class _Request(WSGIRequest):
    """Connexion's request of a Flask view: its body as the body validator read it, and no form parsed for files."""

    def get_body(self) -> Any:
        found = context.context.get("body", _UNREAD)
        return super().get_body() if found is _UNREAD else found

    def files(self) -> dict:
        # Werkzeug finds files only in a multipart body; asked on every call, it parsed every other body's form.
        if self.mimetype != "multipart/form-data":
            return {}
        return super().files()
