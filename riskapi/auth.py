"""Bearer-token authentication: a token names one agency."""

import threading
import time

from models import live_connection, utcnow
from models.tenancy import Token

# A short in-process cache saves a query per request. It bounds how long a revoked token still
# works on a host that saw it just before: TTL seconds, on every host (documented in the README).
TTL = 5.0
# last_used is written at most this often per token and process: a write per request would cost more than the request.
TOUCH_EVERY = 60.0
_cache: dict = {}
_touched: dict = {}
_lock = threading.Lock()


def token_info(token: str):
    """Return the token's claims ({"sub": agency id}) or None when unknown, revoked or expired."""
    if not token or len(token) > 200:
        return None
    now = time.monotonic()
    hit = _cache.get(token)
    if hit and hit[1] > now and (hit[2] is None or hit[2] > utcnow()):
        return {"sub": hit[0]}
    with live_connection():
        row = Token.valid(token)
        if row is None:
            return None
        token_id, agency_id, expires = row
        if now - _touched.get(token_id, -TOUCH_EVERY) >= TOUCH_EVERY:
            Token.touch(token_id)
            _touched[token_id] = now
    with _lock:
        if len(_cache) > 10000:
            _cache.clear()
            _touched.clear()
        _cache[token] = (agency_id, now + TTL, expires)
    return {"sub": agency_id}
