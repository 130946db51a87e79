"""A webhook's delivery log, and sending deliveries again (services.webhook_ops does the work)."""

from typing import Any

import flask

from handlers import common
from services import listing, webhook_ops
from services.list_query import ListRequest


def list_deliveries(
    agency_id: int,
    webhook: str,
    per_page: int,
    list_request: ListRequest,
    cursor: str | None = None,
    sort: list[str] | None = None,
) -> flask.Response:
    """List a webhook's deliveries, newest first (a listen session's too)."""
    return common.respond(200, listing.deliveries(agency_id, webhook, common.asked(per_page, cursor, sort, list_request)))


def get_delivery(agency_id: int, webhook: str, delivery: str) -> flask.Response:
    """Answer one delivery of a webhook with every attempt."""
    return common.respond(200, {"data": webhook_ops.get(agency_id, webhook, delivery)})


def redeliver(agency_id: int, webhook: str, delivery: str) -> flask.Response:
    """Start a new round of attempts for a delivery (same event, same Service-Delivery id)."""
    return common.respond(202, {"data": webhook_ops.redeliver(agency_id, webhook, delivery)})


def recover_deliveries(agency_id: int, webhook: str, body: Any = None, body_errors: dict | None = None) -> flask.Response:
    """Queue a new round of attempts for every failed or skipped delivery of a webhook created in a window."""
    common.refuse(body_errors)
    return common.respond(202, {"data": webhook_ops.recover(agency_id, webhook, body)})
