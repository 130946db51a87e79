"""The app factory: Connexion routes and validates every request from spec/openapi.yaml."""

import functools
import time

import connexion
import connexion.resolver
import flask
from connexion.datastructures import MediaTypeDict
from connexion.middleware import ConnexionMiddleware, MiddlewarePosition
from connexion.validators import FormDataValidator, MultiPartFormDataValidator

import models
import spec
from models import delivery_states
from riskapi.api import error_handlers as errors
from riskapi.api import precognition
from riskapi.api.cors import JsonCorsMiddleware
from riskapi.api.docs import SpecMiddleware
from riskapi.api.flask_bridge import WsgiBridge
from riskapi.api.handler_threads import HandlerThreads
from riskapi.api.middleware import BodyMiddleware, HeadersMiddleware, RoutedOnlyMiddleware
from riskapi.api.rate_limits import RateLimitMiddleware
from riskapi.api.request_validation import BodyValidator, ParamValidator, URIParser
from riskapi.api.routing import resolve
from riskapi.config import SETTINGS_KEY, Settings, SettingsError
from riskapi.observability import logs
from riskapi.observability.metrics import MetricsMiddleware
from riskapi.services.listen_stream import ListenStreamMiddleware
from riskapi.webhooks import wakeups as wake
from spec import SPEC_PATH

CORS_METHODS = ("GET", "POST", "PATCH", "DELETE")
WRITES = frozenset({"POST", "PATCH", "PUT", "DELETE"})
PROBES = frozenset({f"{spec.base_path()}/healthz", f"{spec.base_path()}/readyz"})
CORS_ALLOW_HEADERS = (
    "Authorization",
    "Content-Type",
    "Accept",
    "Precognition",
    "Precognition-Validate-Only",
    "X-HTTP-Method-Override",
    "X-Request-Id",
    "Idempotency-Key",
)
CORS_EXPOSE_HEADERS = ("Precognition", "Precognition-Success", "Vary", "Retry-After", "Idempotent-Replayed")


def create_app(settings: Settings | None = None) -> connexion.FlaskApp:
    """Build the service from its settings (read from the environment when not given)."""
    settings = settings or Settings.from_env()
    models.bind(settings.database_url)
    # The last middleware runs Flask in handler threads (riskapi.api.flask_bridge), where Connexion runs a2wsgi's pool.
    threads = HandlerThreads(settings.threads, settings.write_delay)
    middlewares = [*ConnexionMiddleware.default_middlewares, functools.partial(WsgiBridge, threads=threads)]
    app = connexion.FlaskApp(__name__, specification_dir=str(SPEC_PATH.parent), middlewares=middlewares)
    validator_map = {
        "body": MediaTypeDict(
            {
                "*/*json": BodyValidator,
                "application/x-www-form-urlencoded": FormDataValidator,
                "multipart/form-data": MultiPartFormDataValidator,
            }
        ),
        "parameter": ParamValidator.once_per_operation(),
    }
    app.add_api(
        SPEC_PATH.name,
        resolver=connexion.resolver.Resolver(function_resolver=resolve),
        pythonic_params=True,
        validator_map=validator_map,
        uri_parser_class=URIParser,
        validate_responses=settings.validate_responses,
        swagger_ui_options=connexion.options.SwaggerUIOptions(swagger_ui_path="/docs"),
    )
    errors.register(app)
    app.add_middleware(HeadersMiddleware, position=MiddlewarePosition.BEFORE_EXCEPTION)
    app.add_middleware(BodyMiddleware, position=MiddlewarePosition.BEFORE_ROUTING, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(RoutedOnlyMiddleware, position=MiddlewarePosition.BEFORE_SECURITY)
    app.add_middleware(SpecMiddleware, position=MiddlewarePosition.BEFORE_SWAGGER)
    # Routed, authenticated and validated by then; answered in the event loop, not by a handler thread.
    app.add_middleware(ListenStreamMiddleware, position=MiddlewarePosition.BEFORE_CONTEXT)
    if settings.access_log:
        logs.configure(settings.log_format)
    if settings.rate_limit and settings.redis_url:
        # Outside the error handling: a 429 costs nothing more, and every error carries the limit headers.
        app.add_middleware(
            RateLimitMiddleware,
            position=MiddlewarePosition.BEFORE_EXCEPTION,
            redis_url=settings.redis_url,
            limit=settings.rate_limit,
        )
    app.add_middleware(logs.AccessLogMiddleware, position=MiddlewarePosition.BEFORE_EXCEPTION, metrics=settings.metrics)
    if settings.metrics:
        app.add_middleware(MetricsMiddleware, position=MiddlewarePosition.BEFORE_EXCEPTION, settings=settings)
    if settings.cors_origins:
        # Outside the ExceptionMiddleware: error responses (401, 404, 422, 503...) carry the CORS
        # headers too, and preflights are answered before the body checks, routing and security.
        app.add_middleware(
            JsonCorsMiddleware,
            position=MiddlewarePosition.BEFORE_EXCEPTION,
            allow_origins=settings.cors_origins,
            allow_methods=CORS_METHODS,
            allow_headers=CORS_ALLOW_HEADERS,
            expose_headers=CORS_EXPOSE_HEADERS,
        )

    flask_app = app.app
    flask_app.config[SETTINGS_KEY] = settings

    @flask_app.before_request
    def _connect() -> None:
        # Probes answer whatever the database does: readyz checks it itself, healthz never needs it.
        if flask.request.path not in PROBES:
            flask.g.connecting = time.monotonic()
            models.check_out()

    if settings.redis_url and settings.webhook_relay_wake:
        nudger = wake.Nudger(settings.redis_url, settings.webhook_queue)

        @flask_app.after_request
        def _wake_relay(response: flask.Response) -> flask.Response:
            # Committed by now. A write that left no delivery waiting (no webhook subscribed) pushes nothing: the push
            # was 5 % of a small write's CPU (its thread woken, a Redis round trip), and woke a relay to find nothing.
            request = flask.request
            if (
                request.method in WRITES
                and response.status_code < 300
                and delivery_states.left_waiting()
                and not precognition.is_precognitive(request.headers)
            ):
                nudger.nudge()
            return response

    @flask_app.teardown_request
    def _release(exc: BaseException | None) -> None:
        # A query that waited out the TCP user timeout tells the breaker that the server went silent mid-request.
        models.give_back(exc, flask.g.get("connecting"))

    return app


@functools.lru_cache(maxsize=1)
def asgi() -> connexion.FlaskApp:
    """Return the app built from the environment (for `uvicorn riskapi.api.app:asgi --factory`)."""
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        raise SystemExit(f"riskapi: {exc}") from None
    return create_app(settings)
