"""The headers of a delivery's POST, signed: what a worker sends and what `riskapi listen` forwards.

Shared by jobs.send (the workers) and the listen stream (an API process), which never import each
other: one recipe, so a session's forwarded request is the one a webhook would get. Service-Delivery
is the delivery's uuid, the same on every attempt, and webhook-id (Standard Webhooks) is that uuid too.
"""

from __future__ import annotations

import datetime
import time
import uuid

from foundation import __version__, signing
from models.webhooks import Webhook

USER_AGENT = f"riskapi-webhooks/{__version__}"


def epoch(moment: datetime.datetime) -> int:
    """Return the whole seconds since the epoch of a naive UTC moment."""
    return int(moment.replace(tzinfo=datetime.UTC).timestamp())


def headers(
    event: str,
    delivery_uuid: uuid.UUID | str,
    webhook_uuid: uuid.UUID | str,
    signature: str,
    standard: tuple[int, str] | None = None,
) -> dict:
    """Return the headers of a delivery request; `standard` = (webhook-timestamp, webhook-signature) adds
    the Standard Webhooks headers, whose webhook-id is the delivery's uuid (like Service-Delivery)."""
    sent = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Service-Event": event,
        "Service-Delivery": str(delivery_uuid),
        "Service-Signature": signature,
        "Service-Webhook": str(webhook_uuid),
    }
    if standard is not None:
        timestamp, standard_signature = standard
        sent["webhook-id"] = str(delivery_uuid)
        sent["webhook-timestamp"] = str(int(timestamp))
        sent["webhook-signature"] = standard_signature
    return sent


def signed_headers(
    event: str,
    delivery_uuid: uuid.UUID | str,
    webhook_uuid: uuid.UUID | str,
    body: bytes,
    secrets: list[str],
    timestamp: int | None = None,
) -> dict:
    """Return the headers of one attempt: Service-Signature by secrets[0] (the current secret) alone,
    webhook-signature by every secret given (current first), timestamped now unless told."""
    timestamp = int(time.time()) if timestamp is None else int(timestamp)
    standard = signing.standard_signatures(secrets, str(delivery_uuid), timestamp, body)
    return headers(event, delivery_uuid, webhook_uuid, signing.sign(secrets[0], body), (timestamp, standard))


def signing_secrets(webhook: Webhook, now: datetime.datetime) -> list[str]:
    """Return the secrets that sign an attempt made now: the current one, then the one rotate-secret
    replaced while its grace period lasts."""
    previous, until = webhook.previous_secret, webhook.previous_secret_expires
    if previous and until is not None and now < until and previous != webhook.secret:
        return [webhook.secret, previous]
    return [webhook.secret]


__all__ = ["USER_AGENT", "epoch", "headers", "signed_headers", "signing_secrets"]
