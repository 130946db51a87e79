"""Connexion's private internals that the app factory relies on, in this one module.

Connexion 3's FlaskApp runs Flask in a2wsgi's WSGIMiddleware, set as its middleware app's asgi_app,
with a pool of 10 threads and no option to change either. And each of its Flask views (a FlaskOperation)
wraps its handler anew on every request: a decorator object, four wrappers, the handler's signature
read and a URI parser built, all the same each time; its security check reads the token function's
signature twice per request. tests/test_connexion_internals.py pins what this relies on, so a Connexion
upgrade that changes it fails there, in one place.
"""

import asyncio
import functools
from typing import Any

import connexion
import flask
from connexion.apps.flask import FlaskOperation
from connexion.decorators import FlaskDecorator
from connexion.lifecycle import WSGIRequest
from connexion.middleware.swagger_ui import SwaggerUIMiddleware
from connexion.security import AbstractSecurityHandler
from starlette.types import ASGIApp

from riskapi.api.handler_threads import HandlerThreads
from riskapi.api.wsgi_bridge import WsgiBridge

__all__ = ["decorate_once", "past_swagger_ui", "remember_security_signatures", "run_flask_in_threads"]


def run_flask_in_threads(app: connexion.FlaskApp, threads: HandlerThreads) -> None:
    """Serve app's Flask requests from threads (riskapi.api.wsgi_bridge) instead of a2wsgi's pool of 10."""
    app._middleware_app.asgi_app = WsgiBridge(app.app.wsgi_app, threads)


def decorate_once(app: connexion.FlaskApp) -> None:
    """Have each operation's handler wrapped by Connexion once, when its API is added, not on every request."""
    inner = app._middleware_app
    add_api = inner.add_api

    def adding(*args: Any, **kwargs: Any) -> Any:
        # Connexion adds the APIs to its Flask app when it builds its middleware stack, on first use.
        api = add_api(*args, **kwargs)
        views = inner.app.view_functions
        for endpoint, view in views.items():
            if isinstance(view, FlaskOperation):
                views[endpoint] = _Operation(view)
        return api

    inner.add_api = adding


def past_swagger_ui(app: ASGIApp) -> ASGIApp | None:
    """Return the app that Connexion's Swagger UI middleware app passes what it does not serve to, or None."""
    return app.app if isinstance(app, SwaggerUIMiddleware) else None


def remember_security_signatures() -> None:
    """Have Connexion tell once per security function, not on every request, which arguments it takes."""
    accepts = AbstractSecurityHandler.__dict__["_accepts_kwarg"].__func__
    if not hasattr(accepts, "cache_info"):  # once per process, however many apps it builds
        # (function, keyword) pairs: one per security scheme of the spec and keyword Connexion asks about.
        AbstractSecurityHandler._accepts_kwarg = staticmethod(functools.lru_cache(maxsize=64)(accepts))


class _Operation:
    """A FlaskOperation whose handler is wrapped once."""

    def __init__(self, operation: FlaskOperation) -> None:
        functools.update_wrapper(self, operation)
        decorator = self.decorator = FlaskDecorator(pythonic_params=operation.pythonic_params, jsonifier=operation.jsonifier)
        # As FlaskDecorator.decorate wraps a handler, but each query key's Python name made once.
        parameters = decorator._parameter_decorator_cls(framework=decorator.framework, pythonic_params=operation.pythonic_params)
        parameters.sanitize_fn = functools.lru_cache(maxsize=256)(parameters.sanitize_fn)
        handler = operation._fn
        if asyncio.iscoroutinefunction(handler):  # Connexion's wrapper asks this of every call: here, once
            handler = decorator._sync_async_decorator(handler)
        function = parameters(handler)
        self.function = decorator._response_decorator_cls(framework=decorator.framework, jsonifier=operation.jsonifier)(function)
        self.uri_parser: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        uri_parser = self.uri_parser
        if uri_parser is None:
            # Built from connexion.context.operation, which is only set during a request: this view's operation.
            # A parser holds the operation's parameter definitions and nothing of a request.
            uri_parser = self.uri_parser = self.decorator.uri_parser
        # As Connexion's Flask framework builds it, from the request itself rather than through Flask's proxy.
        request = flask.request._get_current_object()  # type: ignore[attr-defined]
        return self.function(_Request(request, uri_parser=uri_parser, view_args=request.view_args))


class _Request(WSGIRequest):
    """Connexion's request of a Flask view, which parses no form for the files of a request that has none."""

    def files(self) -> dict:
        # Werkzeug finds files only in a multipart body; asked on every call, it parsed every other body's form.
        if self._werkzeug_request.mimetype != "multipart/form-data":
            return {}
        return super().files()
