"""One delivery and one event by id, and the agency's events: what each event carried and the deliveries it made."""

from __future__ import annotations

import uuid

from tests.support import make_webhook
from tests.webhook_support import add_driver, deliveries


def test_one_delivery_by_id_is_the_logs_and_404_elsewhere(client, tenant, other_tenant):
    hook = make_webhook(client, tenant)
    other_hook = make_webhook(client, tenant, events=["vehicle.created"])
    add_driver(client, tenant)
    [listed] = deliveries(client, tenant, hook)

    one = client.get(f"/webhooks/{hook['uuid']}/deliveries/{listed['uuid']}", headers=tenant.headers)
    assert one.status_code == 200 and one.json() == {"data": listed}
    assert listed["data"]["status"] == "pending" and listed["data"]["attempts"] == []
    for path, headers in [
        (f"/webhooks/{hook['uuid']}/deliveries/{listed['uuid']}", other_tenant.headers),
        (f"/webhooks/{other_hook['uuid']}/deliveries/{listed['uuid']}", tenant.headers),
        (f"/webhooks/{hook['uuid']}/deliveries/{uuid.uuid4()}", tenant.headers),
        (f"/webhooks/{hook['uuid']}/deliveries/not-a-uuid", tenant.headers),
    ]:
        response = client.get(path, headers=headers)
        assert response.status_code == 404 and response.json()["status"] == 404, (path, response.text)


def test_the_agencys_events_newest_first_with_their_deliveries_and_one_by_id(client, tenant, other_tenant):
    first = make_webhook(client, tenant, events=["driver.created", "form.completed"])
    second = make_webhook(client, tenant, events=["driver.created"])
    driver = add_driver(client, tenant)
    published = client.post("/events", json={"event": "form.completed", "data": {"form": "F-9"}}, headers=tenant.headers)
    assert published.status_code == 202
    make_webhook(client, other_tenant)
    add_driver(client, other_tenant)

    page = client.get("/events", headers=tenant.headers)
    assert page.status_code == 200, page.text
    form, created = page.json()["data"]
    assert (form["uuid"], form["data"]["event"], form["data"]["risk"]) == (published.json()["id"], "form.completed", None)
    assert form["data"]["data"] == {"form": "F-9"}
    assert [(d["webhook"], d["status"]) for d in form["data"]["deliveries"]] == [(first["uuid"], "pending")]
    assert created["data"]["event"] == "driver.created" and created["data"]["risk"] == tenant.risk
    assert created["data"]["data"]["uuid"] == driver["uuid"]
    made = {d["webhook"]: d["delivery"] for d in created["data"]["deliveries"]}
    assert set(made) == {first["uuid"], second["uuid"]}
    assert made[second["uuid"]] == deliveries(client, tenant, second)[0]["uuid"]

    only = client.get("/events", headers=tenant.headers, params={"filter[event]": "driver.created", "per_page": 10})
    assert [e["uuid"] for e in only.json()["data"]] == [created["uuid"]]
    later = client.get("/events", headers=tenant.headers, params={"filter[created]": "2999-01-01,"})
    assert later.status_code == 200 and later.json()["data"] == []
    oldest = client.get("/events", headers=tenant.headers, params={"sort": "created"})
    assert [e["uuid"] for e in oldest.json()["data"]] == [created["uuid"], form["uuid"]]

    one = client.get(f"/events/{created['uuid']}", headers=tenant.headers)
    assert one.status_code == 200 and one.json() == {"data": created}
    for event, headers in [
        (created["uuid"], other_tenant.headers),
        (str(uuid.uuid4()), tenant.headers),
        ("nope", tenant.headers),
    ]:
        response = client.get(f"/events/{event}", headers=headers)
        assert response.status_code == 404 and response.json() == {"message": "Event not found.", "status": 404}
    bad = client.get("/events", headers=tenant.headers, params={"filter[event]": "no.such"})
    assert bad.status_code == 422 and "filter[event]" in bad.json()["errors"]
