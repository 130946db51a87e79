"""Signing of webhook payloads: the service's own `Service-Signature` and Standard Webhooks' `webhook-signature`.

Both are HMAC-SHA256 over the exact raw body bytes that go on the wire, so receivers must verify
before parsing or re-serialising the JSON.

* `Service-Signature` (`sign`, `verify`): the lowercase hex HMAC of the body, keyed by the UTF-8
  bytes of the secret string as shown (`whsec_...`, prefix included).
* `webhook-signature` (`sign_standard`, `standard_signatures`), per https://www.standardwebhooks.com:
  `v1,` + the base64 HMAC of `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the base64-decoded
  part of the secret after `whsec_` (`standard_key`); several space-separated during a rotation.

Secrets are `whsec_` + standard, padded base64 of 32 random bytes, which is what the official
Standard Webhooks libraries decode. Secrets made before that were `whsec_` + unpadded base64url of
32 random bytes: their Standard Webhooks key is the same 32 bytes (`standard_key` reads both
alphabets), and `standard_secret` spells it the way the libraries want.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
import secrets
from collections.abc import Iterable

__all__ = [
    "SECRET_PREFIX",
    "generate_secret",
    "sign",
    "sign_standard",
    "standard_key",
    "standard_secret",
    "standard_signatures",
    "verify",
]

SECRET_PREFIX = "whsec_"

# 32 random bytes = 256 bits, matching the HMAC-SHA256 block of security.
_SECRET_BYTES = 32

# base64url (the encoding of secrets made before Standard Webhooks) differs from base64 only here.
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")


def generate_secret() -> str:
    """Return a new random signing secret with 256 bits of entropy: `whsec_` + base64 (padded) of 32 bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(_SECRET_BYTES)).decode("ascii")


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
    return hmac.digest(secret.encode("utf-8"), body, "sha256").hex()


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


# A worker signs every attempt with its webhook's one or two secrets: decode each once, not per attempt.
@functools.lru_cache(maxsize=1024)
def standard_key(secret: str) -> bytes:
    """Return the Standard Webhooks HMAC key of a `whsec_` secret: the base64-decoded part after the prefix.

    Both base64 alphabets are read (base64url for secrets made before Standard Webhooks), padding
    optional. Raises ValueError for anything else.
    """
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a signing secret starts with {SECRET_PREFIX}")
    encoded = secret[len(SECRET_PREFIX) :].rstrip("=").translate(_URLSAFE_TO_STANDARD)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the part of a signing secret after whsec_ must be base64") from None
    if not key:
        raise ValueError("secret must not be empty")
    return key


def standard_secret(secret: str) -> str:
    """Return secret as the official Standard Webhooks libraries want it (standard, padded base64).

    A secret made today comes back unchanged; one made before (base64url) comes back re-spelt,
    with the same key. Service-Signature stays keyed by the secret as shown, never by this.
    """
    return SECRET_PREFIX + base64.b64encode(standard_key(secret)).decode("ascii")


def sign_standard(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """Return `v1,<base64 HMAC-SHA256 of "{msg_id}.{timestamp}.{body}">` keyed by standard_key(secret)."""
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError(f"body must be bytes, not {type(body).__name__}")
    # One call into OpenSSL (hmac.digest) costs a third of an hmac.new object fed twice; the copy of body is cheaper.
    signed = b"".join((f"{msg_id}.{int(timestamp)}.".encode(), body))
    return "v1," + base64.b64encode(hmac.digest(standard_key(secret), signed, "sha256")).decode("ascii")


def standard_signatures(secrets_: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """Return the `webhook-signature` value: one `v1,` signature per secret, space-separated, in order."""
    return " ".join(sign_standard(secret, msg_id, timestamp, body) for secret in secrets_)
