"""Send one attempt: the event's stored body, signed with the webhook's secrets, POSTed by jobs.https.transport.

No database here: the delivery, its webhook and the event body arrive loaded. The request carries the
service's headers (Service-Delivery is the delivery's uuid, the same on every attempt) and the Standard
Webhooks ones (webhook-id is that uuid too); a kept connection comes from the pool handed in.
"""

from __future__ import annotations

import datetime
import time
import uuid

from jobs.https import transport
from jobs.https.connections import Pool
from jobs.https.dialing import Watchdog
from models.webhooks import Delivery, Webhook
from riskapi import __version__
from riskapi.config import Settings
from riskapi.webhooks import signing

USER_AGENT = f"riskapi-webhooks/{__version__}"


def send(
    delivery: Delivery,
    webhook: Webhook,
    settings: Settings,
    pool: Pool | None,
    now: datetime.datetime,
    watchdog: Watchdog | None = None,
) -> transport.Result:
    """POST one attempt of a loaded delivery to its webhook, started `now` (naive UTC, as the attempt records it):
    signed by the secrets valid then and timestamped then; watchdog keeps its deadline."""
    body = delivery.stored_event.body.encode()
    return transport.post(
        webhook.url,
        body,
        signed_headers(delivery.event, delivery.uuid, webhook.uuid, body, signing_secrets(webhook, now), epoch(now)),
        timeout=settings.webhook_timeout,
        allow_private=settings.webhook_allow_private,
        ca_bundle=settings.webhook_ca_bundle or None,
        pool=pool,
        watchdog=watchdog,
    )


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


__all__ = ["USER_AGENT", "headers", "send", "signed_headers", "signing_secrets"]
