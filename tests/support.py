"""Helpers the test modules share (not a test module): tenants the suite settles after each test, webhook bodies."""

from __future__ import annotations

import models
from models.webhooks import FAILED, PENDING, Delivery, Webhook
from toolkit import tenants
from toolkit.tenants import Tenant

# Agencies make_tenant created since conftest last settled: conftest settles what they left pending.
CREATED_AGENCIES: list[int] = []


def make_tenant(risk_type: str = "commercial", webhook_limit: int = 10) -> Tenant:
    """Create a tenant (toolkit.tenants.make_tenant) and note its agency, so what it leaves pending is settled."""
    tenant = tenants.make_tenant(risk_type, webhook_limit)
    CREATED_AGENCIES.append(tenant.agency.id)
    return tenant


def settle_pending(agency_ids) -> int:
    """Mark the pending deliveries of these agencies' webhooks failed, so no later worker or relay picks them up."""
    ids = list(agency_ids)
    if not ids:
        return 0
    with models.connection():  # a pooled connection a test cut is replaced, not used
        theirs = Webhook.select(Webhook.id).where(Webhook.agency.in_(ids))
        return (
            Delivery.update(status=FAILED, next_attempt=None)
            .where((Delivery.status == PENDING) & Delivery.webhook.in_(theirs))
            .execute()
        )


def webhook_items(*datas) -> dict:
    """Build a webhook create body."""
    return {"data": [{"object": "webhook", "data": data} for data in datas]}


def make_webhook(client, tenant, url="https://hooks.example.com/in", events=("driver.created",), type_="custom", **extra) -> dict:
    """Create one webhook through the API and return it."""
    body = webhook_items({"type": type_, "url": url, "events": list(events), **extra})
    response = client.post("/webhooks", json=body, headers=tenant.headers)
    assert response.status_code == 201, response.text
    return response.json()["data"][0]
