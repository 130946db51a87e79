"""Per-token rate limits in Redis, shared by every API host (OWASP API4), answered as Laravel's throttle does.

A token may spend RISKAPI_RATE_LIMIT units a minute: a request costs 1, plus 1 per started 64 KiB of
its body, so a bulk write of a thousand objects weighs more than a read. The window is fixed and
starts with the token's first request (Laravel's decay of 60 s). Every response says the limit and
what is left (`X-RateLimit-Limit`, `X-RateLimit-Remaining`); past it, 429 with `Retry-After`.
When Redis does not answer, requests are let through (logged once a minute): a limiter that is down
must not take the API down with it.
"""

import hashlib
import logging
import time

import orjson
import redis.asyncio
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import spec

log = logging.getLogger("riskapi")

WINDOW = 60
BODY_UNIT = 64 * 1024
# Never counted: the probes, the metrics, and what a browser or a reviewer reads without a token.
EXEMPT = (*(f"{spec.base_path()}/{name}" for name in ("healthz", "readyz", "openapi", "docs")), "/metrics")


def cost(headers: Headers) -> int:
    """Return what a request spends: 1, plus 1 per started 64 KiB of its declared body."""
    length = headers.get("content-length", "0")
    size = int(length) if length.isdigit() else 0
    return 1 + (size + BODY_UNIT - 1) // BODY_UNIT


class RateLimitMiddleware:
    """Count each token's requests in Redis; answer 429 past the limit; add the X-RateLimit headers."""

    def __init__(self, app: ASGIApp, redis_url: str, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.redis = redis.asyncio.Redis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self._quiet_until = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        authorization = headers.get("authorization")
        if scope["type"] != "http" or not authorization or scope["path"].startswith(EXEMPT):
            await self.app(scope, receive, send)
            return
        counted = await self._spend(authorization, cost(headers))
        if counted is None:
            await self.app(scope, receive, send)
            return
        used, reset = counted
        remaining = max(0, self.limit - used)
        limits = {"X-RateLimit-Limit": str(self.limit), "X-RateLimit-Remaining": str(remaining)}
        if used > self.limit:
            retry = max(1, reset)
            extra = {"Retry-After": str(retry), "X-RateLimit-Reset": str(int(time.time()) + retry)}
            await _too_many(send, {**limits, **extra})
            return

        async def send_with_limits(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(limits)
            await send(message)

        await self.app(scope, receive, send_with_limits)

    async def _spend(self, authorization: str, units: int) -> tuple[int, int] | None:
        """Add units to the token's window; return (units used in it, seconds until it resets), or None without Redis."""
        # The key is a digest of the header as sent: no token is stored, and bad tokens are limited too.
        key = "riskapi:rate:" + hashlib.sha256(authorization.encode("latin-1", "replace")).hexdigest()[:32]
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.set(key, 0, ex=WINDOW, nx=True)
                pipe.incrby(key, units)
                pipe.ttl(key)
                _, used, ttl = await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            now = time.monotonic()
            if now >= self._quiet_until:
                self._quiet_until = now + 60
                log.warning("rate limits off while Redis does not answer: %s", type(exc).__name__)
            return None
        return used, ttl if ttl > 0 else WINDOW


async def _too_many(send: Send, headers: dict[str, str]) -> None:
    # Sent from here, outside Connexion's error handling, so that every response of the API (its
    # errors included) passes this middleware and carries the X-RateLimit headers.
    body = orjson.dumps({"message": "Too many requests.", "status": 429})
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    await send({"type": "http.response.start", "status": 429, "headers": raw})
    await send({"type": "http.response.body", "body": body})
