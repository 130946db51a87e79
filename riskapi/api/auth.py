"""Bearer-token authentication: a token names one agency."""

import threading

import cachetools

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
