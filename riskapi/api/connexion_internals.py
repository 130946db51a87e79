"""Connexion's private internals that the app factory relies on, in this one module.

Connexion 3's FlaskApp runs Flask in a2wsgi's WSGIMiddleware with its default pool of 10 threads
and has no option for their number: FlaskApp.add_wsgi_middleware only wraps the WSGI app inside that
pool. tests/test_connexion_internals.py pins what this relies on, so a Connexion upgrade that changes
it fails there, in one place.
"""

from concurrent.futures import Executor

import connexion
from a2wsgi import WSGIMiddleware

__all__ = ["run_flask_in_threads"]


def run_flask_in_threads(app: connexion.FlaskApp, threads: int, executor: Executor | None = None) -> None:
    """Serve app's Flask requests from a pool of `threads` threads instead of Connexion's 10, or from executor.

    a2wsgi submits each request as executor.submit(call, environ, start_response).
    """
    middleware = WSGIMiddleware(app.app.wsgi_app, workers=threads)
    if executor is not None:
        middleware.executor.shutdown(wait=False)  # it has started no thread yet: they start on first use
        # a2wsgi declares a ThreadPoolExecutor but only calls submit() and shutdown(), which any Executor has.
        middleware.executor = executor  # type: ignore[assignment]
    app._middleware_app.asgi_app = middleware
