"""A webhook's own headers: which names it may set, how they are stored, and how answers show them."""

from __future__ import annotations

import re

import orjson

import spec
from models.webhooks import MASK

_RULES = spec.schema("WebhookHeaders")
# RFC 9110's token: the characters a header name may have.
TOKEN = re.compile(_RULES["x-name-pattern"])
# The delivery sets these itself (webhooks.requests, jobs.https.transport): a webhook's own
# would replace a signature or desynchronise the request, so they are refused.
_OWNED = frozenset(name.lower() for name in _RULES["x-refused-names"])
_OWNED_PREFIXES = tuple(prefix.lower() for prefix in _RULES["x-refused-prefixes"])


def refused(name: str) -> bool:
    """Tell whether a header name is one the delivery sets itself (case-insensitive)."""
    lowered = name.lower()
    return lowered in _OWNED or lowered.startswith(_OWNED_PREFIXES)


def pack(headers: dict[str, str] | None) -> str | None:
    """Store headers as a JSON object in their order; None (or none) stays NULL."""
    return orjson.dumps(headers).decode() if headers else None


def unpack(packed: str | None) -> dict[str, str]:
    """Return the stored headers; none when NULL."""
    return orjson.loads(packed) if packed else {}


def masked(packed: str | None) -> dict[str, str] | None:
    """Return the stored headers' names with their values masked, as answers show them; None when there are none."""
    return {name: MASK for name in unpack(packed)} if packed else None


def mask_sent(sent: dict[str, str], packed: str | None) -> dict[str, str]:
    """Return headers as sent with the webhook's own values masked, as the delivery log keeps them."""
    own = {name.lower() for name in unpack(packed)}
    return {name: MASK if name.lower() in own else value for name, value in sent.items()} if own else sent
