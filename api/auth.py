"""Bearer-token authentication: a token names one agency."""

import functools
import inspect
import threading

import cachetools

import spec
from models import connection, utcnow
from models.tenancy import Token

# A short in-process cache saves a query per request. It bounds how long a revoked token still
# works on a host that saw it just before: TTL seconds, on every host (documented in docs/operations.md, "Tokens").
TTL = 5.0
# last_used is written at most this often per token and process: a write per request would cost more than the request.
TOUCH_EVERY = 60.0
# token -> (agency id, the token's own expiry or None).
_cache: cachetools.TTLCache = cachetools.TTLCache(maxsize=10000, ttl=TTL)
# Ids of the tokens whose last_used this process wrote within TOUCH_EVERY seconds.
_touched: cachetools.TTLCache = cachetools.TTLCache(maxsize=10000, ttl=TOUCH_EVERY)
# TTLCache is not thread-safe, and even a lookup may evict expired entries.
_lock = threading.Lock()


def token_info(token: str) -> dict[str, int] | None:
    """Return the token's claims ({"sub": agency id}) or None when unknown, revoked or expired."""
    if not token or len(token) > 200:
        return None
    with _lock:
        hit = _cache.get(token)
    if hit and (hit[1] is None or hit[1] > utcnow()):
        return {"sub": hit[0]}
    with connection():
        row = Token.valid(token)
        if row is None:
            return None
        token_id, agency_id, expires = row
        with _lock:
            touch = token_id not in _touched
        if touch:
            Token.touch(token_id)
            with _lock:
                _touched[token_id] = True
    with _lock:
        _cache[token] = (agency_id, expires)
    return {"sub": agency_id}


# Connexion's security check reads the function's signature on every request (whether it takes `required_scopes`):
# a signature it finds ready is read at once.
token_info.__signature__ = inspect.signature(token_info)  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=1)
def _token_form() -> str:
    """Return how the spec shows a token (its bearer scheme's `bearerFormat`, `rk_...`)."""
    schemes = spec.raw()["components"]["securitySchemes"].values()
    return next(scheme["bearerFormat"] for scheme in schemes if scheme.get("scheme") == "bearer")


def expected_form() -> str:
    """Return the form of an Authorization header, for a 401 to show: `Bearer rk_...`."""
    return f"Bearer {_token_form()}"


def malformed(header: str | None) -> bool:
    """Tell whether an Authorization header is there but not `Bearer <token>` with a token of the issued form.

    Another scheme, no token, a space inside it, or a token without the issued prefix (`rk_`, the spec's
    bearerFormat before its `...`). Only what a 401 says depends on it: every token is still looked up.
    """
    if header is None or not header.strip():
        return False
    parts = header.split(maxsplit=1)  # as Connexion reads it: the scheme, then the rest
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return True
    token = parts[1].strip()
    return any(c.isspace() for c in token) or not token.startswith(_token_form().removesuffix("..."))
