"""Channels: a webhook with channels receives an event of its types only when they share one (Svix's rule)."""

import json

import models
from models.tenancy import Risk
from tests.support import make_webhook, webhook_items
from tests.webhook_support import add_driver
from toolkit.serving import wait_until

FORM = "form.completed"


def publish(client, tenant, **body):
    response = client.post("/events", json={"event": FORM, "data": {"form": "F-1"}, **body}, headers=tenant.headers)
    assert response.status_code == 202, response.text
    return response.json()


def test_webhooks_receive_exactly_the_events_their_channels_share(client, tenant, receiver, start_worker):
    with models.db.connection_context():
        personal = str(Risk.create(agency=tenant.agency, type="personal", name="Other").uuid)
    start_worker()
    events = ["driver.created", FORM]
    every = make_webhook(client, tenant, url=receiver.url, events=events)
    mine = make_webhook(client, tenant, url=receiver.url, events=events, channels=[f"risk:{tenant.risk}"])
    personals = make_webhook(client, tenant, url=receiver.url, events=events, channels=["profile_type:personal"])
    customer = make_webhook(client, tenant, url=receiver.url, events=events, channels=["customer:acme", "customer:zeta"])
    assert mine["data"]["channels"] == [f"risk:{tenant.risk}"] and every["data"]["channels"] is None

    add_driver(client, tenant, first_name="commercial")
    other = client.post(
        f"/risks/{personal}/data/drivers", json={"data": [{"object": "driver", "data": {}}]}, headers=tenant.headers
    )
    assert other.status_code == 201, other.text
    publish(client, tenant)  # no channels: only webhooks without channels
    publish(client, tenant, channels=["customer:zeta", "else"])
    published = publish(client, tenant, channels=["Customer:ACME"])  # exact match: nobody with channels

    expected = {
        every["uuid"]: ["driver.created", "driver.created", FORM, FORM, FORM],
        mine["uuid"]: ["driver.created"],
        personals["uuid"]: ["driver.created"],
        customer["uuid"]: [FORM],
    }
    assert wait_until(lambda: len(receiver.requests) >= 8, timeout=60)
    got: dict[str, list[str]] = {}
    for request in receiver.requests:
        got.setdefault(request.headers["service-webhook"], []).append(json.loads(request.body)["event"])
    assert {hook: sorted(names) for hook, names in got.items()} == expected
    risks = [json.loads(r.body)["data"]["risk"] for r in receiver.requests if r.headers["service-webhook"] == personals["uuid"]]
    assert risks == [personal]

    shown = client.get(f"/events/{published['id']}", headers=tenant.headers).json()["data"]
    assert shown["data"]["channels"] == ["Customer:ACME"]
    listed = client.get("/events", headers=tenant.headers, params={"filter[event]": "driver.created"}).json()["data"]
    assert sorted(tuple(e["data"]["channels"]) for e in listed) == sorted(
        [(f"risk:{tenant.risk}", "profile_type:commercial"), (f"risk:{personal}", "profile_type:personal")]
    )


def test_a_webhook_takes_the_channels_of_its_last_write_and_a_deleted_one_takes_nothing(client, tenant):
    """The channels are looked up in their own table (WebhookChannel): every write of a webhook's channels files them."""
    from models.webhooks import Webhook, WebhookChannel

    def reached(**body) -> list[str]:
        event = publish(client, tenant, **body)
        shown = client.get(f"/events/{event['id']}", headers=tenant.headers).json()["data"]
        return [delivery["webhook"] for delivery in shown["data"]["deliveries"]]

    hook = make_webhook(client, tenant, events=[FORM], channels=["x", "y"])
    assert reached(channels=["y"]) == [hook["uuid"]] and reached() == []

    def update(channels) -> None:
        change = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"channels": channels}}]}
        assert client.patch("/webhooks", json=change, headers=tenant.headers).status_code == 200

    update(None)  # every event of its types again
    assert reached() == [hook["uuid"]] and reached(channels=["z"]) == [hook["uuid"]]
    update(["z"])
    assert reached(channels=["y"]) == [] and reached() == [] and reached(channels=["z", "y"]) == [hook["uuid"]]
    with models.db.connection_context():
        ids = [i for (i,) in Webhook.select(Webhook.id).where(Webhook.agency == tenant.agency).tuples()]
        assert [
            name for (name,) in WebhookChannel.select(WebhookChannel.name).where(WebhookChannel.webhook.in_(ids)).tuples()
        ] == ["z"]
    deleted = client.request(
        "DELETE", "/webhooks", json={"data": [{"object": "webhook", "uuid": hook["uuid"]}]}, headers=tenant.headers
    )
    assert deleted.status_code == 200, deleted.text
    with models.db.connection_context():
        assert WebhookChannel.select().where(WebhookChannel.webhook.in_(ids)).count() == 0


def test_channels_are_set_cleared_filtered_and_checked(client, tenant):
    hook = make_webhook(client, tenant, channels=["a", "b", "a"])
    assert hook["data"]["channels"] == ["a", "b"]
    plain = make_webhook(client, tenant)

    def listed(value):
        response = client.get("/webhooks", headers=tenant.headers, params={"filter[channel]": value})
        assert response.status_code == 200, response.text
        return [w["uuid"] for w in response.json()["data"]]

    assert listed("b") == [hook["uuid"]] and listed("x,a") == [hook["uuid"]] and listed("B") == []
    assert client.get("/webhooks", headers=tenant.headers, params={"filter[channel]": "a b"}).status_code == 422

    change = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"channels": None}}]}
    response = client.patch("/webhooks", json=change, headers=tenant.headers)
    assert response.status_code == 200 and response.json()["data"][0]["data"]["channels"] is None
    change["data"][0]["data"]["channels"] = ["c"]
    dry = client.patch("/webhooks", json=change, headers={**tenant.headers, "Precognition": "true"})
    assert dry.status_code == 204
    assert listed("c") == []
    assert client.patch("/webhooks", json=change, headers=tenant.headers).json()["data"][0]["data"]["channels"] == ["c"]
    assert listed("c") == [hook["uuid"]] and plain["uuid"] not in listed("a,c")

    bad = webhook_items(
        {"type": "custom", "url": "https://hooks.example.com/in", "events": [FORM], "channels": ["ok"]},
        {"type": "custom", "url": "https://hooks.example.com/in", "events": [FORM], "channels": ["ok", "no spaces"]},
    )
    refused = client.post("/webhooks", json=bad, headers=tenant.headers)
    assert refused.status_code == 422 and list(refused.json()["errors"]) == ["data.1.data.channels.1"]
    for channels in ([], [f"c{n}" for n in range(11)], ["x" * 129]):
        body = webhook_items({"type": "custom", "url": "https://hooks.example.com/in", "events": [FORM], "channels": channels})
        assert client.post("/webhooks", json=body, headers=tenant.headers).status_code == 422
    too_many = client.post(
        "/events", json={"event": FORM, "data": {}, "channels": [f"c{n}" for n in range(11)]}, headers=tenant.headers
    )
    assert too_many.status_code == 422 and list(too_many.json()["errors"]) == ["channels"]
    wrong = client.post("/events", json={"event": FORM, "data": {}, "channels": ["é"]}, headers=tenant.headers)
    assert wrong.status_code == 422 and list(wrong.json()["errors"]) == ["channels.0"]


def test_an_update_whose_values_break_the_schema_is_a_422_whatever_else_it_holds(client, tenant):
    """Found by Schemathesis: `channels: [null, null]` on PATCH reached the planner, which packed it (500)."""
    hook = make_webhook(client, tenant, channels=["risk:a"])
    for data in ({"channels": [None, None]}, {"channels": [None], "url": "https://hooks.riskapi.dev/b", "events": [None]}):
        for headers in ({}, {"Precognition": "true"}):
            body = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": data}]}
            answer = client.patch("/webhooks", json=body, headers={**tenant.headers, **headers})
            assert answer.status_code == 422, answer.text
            assert "data.0.data.channels.0" in answer.json()["errors"]
    shown = client.get("/webhooks", headers=tenant.headers).json()["data"]
    assert [(h["uuid"], h["data"]["channels"]) for h in shown] == [(hook["uuid"], ["risk:a"])]
