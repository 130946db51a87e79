"""Webhook subscriptions: list, bulk create, update and delete, rotate-secret and ping."""

from typing import Any

import flask

from handlers import common, settings
from services import listing, webhook_ops, webhook_writes
from services.list_query import ListRequest


def list_webhooks(
    agency_id: int, per_page: int, list_request: ListRequest, cursor: str | None = None, sort: list[str] | None = None
) -> flask.Response:
    """List the agency's webhooks."""
    return common.respond(200, listing.webhooks(agency_id, common.asked(per_page, cursor, sort, list_request)))


def create_webhooks(agency_id: int, body: Any = None, body_errors: dict | None = None, dry_run: bool = False) -> flask.Response:
    """Create webhooks."""
    return common.bulk_write(201, webhook_writes.Create(agency_id, settings().webhook_allow_private), body, body_errors, dry_run)


def update_webhooks(agency_id: int, body: Any = None, body_errors: dict | None = None, dry_run: bool = False) -> flask.Response:
    """Update webhooks."""
    return common.bulk_write(200, webhook_writes.Update(agency_id, settings().webhook_allow_private), body, body_errors, dry_run)


def delete_webhooks(agency_id: int, body: Any = None, body_errors: dict | None = None, dry_run: bool = False) -> flask.Response:
    """Delete webhooks; their pending deliveries go with them."""
    return common.bulk_write(200, webhook_writes.Delete(agency_id), body, body_errors, dry_run)


def rotate_secret(agency_id: int, webhook: str) -> flask.Response:
    """Give a webhook a new signing secret; the one replaced keeps signing for RISKAPI_WEBHOOK_ROTATION_GRACE.

    The end of the grace is fixed now (this process's setting) and stored, so every worker honours the
    same instant and the response can say it.
    """
    return common.respond(200, {"data": [webhook_ops.rotate_secret(agency_id, webhook, settings().webhook_rotation_grace)]})


def ping_webhook(agency_id: int, webhook: str) -> flask.Response:
    """Send a webhook.ping event to one webhook."""
    return common.respond(202, webhook_ops.ping(agency_id, webhook))
