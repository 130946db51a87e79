"""Operational events: an agency's webhooks are told when one of them is disabled or a delivery fails for good.

Written through the outbox in the transaction of the change that causes them, like every event, to the
agency's webhooks subscribed to them (skipped for a disabled one, as every event): the webhook disabled never
gets its own `webhook.disabled`. A skipped delivery is not a failure: no `delivery.failed` tells of one.
A `delivery.failed` of a `delivery.failed` is not written: a receiver that fails
every delivery would otherwise be told of its failures for ever.
"""

import datetime
import uuid

from models import timestamp
from webhooks import outbox

WEBHOOK_DISABLED = "webhook.disabled"
DELIVERY_FAILED = "delivery.failed"

# Why a webhook was disabled (the spec's `reason` of webhook.disabled).
FAILURES, GONE, MANUAL = "failures", "gone", "manual"


def webhook_disabled(agency_id: int, webhook: uuid.UUID | str, reason: str, when: datetime.datetime, failures: int) -> None:
    """Write a webhook.disabled event for the agency's other webhooks, in the caller's transaction."""
    data = {"object": "webhook", "uuid": str(webhook), "reason": reason, "disabled": timestamp(when), "failures": failures}
    outbox.record(agency_id, WEBHOOK_DISABLED, [data], exclude=str(webhook))


def delivery_failed(
    agency_id: int, delivery: uuid.UUID | str, webhook: uuid.UUID | str, event: str, status: int | None, error: str | None
) -> None:
    """Write a delivery.failed event (its last answer's status, or why there was none), in the caller's transaction."""
    if event == DELIVERY_FAILED:
        return
    data = {
        "object": "delivery",
        "uuid": str(delivery),
        "webhook": str(webhook),
        "event": event,
        "status": status,
        "error": error,
    }
    outbox.record(agency_id, DELIVERY_FAILED, [data])


__all__ = ["DELIVERY_FAILED", "FAILURES", "GONE", "MANUAL", "WEBHOOK_DISABLED", "delivery_failed", "webhook_disabled"]
