"""Bearer-token authentication: a token names one agency."""

import threading
import time

from models import live_connection
from models.tenancy import Token

# Tokens are never re-assigned, so a short in-process cache is safe and saves a query per request.
_TTL = 30.0
_cache: dict = {}
_lock = threading.Lock()


def token_info(token: str):
    """Return the token's claims ({"sub": agency id}) or None when unknown."""
    if not token or len(token) > 200:
        return None
    now = time.monotonic()
    hit = _cache.get(token)
    if hit and hit[1] > now:
        return {"sub": hit[0]}
    with live_connection():
        agency_id = Token.agency_of(token)
    if agency_id is None:
        return None
    with _lock:
        if len(_cache) > 10000:
            _cache.clear()
        _cache[token] = (agency_id, now + _TTL)
    return {"sub": agency_id}
