"""Liveness and readiness probes: no token, no tenant, answered even while a dependency is down."""

import functools

import flask
import redis

import models
from handlers import common, settings

# A probe must answer within the prober's timeout (often 1-2 s), even when a dependency hangs.
PROBE_TIMEOUT = 1.0
# Not ready: ask again in a second, as the API's 503 for a database away does (spec: readyz's 503).
RETRY_AFTER = "1"


def healthz() -> flask.Response:
    """Answer that the process is alive."""
    return common.respond(200, {"status": "ok"})


def readyz() -> flask.Response:
    """Answer whether the database and Redis answer, naming the one that does not."""
    checks = {"database": _database(), "redis": _redis(settings().redis_url)}
    failed = [name for name, state in checks.items() if state == "down"]
    if failed:
        response = common.respond(503, {"message": f"Not ready: {', '.join(failed)}.", "status": 503, "checks": checks})
        response.headers["Retry-After"] = RETRY_AFTER
        return response
    return common.respond(200, {"status": "ok", "checks": checks})


def _database() -> str:
    return "ok" if models.answers() else "down"


@functools.cache
def _client(url: str) -> redis.Redis:
    # One pool per process and URL: probes come every few seconds and must not open a connection each time.
    return redis.Redis.from_url(url, socket_timeout=PROBE_TIMEOUT, socket_connect_timeout=PROBE_TIMEOUT)


def _redis(url: str) -> str:
    if not url:
        return "unconfigured"
    try:
        _client(url).ping()
    except (redis.RedisError, OSError):
        return "down"
    return "ok"
