"""Settings, read from the environment once, typed, with defaults."""

import os
from dataclasses import dataclass, field


def _bool(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _delays(value: str) -> tuple[float, ...]:
    return tuple(float(part) for part in value.split(",") if part.strip())


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
    threads: int = 2
    webhook_timeout: float = 5.0
    webhook_retry_delays: tuple[float, ...] = (10.0, 100.0, 1000.0)
    webhook_allow_private: bool = False
    webhook_ca_bundle: str = ""
    webhook_failure_limit: int = 5
    default_webhook_limit: int = 10
    webhook_queue: str = "webhooks"
    webhook_stale_after: float = 30.0
    webhook_relay_interval: float = 0.05
    webhook_worker_threads: int = 4
    webhook_in_flight: int = 256
    webhook_per_webhook: int = 4
    webhook_slow_for: float = 60.0
    webhook_rotation_grace: float = 86400.0
    cors_origins: tuple[str, ...] = ()
    log_format: str = "text"
    access_log: bool = True

    @classmethod
    def from_env(cls, environ=None) -> "Settings":
        """Build settings from environment variables."""
        env = os.environ if environ is None else environ
        return cls(
            database_url=env.get("DATABASE_URL", cls.database_url),
            redis_url=env.get("REDIS_URL", ""),
            secret_key=env.get("RISKAPI_SECRET_KEY", ""),
            max_body_bytes=int(env.get("RISKAPI_MAX_BODY_BYTES", cls.max_body_bytes)),
            validate_responses=_bool(env.get("RISKAPI_VALIDATE_RESPONSES", "0")),
            threads=int(env.get("RISKAPI_THREADS", cls.threads)),
            webhook_timeout=float(env.get("RISKAPI_WEBHOOK_TIMEOUT", cls.webhook_timeout)),
            webhook_retry_delays=_delays(env.get("RISKAPI_WEBHOOK_RETRY_DELAYS", "10,100,1000")),
            webhook_allow_private=_bool(env.get("RISKAPI_WEBHOOK_ALLOW_PRIVATE", "0")),
            webhook_ca_bundle=env.get("RISKAPI_WEBHOOK_CA_BUNDLE", ""),
            webhook_failure_limit=int(env.get("RISKAPI_WEBHOOK_FAILURE_LIMIT", cls.webhook_failure_limit)),
            default_webhook_limit=int(env.get("RISKAPI_DEFAULT_WEBHOOK_LIMIT", cls.default_webhook_limit)),
            webhook_queue=env.get("RISKAPI_WEBHOOK_QUEUE", cls.webhook_queue),
            webhook_stale_after=float(env.get("RISKAPI_WEBHOOK_STALE_AFTER", cls.webhook_stale_after)),
            webhook_relay_interval=float(env.get("RISKAPI_WEBHOOK_RELAY_INTERVAL", cls.webhook_relay_interval)),
            webhook_worker_threads=int(env.get("RISKAPI_WEBHOOK_WORKER_THREADS", cls.webhook_worker_threads)),
            webhook_in_flight=int(env.get("RISKAPI_WEBHOOK_IN_FLIGHT", cls.webhook_in_flight)),
            webhook_per_webhook=int(env.get("RISKAPI_WEBHOOK_PER_WEBHOOK", cls.webhook_per_webhook)),
            webhook_slow_for=float(env.get("RISKAPI_WEBHOOK_SLOW_FOR", cls.webhook_slow_for)),
            webhook_rotation_grace=float(env.get("RISKAPI_WEBHOOK_ROTATION_GRACE", cls.webhook_rotation_grace)),
            cors_origins=_origins(env.get("RISKAPI_CORS_ORIGINS", "")),
            log_format=env.get("RISKAPI_LOG_FORMAT", cls.log_format).strip().lower(),
            access_log=_bool(env.get("RISKAPI_ACCESS_LOG", "1")),
        )
