"""A webhook's delivery log, and sending deliveries again (services.webhook_ops does the work)."""

from typing import Any

import flask

from handlers import common
from models.webhooks import Delivery
from services import bulk_write, list_query, webhook_ops
from services.list_query import ListRequest
from services.messages import message


def list_deliveries(
    agency_id: int,
    webhook: str,
    per_page: int,
    list_request: ListRequest,
    cursor: str | None = None,
    sort: list[str] | None = None,
) -> flask.Response:
    """List a webhook's deliveries, newest first."""
    hook = webhook_ops.webhook_of(agency_id, webhook, sessions=True)  # a listen session's log too
    rows = webhook_ops.select().where(Delivery.webhook == hook.id).dicts()
    attempts, render = webhook_ops.attempts, webhook_ops.render
    return common.list_page_with_children(Delivery, rows, attempts, render, agency_id, per_page, cursor, list_request, sort)


def get_delivery(agency_id: int, webhook: str, delivery: str) -> flask.Response:
    """Answer one delivery of a webhook with every attempt."""
    return common.respond(200, {"data": webhook_ops.get(agency_id, webhook, delivery)})


def redeliver(agency_id: int, webhook: str, delivery: str) -> flask.Response:
    """Start a new round of attempts for a delivery (same event, same Service-Delivery id)."""
    return common.respond(202, {"data": webhook_ops.redeliver(agency_id, webhook, delivery)})


def recover_deliveries(agency_id: int, webhook: str, body: Any = None, body_errors: dict | None = None) -> flask.Response:
    """Queue a new round of attempts for every failed or skipped delivery of a webhook created in a window."""
    common.refuse(body_errors)
    since = list_query.moment(body["since"], Delivery.created, upper=False)
    until = list_query.moment(body["until"], Delivery.created, upper=False) if body.get("until") else None
    # An unknown webhook is a 404 before any rule across the body's fields, as for every other operation.
    webhook_ops.sendable_webhook_of(agency_id, webhook)
    if until is not None and until <= since:
        bulk_write.fail_if(bulk_write.Errors({"until": [message("after", "until", date="since")]}))
    return common.respond(202, {"data": webhook_ops.recover(agency_id, webhook, since, until)})
