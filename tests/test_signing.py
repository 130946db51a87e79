"""Tests for jobs.signing, including a signed delivery through a real receiver."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from jobs.signing import SECRET_PREFIX, generate_secret, sign, verify
from jobs.transport import post
from tests.receiver import Receiver

BODY = b'{"event":"risk.updated","id":42}'


def test_sign_matches_known_hmac_sha256_vector():
    """Signature is plain hex HMAC-SHA256, so any receiver can reimplement it."""
    digest = sign("key", b"The quick brown fox jumps over the lazy dog")
    assert digest == "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"


def test_sign_is_lowercase_hex_of_raw_bytes():
    """Non-ASCII secrets are keyed as UTF-8 and the body is signed byte for byte."""
    secret, body = "sécret", b"\x00\xff raw \r\n bytes"
    expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    assert sign(secret, body) == expected
    assert sign(secret, bytearray(body)) == expected


def test_correct_signature_verifies():
    """A signature made by sign() verifies, in either hex case."""
    secret = generate_secret()
    signature = sign(secret, BODY)
    assert verify(secret, BODY, signature)
    assert verify(secret, BODY, signature.upper())


@pytest.mark.parametrize(
    "body",
    [BODY + b" ", BODY[:-1], BODY.replace(b"42", b"43"), b""],
)
def test_tampered_body_fails(body):
    """Any change to the body, even whitespace, invalidates the signature."""
    secret = generate_secret()
    assert not verify(secret, body, sign(secret, BODY))


def test_wrong_secret_fails():
    """A signature made with another secret does not verify."""
    assert not verify(generate_secret(), BODY, sign(generate_secret(), BODY))


@pytest.mark.parametrize(
    "signature",
    ["", "zz", "0" * 64, "é" * 64, "\ud800" * 64, None, 123, b"abc", ["x"]],
)
def test_garbage_signature_returns_false(signature):
    """Malformed signatures are rejected without raising."""
    assert verify("secret", BODY, signature) is False


@pytest.mark.parametrize(
    ("secret", "body"), [(None, BODY), ("", BODY), (b"s", BODY), ("s", "text")]
)
def test_garbage_secret_or_body_returns_false(secret, body):
    """verify() never raises, whatever it is handed."""
    assert verify(secret, body, "0" * 64) is False


def test_sign_rejects_empty_secret_and_text_body():
    """Signing with an empty key or an un-encoded str is a programming error."""
    with pytest.raises(ValueError):
        sign("", BODY)
    with pytest.raises(TypeError):
        sign("secret", "not bytes")


def test_generate_secret_has_enough_entropy():
    """Secrets carry at least 32 random bytes and never repeat."""
    secrets_ = {generate_secret() for _ in range(100)}
    assert len(secrets_) == 100
    for secret in secrets_:
        assert secret.startswith(SECRET_PREFIX)
        # token_urlsafe encodes 32 bytes as 43 base64url characters.
        assert len(secret) - len(SECRET_PREFIX) >= 43


def test_signed_delivery_verifies_at_receiver():
    """The receiver can verify the exact bytes and header that went over the wire."""
    secret = generate_secret()
    with Receiver() as rx:
        result = post(
            rx.url,
            BODY,
            {
                "Content-Type": "application/json",
                "Webhook-Signature": sign(secret, BODY),
            },
            allow_private=True,
            ca_bundle=rx.ca_path,
        )
        assert result.ok, result
        assert rx.wait_for(1)
        _, headers, body, _ = rx.requests[0]
    assert verify(secret, body, headers["webhook-signature"])
    assert not verify(generate_secret(), body, headers["webhook-signature"])
