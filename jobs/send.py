"""Send one attempt: the event's stored body, signed with the webhook's secrets, POSTed by jobs.https.transport.

No database here: the delivery, its webhook and the event body arrive loaded. The request carries the
headers webhooks.requests signs (the service's and Standard Webhooks'; `riskapi listen` forwards
the same ones); a kept connection comes from the pool handed in.
"""

from __future__ import annotations

import dataclasses
import datetime

from foundation.config import Settings
from jobs.https import transport
from jobs.https.connections import Pool
from jobs.https.dialing import Watchdog
from models.webhooks import Delivery, Webhook
from webhooks import custom_headers
from webhooks.requests import USER_AGENT, epoch, headers, signed_headers, signing_secrets


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
    signed = signed_headers(delivery.event, delivery.uuid, webhook.uuid, body, signing_secrets(webhook, now), epoch(now))
    result = transport.post(
        webhook.url,
        body,
        {**custom_headers.unpack(webhook.headers), **signed},
        timeout=settings.webhook_timeout,
        allow_private=settings.webhook_allow_private,
        ca_bundle=settings.webhook_ca_bundle or None,
        pool=pool,
        watchdog=watchdog,
    )
    if result.request_headers is None or webhook.headers is None:
        return result
    # The webhook's own values are secrets: the delivery log keeps their names only.
    return dataclasses.replace(result, request_headers=custom_headers.mask_sent(result.request_headers, webhook.headers))


__all__ = ["USER_AGENT", "headers", "send", "signed_headers", "signing_secrets"]
