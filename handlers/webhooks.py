"""Webhook subscriptions: list, bulk create, update and delete, rotate-secret and ping."""

import uuid
from typing import Any

import flask

import models
from handlers import common, settings
from models.webhooks import LISTEN, Webhook
from riskapi.exceptions import ApiError
from riskapi.services import webhook_writes
from riskapi.webhooks import outbox


def webhook_of(agency_id: int, webhook_uuid: str, sessions: bool = False) -> Webhook:
    """Return the agency's webhook (or listen session, when `sessions`); another agency's answers 404 like a missing one."""
    try:
        uuid.UUID(webhook_uuid)
    except ValueError:
        raise ApiError(404, "Webhook not found.") from None
    found = Webhook.get_or_none((Webhook.uuid == webhook_uuid) & (Webhook.agency == agency_id))
    if found is None or (found.type == LISTEN and not sessions):
        raise ApiError(404, "Webhook not found.")
    return found


# A listen session's uuid reads like a webhook's in its delivery log, but nothing is sent to it again.
LISTEN_SESSION = (
    "The uuid names a listen session (`riskapi listen`), which is neither pinged nor retried: "
    "send it an event with `riskapi trigger EVENT`."
)


def sendable_webhook_of(agency_id: int, webhook_uuid: str) -> Webhook:
    """Return the agency's webhook for a ping, redeliver or recover; a listen session's uuid answers 409 saying so."""
    found = webhook_of(agency_id, webhook_uuid, sessions=True)
    if found.type == LISTEN:
        raise ApiError(409, LISTEN_SESSION)
    return found


# ---- operations -----------------------------------------------------------------------------------


def list_webhooks(
    agency_id: int, per_page: int, cursor: str | None = None, filter_: Any = None, sort: list[str] | None = None
) -> flask.Response:
    """List the agency's webhooks."""
    rows = Webhook.select().where((Webhook.agency == agency_id) & Webhook.subscription()).dicts()
    return common.list_page(
        Webhook, rows, agency_id, per_page, cursor, filter_, sort, lambda page: [webhook_writes.render(row) for row in page]
    )


def create_webhooks(agency_id: int) -> flask.Response:
    """Create webhooks."""
    return common.bulk_write(201, webhook_writes.Create(agency_id, settings().webhook_allow_private))


def update_webhooks(agency_id: int) -> flask.Response:
    """Update webhooks."""
    return common.bulk_write(200, webhook_writes.Update(agency_id, settings().webhook_allow_private))


def delete_webhooks(agency_id: int) -> flask.Response:
    """Delete webhooks; their pending deliveries go with them."""
    return common.bulk_write(200, webhook_writes.Delete(agency_id))


def rotate_secret(agency_id: int, webhook: str) -> flask.Response:
    """Give a webhook a new signing secret; the one replaced keeps signing for RISKAPI_WEBHOOK_ROTATION_GRACE.

    The end of the grace is fixed now (this process's setting) and stored, so every worker honours the
    same instant and the response can say it.
    """
    with models.atomic():
        row = webhook_writes.rotate_secret(webhook_of(agency_id, webhook), settings().webhook_rotation_grace)
    return common.respond(200, {"data": [webhook_writes.render(row)]})


def ping_webhook(agency_id: int, webhook: str) -> flask.Response:
    """Send a webhook.ping event to one webhook."""
    with models.atomic():
        found = sendable_webhook_of(agency_id, webhook)
        if found.disabled is not None:
            raise ApiError(409, "The webhook is disabled; re-enable it first.")
        accepted = outbox.ping(found)
    return common.respond(202, accepted)
