"""Webhook delivery end to end: API write → outbox → relay → RQ worker (with scheduler) → HTTPS receiver."""

from __future__ import annotations

import json

from jobs.signing import verify
from riskapi import __version__
from tests.conftest import items, make_webhook
from tests.webhook_support import wait_until


def deliveries(client, tenant, hook, **params):
    response = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers, params=params)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def test_driver_create_is_delivered_signed_with_every_header(client, tenant, receiver, start_worker):
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url, events=["driver.created"])
    created = client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "Ada"}), headers=tenant.headers)
    assert created.status_code == 201
    driver = created.json()["data"][0]

    assert receiver.wait_for(1, timeout=10)
    path, headers, body, _ = receiver.requests[0]
    assert path == "/hook"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == f"riskapi-webhooks/{__version__}"
    assert headers["service-event"] == "driver.created"
    assert headers["service-webhook"] == hook["uuid"]
    assert verify(hook["meta"]["signing_secret"], body, headers["service-signature"])
    assert headers["service-signature"] == headers["service-signature"].lower()
    event = json.loads(body)
    assert list(event) == ["id", "event", "created", "data"]
    assert event["event"] == "driver.created"
    assert event["data"]["uuid"] == driver["uuid"] and event["data"]["object"] == "driver"
    assert event["data"]["risk"] == tenant.risk
    assert event["data"]["data"]["first_name"] == "Ada"

    log = wait_until(lambda: [d for d in deliveries(client, tenant, hook) if d["data"]["status"] == "succeeded"])
    assert log[0]["uuid"] == headers["service-delivery"]
    assert log[0]["data"]["event_id"] == event["id"]
    assert [a["status"] for a in log[0]["data"]["attempts"]] == [200]
    assert log[0]["data"]["next_attempt"] is None
