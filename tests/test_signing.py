"""Tests for jobs.signing, including a signed delivery through a real receiver."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import re

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from foundation.signing import (
    SECRET_PREFIX,
    generate_secret,
    sign,
    sign_standard,
    standard_key,
    standard_secret,
    standard_signatures,
    verify,
)
from jobs.https.transport import post
from toolkit.receiver import Receiver

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


@pytest.mark.parametrize(("secret", "body"), [(None, BODY), ("", BODY), (b"s", BODY), ("s", "text")])
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
        # Standard, padded base64 of 32 bytes: 44 characters, the last one "=".
        assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret), secret
        assert len(base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)) == 32


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
        _, headers, body, *_ = rx.requests[0]
    assert verify(secret, body, headers["webhook-signature"])
    assert not verify(generate_secret(), body, headers["webhook-signature"])


# ---- Standard Webhooks (webhook-signature) -----------------------------------------------------------

# The example of the Standard Webhooks reference libraries' own tests.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def _at(timestamp: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC)


def test_sign_standard_matches_the_reference_vector():
    """v1 = base64 HMAC-SHA256 of "{id}.{timestamp}.{body}", keyed by the base64-decoded part after whsec_."""
    assert sign_standard(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE
    assert Webhook(VECTOR_SECRET).sign(VECTOR_ID, _at(VECTOR_TIMESTAMP), VECTOR_BODY.decode()) == VECTOR_SIGNATURE


def test_generated_secrets_are_read_by_the_official_library_as_their_32_bytes():
    """What the API shows in meta.signing_secret is what the standardwebhooks library wants, as is."""
    for _ in range(50):
        secret = generate_secret()
        raw = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
        assert standard_key(secret) == raw == Webhook(secret)._whsecret
        assert standard_secret(secret) == secret
        body = b'{"id": 1, "name": "\xc3\xa9"}'
        expected = Webhook(secret).sign("delivery-1", _at(1700000000), body.decode())
        assert sign_standard(secret, "delivery-1", 1700000000, body) == expected


def test_secrets_made_before_standard_webhooks_keep_their_bytes_and_are_respelt_for_the_library():
    """base64url secrets (made before) key webhook-signature by the same 32 bytes; standard_secret re-spells them."""
    raw = b"\xfb\xff\xbf" + bytes(range(29))  # encodes to "-_-_..." in base64url, "+/+/..." in base64
    legacy = SECRET_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert "-" in legacy and "_" in legacy
    assert standard_key(legacy) == raw
    assert standard_secret(legacy) == SECRET_PREFIX + base64.b64encode(raw).decode()
    assert Webhook(standard_secret(legacy))._whsecret == raw
    assert sign_standard(legacy, "d", 1, b"{}") == sign_standard(standard_secret(legacy), "d", 1, b"{}")
    # Service-Signature stays keyed by the string as shown.
    assert sign(legacy, b"{}") != sign(standard_secret(legacy), b"{}")


@pytest.mark.parametrize("secret", ["", "whsec_", "key", "whsec_not base64!", "whsec_a", None, b"whsec_AAAA"])
def test_standard_key_refuses_what_is_not_a_whsec_base64_secret(secret):
    with pytest.raises(ValueError):
        standard_key(secret)


def test_standard_signatures_list_every_secret_in_order_and_the_library_accepts_each():
    """During a rotation webhook-signature carries one v1 signature per secret, space-separated, new first."""
    new, old, other = generate_secret(), generate_secret(), generate_secret()
    now = int(datetime.datetime.now(datetime.UTC).timestamp())
    header = standard_signatures([new, old], "delivery-2", now, BODY)
    assert header.split(" ") == [sign_standard(new, "delivery-2", now, BODY), sign_standard(old, "delivery-2", now, BODY)]
    sent = {"webhook-id": "delivery-2", "webhook-timestamp": str(now), "webhook-signature": header}
    assert Webhook(new).verify(BODY, sent) == {"event": "risk.updated", "id": 42}
    assert Webhook(old).verify(BODY, sent) == {"event": "risk.updated", "id": 42}
    with pytest.raises(WebhookVerificationError):
        Webhook(other).verify(BODY, sent)
    with pytest.raises(WebhookVerificationError):
        Webhook(new).verify(BODY + b" ", sent)


def test_sign_standard_signs_bytes_only():
    with pytest.raises(TypeError):
        sign_standard(generate_secret(), "d", 1, "text")
