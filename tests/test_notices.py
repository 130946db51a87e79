"""Operational events: webhook.disabled and delivery.failed reach the agency's other webhooks subscribed to them."""

from __future__ import annotations

import json

from tests.support import make_webhook
from tests.webhook_support import add_driver, settled
from toolkit.receiver import Reply
from toolkit.serving import wait_until

NOTICES = ["webhook.disabled", "delivery.failed"]


def received(receiver, path: str) -> list[dict]:
    """Return the bodies the receiver got on a path, in order."""
    return [json.loads(r.body) for r in receiver.requests if r.path == path]


def test_a_failing_webhook_is_disabled_and_a_second_webhook_is_told_both(client, tenant, receiver, start_worker):
    receiver.responses = lambda request: Reply(500, body=b"broken") if request.path == "/hook/failing" else Reply(200)
    start_worker(retry_delays="1", failure_limit="1")
    failing = make_webhook(client, tenant, url=receiver.url + "/failing", events=["driver.created", *NOTICES])
    watcher = make_webhook(client, tenant, url=receiver.url + "/watch", events=NOTICES)
    add_driver(client, tenant)

    # Its own delivery.failed is skipped (it was disabled first); its own webhook.disabled is not written for it.
    skipped, failed = settled(client, tenant, failing, count=2, timeout=60)
    assert failed["data"]["status"] == "failed"
    assert (skipped["data"]["status"], skipped["data"]["event"]) == ("skipped", "delivery.failed")
    told = wait_until(lambda: (lambda got: got if len(got) == 2 else None)(received(receiver, "/hook/watch")), timeout=60)
    assert told, receiver.requests
    by_name = {body["event"]: body["data"] for body in told}
    assert by_name["delivery.failed"] == {
        "object": "delivery",
        "uuid": failed["uuid"],
        "webhook": failing["uuid"],
        "event": "driver.created",
        "status": 500,
        "error": None,
    }
    disabled = by_name["webhook.disabled"]
    assert (disabled["uuid"], disabled["reason"], disabled["failures"]) == (failing["uuid"], "failures", 1)
    # The disabled webhook was sent neither: it was disabled before either was written.
    assert [body["event"] for body in received(receiver, "/hook/failing")] == ["driver.created", "driver.created"]
    settled(client, tenant, watcher, count=2, timeout=60)
    events = client.get("/events", headers=tenant.headers, params={"filter[event]": ",".join(NOTICES)}).json()["data"]
    assert sorted(e["data"]["event"] for e in events) == sorted(NOTICES)
    to = {e["data"]["event"]: sorted(d["webhook"] for d in e["data"]["deliveries"]) for e in events}
    assert to == {"delivery.failed": sorted([watcher["uuid"], failing["uuid"]]), "webhook.disabled": [watcher["uuid"]]}


def test_an_agency_disabling_its_webhook_tells_the_others_not_itself(client, tenant, other_tenant):
    mine = make_webhook(client, tenant, events=["driver.created", "webhook.disabled"])
    watcher = make_webhook(client, tenant, events=["webhook.disabled"])
    make_webhook(client, other_tenant, events=["webhook.disabled"])
    body = {"data": [{"object": "webhook", "uuid": mine["uuid"], "data": {"disabled": True}}]}
    assert client.patch("/webhooks", json=body, headers=tenant.headers).status_code == 200

    [event] = client.get("/events", headers=tenant.headers, params={"filter[event]": "webhook.disabled"}).json()["data"]
    assert event["data"]["data"]["uuid"] == mine["uuid"] and event["data"]["data"]["reason"] == "manual"
    assert event["data"]["data"]["failures"] == 0 and event["data"]["risk"] is None
    assert [d["webhook"] for d in event["data"]["deliveries"]] == [watcher["uuid"]]
    assert client.get("/events", headers=other_tenant.headers).json()["data"] == []


def test_a_zapier_hook_gone_is_told_as_gone(client, tenant, receiver, start_worker):
    receiver.responses = lambda request: Reply(410, body=b"unsubscribed") if request.path == "/hook/zap" else Reply(200)
    start_worker(retry_delays="1")
    zap = make_webhook(client, tenant, url=receiver.url + "/zap", type_="zapier")
    make_webhook(client, tenant, url=receiver.url + "/watch", events=NOTICES)
    add_driver(client, tenant)

    [gone] = settled(client, tenant, zap, timeout=60)
    assert gone["data"]["status"] == "failed" and gone["data"]["attempts"][0]["response"]["body"] == "unsubscribed"
    told = wait_until(lambda: (lambda got: got if len(got) == 2 else None)(received(receiver, "/hook/watch")), timeout=60)
    assert told, receiver.requests
    by_name = {body["event"]: body["data"] for body in told}
    assert (by_name["webhook.disabled"]["uuid"], by_name["webhook.disabled"]["reason"]) == (zap["uuid"], "gone")
    assert (by_name["delivery.failed"]["uuid"], by_name["delivery.failed"]["status"]) == (gone["uuid"], 410)
