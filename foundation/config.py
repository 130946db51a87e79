"""Settings, read from the environment once, typed, with defaults."""

import builtins
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Where the app factory keeps its Settings in Flask's app config, for the handlers to read.
SETTINGS_KEY = "RISKAPI"


class SettingsError(ValueError):
    """Raised when an environment variable holds a value its setting cannot take."""


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


class _Reader:
    """Read typed values from an environment; a malformed one raises SettingsError naming its variable."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def _parse(self, name: str, default: Any, parse: Callable[[str], Any], expected: str, minimum: Any = None) -> Any:
        raw = self.env.get(name)
        if raw is None:
            return default
        try:
            value = parse(raw.strip())
        except ValueError:
            raise SettingsError(f"{name}={raw!r} is not {expected}") from None
        if minimum is not None and value < minimum:
            raise SettingsError(f"{name}={raw!r} is below its minimum, {minimum}")
        return value

    def int(self, name: str, default: int, minimum: int = 0) -> int:
        return self._parse(name, default, int, "a whole number", minimum)

    def float(self, name: str, default: float, minimum: float = 0.0) -> float:
        return self._parse(name, default, _finite, "a number of seconds", minimum)

    # After the method named float, the class body's `float` is that method: the number type is builtins'.
    def rate(self, name: str, default: builtins.float) -> builtins.float:
        return self._parse(name, default, _finite, "a number per second", 0.0)

    def bool(self, name: str, default: bool) -> bool:
        return self._parse(name, default, _boolean, "a boolean (1/0, true/false, yes/no, on/off)")

    def delays(self, name: str, default: tuple[builtins.float, ...]) -> tuple[builtins.float, ...]:
        parse = lambda raw: tuple(_finite(p) for p in raw.split(",") if p.strip())  # noqa: E731
        value = self._parse(name, default, parse, "comma-separated numbers of seconds")
        if any(delay < 0 for delay in value):
            raise SettingsError(f"{name}={self.env.get(name)!r} has a negative delay")
        return value


def _finite(raw: str) -> float:
    value = float(raw)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(raw)
    return value


def _boolean(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in _TRUE or lowered in _FALSE:
        return lowered in _TRUE
    raise ValueError(raw)


def _origins(value: str) -> tuple[str, ...]:
    # An origin is scheme://host[:port]; a trailing slash would never match the browser's Origin header.
    return tuple(part.strip().rstrip("/") for part in value.split(",") if part.strip())


@dataclass(frozen=True)
class Settings:
    """Runtime settings of the service; secrets are never part of repr()."""

    database_url: str = "sqlite:///riskapi.db"
    redis_url: str = ""
    secret_key: str = field(default="", repr=False)
    max_body_bytes: int = 10 * 1024 * 1024
    validate_responses: bool = False
    threads: int = 8  # 8 beat 4 and 12 in bench.soak (bench/README.md, issue 24's third pass)
    write_delay: float = 0.0  # seconds a write may be overtaken by later reads (api.handler_threads)
    webhook_timeout: float = 5.0
    webhook_retry_delays: tuple[float, ...] = (10.0, 100.0, 1000.0)
    webhook_allow_private: bool = False
    webhook_ca_bundle: str = ""
    webhook_failure_limit: int = 5
    default_webhook_limit: int = 10
    webhook_queue: str = "webhooks"
    webhook_stale_after: float = 30.0
    webhook_relay_interval: float = 0.05
    webhook_relay_wake: bool = True
    webhook_worker_threads: int = 4
    worker_nice: int = 0
    webhook_in_flight: int = 256
    webhook_per_webhook: int = 4
    webhook_slow_for: float = 60.0
    webhook_max_rate: float = 100.0
    webhook_rotation_grace: float = 86400.0
    cors_origins: tuple[str, ...] = ()
    log_format: str = "text"
    rate_limit: int = 600
    retention_days: int = 30
    idempotency_key_ttl: float = 86400.0  # seconds an Idempotency-Key and its stored answer are kept
    metrics: bool = True
    metrics_token: str = field(default="", repr=False)
    metrics_port: int = 0
    access_log: bool = True

    @staticmethod
    def read_env(environ: Mapping[str, str] | None = None) -> _Reader:
        """Return a reader of typed values from the environment (for settings that are not fields)."""
        return _Reader(os.environ if environ is None else environ)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """Build settings from environment variables."""
        env = os.environ if environ is None else environ
        read = _Reader(env)
        return cls(
            database_url=env.get("DATABASE_URL", cls.database_url),
            redis_url=env.get("REDIS_URL", ""),
            secret_key=env.get("RISKAPI_SECRET_KEY", ""),
            max_body_bytes=read.int("RISKAPI_MAX_BODY_BYTES", cls.max_body_bytes, minimum=1),
            validate_responses=read.bool("RISKAPI_VALIDATE_RESPONSES", False),
            threads=read.int("RISKAPI_THREADS", cls.threads, minimum=1),
            write_delay=read.int("RISKAPI_WRITE_DELAY_MS", round(cls.write_delay * 1000), minimum=0) / 1000,
            webhook_timeout=read.float("RISKAPI_WEBHOOK_TIMEOUT", cls.webhook_timeout, minimum=0.1),
            webhook_retry_delays=read.delays("RISKAPI_WEBHOOK_RETRY_DELAYS", cls.webhook_retry_delays),
            webhook_allow_private=read.bool("RISKAPI_WEBHOOK_ALLOW_PRIVATE", False),
            webhook_ca_bundle=env.get("RISKAPI_WEBHOOK_CA_BUNDLE", ""),
            webhook_failure_limit=read.int("RISKAPI_WEBHOOK_FAILURE_LIMIT", cls.webhook_failure_limit),
            default_webhook_limit=read.int("RISKAPI_DEFAULT_WEBHOOK_LIMIT", cls.default_webhook_limit),
            webhook_queue=env.get("RISKAPI_WEBHOOK_QUEUE", cls.webhook_queue),
            webhook_stale_after=read.float("RISKAPI_WEBHOOK_STALE_AFTER", cls.webhook_stale_after),
            webhook_relay_interval=read.float("RISKAPI_WEBHOOK_RELAY_INTERVAL", cls.webhook_relay_interval),
            webhook_relay_wake=read.bool("RISKAPI_WEBHOOK_RELAY_WAKE", cls.webhook_relay_wake),
            webhook_worker_threads=read.int("RISKAPI_WEBHOOK_WORKER_THREADS", cls.webhook_worker_threads, minimum=1),
            worker_nice=read.int("RISKAPI_WORKER_NICE", cls.worker_nice),
            webhook_in_flight=read.int("RISKAPI_WEBHOOK_IN_FLIGHT", cls.webhook_in_flight),
            webhook_per_webhook=read.int("RISKAPI_WEBHOOK_PER_WEBHOOK", cls.webhook_per_webhook),
            webhook_slow_for=read.float("RISKAPI_WEBHOOK_SLOW_FOR", cls.webhook_slow_for),
            webhook_max_rate=read.rate("RISKAPI_WEBHOOK_MAX_RATE", cls.webhook_max_rate),
            webhook_rotation_grace=read.float("RISKAPI_WEBHOOK_ROTATION_GRACE", cls.webhook_rotation_grace),
            cors_origins=_origins(env.get("RISKAPI_CORS_ORIGINS", "")),
            log_format=env.get("RISKAPI_LOG_FORMAT", cls.log_format).strip().lower(),
            rate_limit=read.int("RISKAPI_RATE_LIMIT", cls.rate_limit),
            retention_days=read.int("RISKAPI_RETENTION_DAYS", cls.retention_days),
            idempotency_key_ttl=read.float("RISKAPI_IDEMPOTENCY_KEY_TTL", cls.idempotency_key_ttl, minimum=1.0),
            metrics=read.bool("RISKAPI_METRICS", True),
            metrics_token=env.get("RISKAPI_METRICS_TOKEN", ""),
            metrics_port=read.int("RISKAPI_METRICS_PORT", cls.metrics_port),
            access_log=read.bool("RISKAPI_ACCESS_LOG", True),
        )
