"""A webhook's own headers: sent with every delivery, shown only as names, refused where the delivery sets them."""

import json

import pytest

from tests.support import make_webhook, webhook_items
from tests.webhook_support import add_driver, settled
from toolkit.serving import wait_until

SECRET = "Bearer 6f1c0a9e5d3b47a2"
HOOK = {"type": "custom", "url": "https://hooks.example.com/in", "events": ["driver.created"]}


def test_headers_arrive_with_every_delivery_and_are_never_shown(client, tenant, receiver, start_worker):
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url, headers={"Authorization": SECRET, "X-Api-Key": "k-1"})
    assert hook["data"]["headers"] == {"Authorization": "***", "X-Api-Key": "***"}
    add_driver(client, tenant)
    add_driver(client, tenant)
    assert wait_until(lambda: len(receiver.requests) >= 2, timeout=60)
    for request in receiver.requests:
        assert request.headers["authorization"] == SECRET and request.headers["x-api-key"] == "k-1"
        assert request.headers["content-type"] == "application/json"
    log = settled(client, tenant, hook, 2)
    sent = log[0]["data"]["attempts"][0]["request_headers"]
    assert sent["Authorization"] == "***" and sent["X-Api-Key"] == "***" and "Service-Signature" in sent
    for answer in (
        client.get("/webhooks", headers=tenant.headers),
        client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers),
        client.get(f"/webhooks/{hook['uuid']}/deliveries/{log[0]['uuid']}", headers=tenant.headers),
    ):
        assert answer.status_code == 200 and SECRET not in answer.text and "k-1" not in answer.text

    change = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"headers": {"X-Other": "v2"}}}]}
    updated = client.patch("/webhooks", json=change, headers=tenant.headers)
    assert updated.status_code == 200 and updated.json()["data"][0]["data"]["headers"] == {"X-Other": "***"}
    add_driver(client, tenant)
    # The new delivery's request, by its id: on a busy machine an earlier delivery may have been retried.
    earlier = {d["uuid"] for d in log}
    assert wait_until(lambda: any(r.headers["service-delivery"] not in earlier for r in receiver.requests), timeout=60)
    last = next(r.headers for r in receiver.requests if r.headers["service-delivery"] not in earlier)
    assert last["x-other"] == "v2" and "authorization" not in last
    change["data"][0]["data"]["headers"] = None
    assert client.patch("/webhooks", json=change, headers=tenant.headers).json()["data"][0]["data"]["headers"] is None


@pytest.mark.parametrize(
    ("headers", "path"),
    [
        ({"content-type": "text/plain"}, "data.1.data.headers.content-type"),
        ({"Service-Signature": "x"}, "data.1.data.headers.Service-Signature"),
        ({"WEBHOOK-ID": "x"}, "data.1.data.headers.WEBHOOK-ID"),
        ({"User-Agent": "x"}, "data.1.data.headers.User-Agent"),
        ({"Host": "x"}, "data.1.data.headers.Host"),
        ({"Bad Name": "x"}, "data.1.data.headers.Bad Name"),
        ({"X-A": "x", "x-a": "y"}, "data.1.data.headers.x-a"),
        ({"X-A": "line\nbreak"}, "data.1.data.headers.X-A"),
        ({"X-A": "x" * 1025}, "data.1.data.headers.X-A"),
    ],
)
def test_a_refused_header_is_a_422_naming_it(client, tenant, headers, path):
    body = webhook_items(HOOK, {**HOOK, "headers": headers})
    response = client.post("/webhooks", json=body, headers=tenant.headers)
    assert response.status_code == 422, response.text
    assert list(response.json()["errors"]) == [path]
    dry = client.post("/webhooks", json=body, headers={**tenant.headers, "Precognition": "true"})
    assert dry.status_code == 422 and list(dry.json()["errors"]) == [path]


def test_too_many_headers_are_refused(client, tenant):
    body = webhook_items({**HOOK, "headers": {f"X-H{n}": "v" for n in range(11)}})
    response = client.post("/webhooks", json=body, headers=tenant.headers)
    assert response.status_code == 422 and list(response.json()["errors"]) == ["data.0.data.headers"]
    assert json.loads(client.get("/webhooks", headers=tenant.headers).text)["data"] == []
