"""POST /webhooks/{webhook}/recover: every failed delivery of a window starts a new round, nothing else does."""

import datetime
import time

import orjson

from tests.support import make_webhook
from tests.webhook_support import add_driver, deliveries, settled
from toolkit.serving import wait_until


def recover(client, tenant, hook, headers=None, **body):
    return client.post(f"/webhooks/{hook['uuid']}/recover", json=body, headers={**tenant.headers, **(headers or {})})


def test_recover_queues_the_failed_deliveries_of_the_window_again(client, tenant, other_tenant, receiver, start_worker):
    failing = {"on": True}
    receiver.responses = lambda request: 500 if failing["on"] else 200
    start_worker(retry_delays="")
    hook = make_webhook(client, tenant, url=receiver.url)
    for name in ("one", "two", "three"):
        add_driver(client, tenant, first_name=name)
        newest = datetime.datetime.fromisoformat(deliveries(client, tenant, hook)[0]["meta"]["created"])
        # The next delivery is created after this one (the window below splits them by creation time).
        assert wait_until(lambda newest=newest: datetime.datetime.now(datetime.UTC) > newest, timeout=30, interval=0.001)
    log = settled(client, tenant, hook, 3)  # newest first
    assert [d["data"]["status"] for d in log] == ["failed"] * 3
    since = log[1]["meta"]["created"]

    assert recover(client, other_tenant, hook, since=since).status_code == 404
    dry = recover(client, tenant, hook, headers={"Precognition": "true"}, since=since)
    assert dry.status_code == 204 and not dry.content
    assert [d["data"]["status"] for d in deliveries(client, tenant, hook)] == ["failed"] * 3
    refused = recover(client, tenant, hook, since=since, until=since)
    assert refused.status_code == 422 and list(refused.json()["errors"]) == ["until"]
    assert recover(client, tenant, hook, since="yesterday").status_code == 422

    failing["on"] = False
    response = recover(client, tenant, hook, since=since)
    assert response.status_code == 202, response.text
    assert response.json()["data"] == {
        "object": "recovery",
        "webhook": hook["uuid"],
        "since": since,
        "until": None,
        "deliveries": 2,
    }
    assert receiver.wait_for(5)
    log = settled(client, tenant, hook, 3)
    assert [d["data"]["status"] for d in log] == ["succeeded", "succeeded", "failed"]
    assert [[a["status"] for a in d["data"]["attempts"]] for d in log] == [[500, 200], [500, 200], [500]]
    # The recovered deliveries kept their ids: the receiver saw each id twice, the oldest once.
    ids = [r.headers["service-delivery"] for r in receiver.requests]
    assert sorted(ids.count(d["uuid"]) for d in log) == [1, 2, 2]
    # A window that ends before the oldest delivery finds nothing.
    early = recover(client, tenant, hook, since="2000-01-01T00:00:00Z", until=log[2]["meta"]["created"])
    assert early.status_code == 202 and early.json()["data"]["deliveries"] == 0


def test_re_enabling_a_webhook_resends_nothing_and_recover_refuses_a_disabled_one(client, tenant, receiver, start_worker):
    receiver.responses = lambda request: 500
    start_worker(retry_delays="")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    settled(client, tenant, hook, 1)
    toggle = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"disabled": True}}]}
    assert client.patch("/webhooks", json=toggle, headers=tenant.headers).status_code == 200
    assert recover(client, tenant, hook, since="2000-01-01T00:00:00Z").status_code == 409
    toggle["data"][0]["data"]["disabled"] = None
    assert client.patch("/webhooks", json=toggle, headers=tenant.headers).status_code == 200
    time.sleep(1.5)  # nothing is sent again by re-enabling
    assert len(receiver.requests) == 1
    assert [d["data"]["status"] for d in deliveries(client, tenant, hook)] == ["failed"]
    # recover is how: the failed delivery goes out again.
    assert recover(client, tenant, hook, since="2000-01-01T00:00:00Z").json()["data"]["deliveries"] == 1
    assert wait_until(lambda: len(receiver.requests) == 2)


def test_an_unknown_webhook_is_404_before_the_windows_order_is_checked(client, tenant, other_tenant):
    # Schema-valid body, but `until` before `since`: the webhook's existence is judged first, as everywhere.
    body = {"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}
    for hook in ({"uuid": "00000000-0000-4000-8000-000000000000"}, make_webhook(client, other_tenant)):
        answer = recover(client, tenant, hook, **body)
        assert (answer.status_code, answer.json()) == (404, {"message": "Webhook not found.", "status": 404})
    mine = recover(client, tenant, make_webhook(client, tenant), **body)
    assert mine.status_code == 422 and list(mine.json()["errors"]) == ["until"]


def toggle(client, tenant, hook, disabled):
    body = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"disabled": disabled}}]}
    response = client.patch("/webhooks", json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text


def test_events_made_while_disabled_are_skipped_and_recover_sends_each_once(client, tenant, receiver, start_worker):
    start_worker(retry_delays="")
    hook = make_webhook(client, tenant, url=receiver.url, events=["driver.created"])
    # Another webhook subscribed to webhook.disabled is told; the disabled one never gets a delivery of its own notice.
    watcher = make_webhook(client, tenant, url=receiver.url, events=["webhook.disabled"])
    toggle(client, tenant, hook, True)
    names = ["one", "two", "three"]
    for name in names:
        add_driver(client, tenant, first_name=name)
    log = deliveries(client, tenant, hook)  # newest first
    assert [d["data"]["status"] for d in log] == ["skipped"] * 3
    assert [d["data"]["next_attempt"] for d in log] == [None] * 3
    assert [d["data"]["attempts"] for d in log] == [[]] * 3
    assert [d["data"]["event"] for d in log] == ["driver.created"] * 3
    only = deliveries(client, tenant, hook, **{"filter[status]": "skipped"})
    assert [d["uuid"] for d in only] == [d["uuid"] for d in log]
    assert deliveries(client, tenant, hook, **{"filter[status]": "failed,pending"}) == []
    assert wait_until(lambda: len(receiver.requests) == 1, timeout=30)  # the watcher's webhook.disabled only
    assert settled(client, tenant, watcher, 1)[0]["data"]["status"] == "succeeded"
    assert recover(client, tenant, hook, since="2000-01-01T00:00:00Z").status_code == 409

    toggle(client, tenant, hook, None)
    time.sleep(1.5)  # re-enabling sends nothing by itself
    assert len(receiver.requests) == 1
    assert [d["data"]["status"] for d in deliveries(client, tenant, hook)] == ["skipped"] * 3
    response = recover(client, tenant, hook, since="2000-01-01T00:00:00Z")
    assert response.status_code == 202, response.text
    assert response.json()["data"]["deliveries"] == 3
    assert receiver.wait_for(4)
    log = settled(client, tenant, hook, 3)
    assert [d["data"]["status"] for d in log] == ["succeeded"] * 3
    # Each once; queued oldest first, but two attempts to a webhook may be in flight at once, so the
    # order of arrival is not promised (spec: recover; docs/webhook-delivery.md, ordering).
    sent = [r.headers["service-delivery"] for r in receiver.requests[1:]]
    assert sorted(sent) == sorted(d["uuid"] for d in log)
    assert sorted(orjson.loads(r.body)["data"]["data"]["first_name"] for r in receiver.requests[1:]) == sorted(names)
    # Recovered once: a second recover finds nothing left to send.
    assert recover(client, tenant, hook, since="2000-01-01T00:00:00Z").json()["data"]["deliveries"] == 0
    time.sleep(1.5)
    assert len(receiver.requests) == 4
