"""HMAC-SHA256 signing of webhook payloads.

The signature is computed over the exact raw body bytes that go on the wire,
so receivers must verify before parsing or re-serialising the JSON.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["SECRET_PREFIX", "generate_secret", "sign", "verify"]

SECRET_PREFIX = "whsec_"

# 32 random bytes = 256 bits, matching the HMAC-SHA256 block of security.
_SECRET_BYTES = 32


def generate_secret() -> str:
    """Return a new random signing secret with 256 bits of entropy."""
    return SECRET_PREFIX + secrets.token_urlsafe(_SECRET_BYTES)


def sign(secret: str, body: bytes) -> str:
    """Return the lowercase hex HMAC-SHA256 of body keyed by secret."""
    if not isinstance(secret, str):
        raise TypeError(f"secret must be str, not {type(secret).__name__}")
    if not secret:
        # An empty key would make every signature forgeable by anyone.
        raise ValueError("secret must not be empty")
    if not isinstance(body, (bytes, bytearray, memoryview)):
        # Signing a str would hide an encoding choice the receiver can't see.
        raise TypeError(f"body must be bytes, not {type(body).__name__}")
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str) -> bool:
    """Return True if signature is the valid signature of body under secret."""
    # Verification sits on an untrusted input path, so any malformed
    # argument is simply "not valid" rather than an exception.
    if not isinstance(signature, str):
        return False
    try:
        expected = sign(secret, body)
    except (TypeError, ValueError):
        return False
    # Encoding first keeps compare_digest happy with non-ASCII garbage; hex
    # is case-insensitive, so accept uppercase digests too.
    provided = signature.strip().lower().encode("utf-8", "replace")
    return hmac.compare_digest(expected.encode("ascii"), provided)
