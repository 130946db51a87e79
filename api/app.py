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
from api import access_log, precognition
from api import error_handlers as errors
from api.docs import SpecMiddleware
from api.flask_bridge import WsgiBridge
from api.handler_threads import HandlerThreads
from api.metrics import MetricsMiddleware
from api.middleware import BodyMiddleware, HeadersMiddleware, JsonCorsMiddleware, RoutedOnlyMiddleware
from api.rate_limits import RateLimitMiddleware
from api.request_validation import BodyValidator, ParamValidator, URIParser
from api.routing import resolve
from foundation.config import SETTINGS_KEY, Settings, SettingsError
from models import delivery_states
from services.listen_stream import ListenStreamMiddleware
from spec import SPEC_PATH
from webhooks import wakeups as wake

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
    # The last middleware runs Flask in handler threads (api.flask_bridge), where Connexion runs a2wsgi's pool.
    bridge = functools.partial(WsgiBridge, threads=HandlerThreads(settings.threads, settings.write_delay))
    app = connexion.FlaskApp(
        __name__, specification_dir=str(SPEC_PATH.parent), middlewares=[*ConnexionMiddleware.default_middlewares, bridge]
    )
    app.add_api(
        SPEC_PATH.name,
        resolver=connexion.resolver.Resolver(function_resolver=resolve),
        pythonic_params=True,
        validator_map=validators(),
        uri_parser_class=URIParser,
        validate_responses=settings.validate_responses,
        swagger_ui_options=connexion.options.SwaggerUIOptions(swagger_ui_path="/docs"),
    )
    errors.register(app)
    for middleware, position, options in middlewares(settings):
        app.add_middleware(middleware, position=position, **options)
    if settings.access_log:
        access_log.configure(settings.log_format)
    app.app.config[SETTINGS_KEY] = settings
    register_hooks(app.app, settings)
    return app


def validators() -> dict:
    """Return Connexion's validator_map: every error at once, in Laravel's keys (api.request_validation)."""
    body = {
        "*/*json": BodyValidator,
        "application/x-www-form-urlencoded": FormDataValidator,
        "multipart/form-data": MultiPartFormDataValidator,
    }
    return {"body": MediaTypeDict(body), "parameter": ParamValidator.once_per_operation()}


def middlewares(settings: Settings) -> list[tuple[type, MiddlewarePosition, dict]]:
    """Return the service's own middlewares, each with its place among Connexion's and its options, in the order added."""
    first = MiddlewarePosition.BEFORE_EXCEPTION
    added: list[tuple[type, MiddlewarePosition, dict]] = [
        (HeadersMiddleware, first, {}),
        (BodyMiddleware, MiddlewarePosition.BEFORE_ROUTING, {"max_body_bytes": settings.max_body_bytes}),
        (RoutedOnlyMiddleware, MiddlewarePosition.BEFORE_SECURITY, {}),
        (SpecMiddleware, MiddlewarePosition.BEFORE_SWAGGER, {}),
        # Routed, authenticated and validated by then; answered in the event loop, not by a handler thread.
        (ListenStreamMiddleware, MiddlewarePosition.BEFORE_CONTEXT, {}),
    ]
    if settings.rate_limit and settings.redis_url:
        # Outside the error handling: a 429 costs nothing more, and every error carries the limit headers.
        added.append((RateLimitMiddleware, first, {"redis_url": settings.redis_url, "limit": settings.rate_limit}))
    added.append((access_log.AccessLogMiddleware, first, {"metrics": settings.metrics}))
    if settings.metrics:
        added.append((MetricsMiddleware, first, {"settings": settings}))
    if settings.cors_origins:
        # Outside the ExceptionMiddleware: error responses (401, 404, 422, 503...) carry the CORS
        # headers too, and preflights are answered before the body checks, routing and security.
        cors = {"allow_methods": CORS_METHODS, "allow_headers": CORS_ALLOW_HEADERS, "expose_headers": CORS_EXPOSE_HEADERS}
        added.append((JsonCorsMiddleware, first, {"allow_origins": settings.cors_origins, **cors}))
    return added


def register_hooks(app: flask.Flask, settings: Settings) -> None:
    """Install what Flask does around each handler call: the request's database connection, the relay's wake-up."""

    @app.before_request
    def _connect() -> None:
        # Probes answer whatever the database does: readyz checks it itself, healthz never needs it.
        if flask.request.path not in PROBES:
            flask.g.connecting = time.monotonic()
            models.check_out()

    if settings.redis_url and settings.webhook_relay_wake:
        nudger = wake.Nudger(settings.redis_url, settings.webhook_queue)

        @app.after_request
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

    @app.teardown_request
    def _release(exc: BaseException | None) -> None:
        # A query that waited out the TCP user timeout tells the breaker that the server went silent mid-request.
        models.give_back(exc, flask.g.get("connecting"))


@functools.lru_cache(maxsize=1)
def asgi() -> connexion.FlaskApp:
    """Return the app built from the environment (for `uvicorn api.app:asgi --factory`)."""
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        raise SystemExit(f"riskapi: {exc}") from None
    return create_app(settings)
