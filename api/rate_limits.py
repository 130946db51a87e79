"""Per-token rate limits in Redis, shared by every API host (OWASP API4), answered as Laravel's throttle does.

A token may spend RISKAPI_RATE_LIMIT units a minute: a request costs 1, plus 1 per started 64 KiB of
its body, so a bulk write of a thousand objects weighs more than a read. The window is fixed and
starts with the token's first request (Laravel's decay of 60 s). Every response says the limit and
what is left (`X-RateLimit-Limit`, `X-RateLimit-Remaining`); past it, 429 with `Retry-After`.
When Redis does not answer, requests are let through (logged once a minute): a limiter that is down
must not take the API down with it. Nor slow it down: once Redis has failed to answer, it is known to be
away, and for AWAY seconds no request waits on it; then one request asks again while the others pass, and
the first answer puts the limits back (a silent Redis, cut off by the network, cost every request its
0.5 s timeout before: issue 36).

A round trip to Redis per request would cost a busy token more than its request's routing. So each
process leases units from the token's window in Redis and spends them locally, leasing again when they
are spent: as many as the token spent here in the last second, at most 1/25 of the limit. A token that
sends a request a second still takes one round trip per request, exactly counted; a busy one takes about
one a second. Leased units count as spent in Redis, so the limit is never passed, but a token may be
refused up to (processes - 1) leases short of it, and `X-RateLimit-Remaining` counts other processes'
unspent leases as spent. A lease lasts no longer than its window.
"""

import hashlib
import logging
import math
import time

import orjson
import redis.asyncio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import spec

log = logging.getLogger("riskapi")

WINDOW = 60
BODY_UNIT = 64 * 1024
# Never counted: the probes, the metrics, and what a browser or a reviewer reads without a token.
EXEMPT = (*(f"{spec.base_path()}/{name}" for name in ("healthz", "readyz", "openapi", "docs")), "/metrics")
# How long Redis, once it failed to answer, is known to be away: one request in this long asks it again.
AWAY = 5.0
# Leases outlive their windows by at most a minute; past this many tokens, the ended ones are dropped.
MOST_TOKENS = 10_000


def cost(content_length: bytes | None) -> int:
    """Return what a request spends: 1, plus 1 per started 64 KiB of its declared body."""
    size = int(content_length) if content_length and content_length.isdigit() else 0
    return 1 + (size + BODY_UNIT - 1) // BODY_UNIT


class _Lease:
    """A token's units leased by this process from its window in Redis, and its recent rate here."""

    __slots__ = ("left", "used", "ends", "second", "this_second", "last_second")

    def __init__(self) -> None:
        self.left = 0  # units leased and not yet spent
        self.used = 0  # units the window had used in Redis when last leased, this process's unspent included
        self.ends = 0.0  # monotonic end of the window the lease belongs to
        self.second, self.this_second, self.last_second = 0, 0, 0

    def rate(self, now: float) -> int:
        """Return the units spent here in the last whole second."""
        second = int(now)
        if second != self.second:
            self.last_second = self.this_second if second == self.second + 1 else 0
            self.second, self.this_second = second, 0
        return self.last_second


class RateLimitMiddleware:
    """Count each token's requests in Redis by leases; answer 429 past the limit; add the X-RateLimit headers."""

    def __init__(self, app: ASGIApp, redis_url: str, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.most_lease = limit // 25  # 0 under 25 units a minute: every request counted in Redis
        self.limit_header = (b"x-ratelimit-limit", str(limit).encode())
        self.redis = redis.asyncio.Redis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self.leases: dict[bytes, _Lease] = {}
        self._quiet_until = 0.0
        self._away_until = 0.0  # monotonic; 0: Redis answered last time

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(EXEMPT):
            await self.app(scope, receive, send)
            return
        authorization = content_length = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
            elif name == b"content-length":
                content_length = value
        if not authorization:
            await self.app(scope, receive, send)
            return
        units = cost(content_length)
        counted = await self._spend(authorization, units)
        if counted is None:
            await self.app(scope, receive, send)
            return
        remaining, reset = counted
        limits = [self.limit_header, (b"x-ratelimit-remaining", str(remaining).encode())]
        if reset is not None:
            retry = max(1, reset)
            limits += [(b"retry-after", str(retry).encode()), (b"x-ratelimit-reset", str(int(time.time()) + retry).encode())]
            await _too_many(send, limits)
            return

        async def send_with_limits(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *limits]
            await send(message)

        await self.app(scope, receive, send_with_limits)

    async def _spend(self, authorization: bytes, units: int) -> tuple[int, int | None] | None:
        """Spend units of the token's window: (units left, None), or (0, seconds until it resets) when refused.

        None without Redis and without a lease: the request passes uncounted.
        """
        now = time.monotonic()
        lease = self.leases.get(authorization)
        if lease is None or lease.ends <= now:
            lease = self._fresh(authorization, now)
        if lease.left < units:
            if lease.used >= self.limit and lease.ends > now:  # this window is spent: no need to ask again
                return 0, max(1, math.ceil(lease.ends - now))
            wanted = units - lease.left + min(self.most_lease, max(0, lease.rate(now) - units))
            leased = await self._lease(authorization, wanted)
            if leased is None:
                return None
            used, ttl = leased
            now = time.monotonic()
            lease.ends = min(lease.ends, now + ttl) if lease.ends > now else now + ttl
            # Of what was just counted, only what fits under the limit is this process's to spend.
            lease.left += max(0, min(wanted, self.limit - (used - wanted)))
            lease.used = max(lease.used, used)
            if lease.left < units:
                return 0, max(1, math.ceil(ttl))
        lease.left -= units
        lease.rate(now)
        lease.this_second += units
        return max(0, self.limit - (lease.used - lease.left)), None

    def _fresh(self, authorization: bytes, now: float) -> _Lease:
        if len(self.leases) >= MOST_TOKENS:
            self.leases = {key: lease for key, lease in self.leases.items() if lease.ends > now}
            if len(self.leases) >= MOST_TOKENS:
                self.leases.clear()  # drops unspent units: conservative, never lets a token past its limit
        lease = self.leases.get(authorization)
        if lease is None:
            lease = self.leases[authorization] = _Lease()
        lease.left, lease.used, lease.ends = 0, 0, 0.0
        return lease

    async def _lease(self, authorization: bytes, units: int) -> tuple[int, float] | None:
        """Add units to the token's window; return (units used in it, seconds until it resets), or None without Redis."""
        # The key is a digest of the header as sent: no token is stored, and bad tokens are limited too.
        key = "riskapi:rate:" + hashlib.sha256(authorization).hexdigest()[:32]
        if self._away_until:
            now = time.monotonic()
            if now < self._away_until:
                return None
            self._away_until = now + AWAY  # this request asks; the others meanwhile do not wait on it
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.set(key, 0, ex=WINDOW, nx=True)
                pipe.incrby(key, units)
                pipe.pttl(key)
                _, used, pttl = await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            now = time.monotonic()
            self._away_until = now + AWAY
            if now >= self._quiet_until:
                self._quiet_until = now + 60
                log.warning("rate limits off while Redis does not answer: %s", type(exc).__name__)
            return None
        self._away_until = 0.0
        return used, pttl / 1000 if pttl > 0 else WINDOW


async def _too_many(send: Send, headers: list[tuple[bytes, bytes]]) -> None:
    # Sent from here, outside Connexion's error handling, so that every response of the API (its
    # errors included) passes this middleware and carries the X-RateLimit headers.
    body = orjson.dumps({"message": "Too many requests.", "status": 429})
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": 429, "headers": raw})
    await send({"type": "http.response.body", "body": body})
