"""The webhook subscription API: bulk create/update/delete, rotate-secret, list filters, plan limit, tenancy."""

from __future__ import annotations

import base64
import datetime

import pytest

from tests.support import make_tenant, make_webhook, webhook_items
from webhooks.urls import url_problem


def create(client, tenant, *datas, headers=None):
    return client.post("/webhooks", json=webhook_items(*datas), headers={**tenant.headers, **(headers or {})})


def patch(client, tenant, *updates, headers=None):
    body = {"data": [{"object": "webhook", "uuid": uuid, "data": data} for uuid, data in updates]}
    return client.patch("/webhooks", json=body, headers={**tenant.headers, **(headers or {})})


def delete(client, tenant, *uuids):
    body = {"data": [{"object": "webhook", "uuid": uuid} for uuid in uuids]}
    return client.request("DELETE", "/webhooks", json=body, headers=tenant.headers)


def listed(client, tenant, **params):
    response = client.get("/webhooks", params=params, headers=tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()


def uuids(page) -> list[str]:
    return [item["uuid"] for item in page["data"]]


HOOK = {"type": "custom", "url": "https://hooks.example.com/in", "events": ["driver.created"]}


# ---- create -----------------------------------------------------------------------------------------


def test_create_answers_201_with_the_webhook_and_a_strong_secret(client, tenant):
    response = create(
        client,
        tenant,
        {**HOOK, "events": ["form.completed", "driver.created", "form.completed"], "description": "CRM sync"},
    )
    assert response.status_code == 201
    [hook] = response.json()["data"]
    assert hook["object"] == "webhook"
    assert hook["data"] == {
        "type": "custom",
        "description": "CRM sync",
        "url": "https://hooks.example.com/in",
        "events": ["form.completed", "driver.created"],
        "channels": None,
        "headers": None,
        "disabled": None,
    }
    secret = hook["meta"]["signing_secret"]
    raw = base64.urlsafe_b64decode(secret.removeprefix("whsec_") + "==")
    assert len(raw) >= 32
    assert hook["meta"]["created"].endswith("+00:00")
    other = make_webhook(client, tenant)
    assert other["meta"]["signing_secret"] != secret
    assert set(uuids(listed(client, tenant))) == {hook["uuid"], other["uuid"]}


def test_create_reports_every_invalid_item_by_path(client, tenant):
    response = create(
        client,
        tenant,
        {"type": "custom", "url": "https://ok.example.com", "events": ["driver.created"]},
        {"type": "webhookish", "url": "https://ok.example.com", "events": ["no.such_event"]},
        {"url": "https://ok.example.com"},
        {"type": "zapier", "url": "https://ok.example.com", "events": []},
    )
    assert response.status_code == 422
    body = response.json()
    assert body["status"] == 422 and body["validation"] is True
    errors = body["message"]
    assert errors["data.1.data.type"] == ["The selected data.1.data.type is invalid. Allowed values are `custom, zapier`."]
    assert errors["data.1.data.events.0"] == [
        "The selected data.1.data.events.0 is invalid. Allowed values are `form.completed, signature_packet.completed, "
        "driver.created, driver.updated, driver.deleted, vehicle.created, vehicle.updated, vehicle.deleted, premise.created, "
        "premise.updated, premise.deleted, building.created, building.updated, building.deleted, webhook.ping, "
        "webhook.disabled, delivery.failed`."
    ]
    assert errors["data.2.data.type"] == ["The data.2.data.type field is required."]
    assert errors["data.2.data.events"] == ["The data.2.data.events field is required."]
    assert errors["data.3.data.events"] == ["The data.3.data.events field must have at least 1 items."]
    assert not any(key.startswith("data.0") for key in errors)
    assert listed(client, tenant)["data"] == []


@pytest.mark.parametrize(
    "url, message",
    [
        ("http://hooks.example.com/in", "must start with https://"),
        ("https://203.0.113.7/in", "must not be an IP address"),
        ("https://[2001:db8::1]:8443/in", "must not be an IP address"),
        ("https://127.1/in", "must not be an IP address"),
        ("https://2130706433/in", "must not be an IP address"),
        ("https://0x7f.0.0.1/in", "must not be an IP address"),
        ("https://intranet/in", "must be a public domain name"),
        ("https://user:pw@hooks.example.com/in", "must not contain credentials"),
        ("https://hooks.example.com:99999/in", "must be a valid URL"),
        ("https://bad_host.example.com/in", "must be a valid URL"),
        ("not a url", "must be a valid URL"),
    ],
)
def test_create_refuses_bad_urls_with_422_on_the_url(client, tenant, url, message):
    response = create(client, tenant, {**HOOK, "url": url})
    assert response.status_code == 422, response.text
    errors = response.json()["message"]
    assert list(errors) == ["data.0.data.url"]
    if url != "not a url":
        assert errors["data.0.data.url"] == [f"The data.0.data.url field {message}."]


def test_localhost_needs_allow_private_and_ip_literals_never_pass():
    assert url_problem("https://localhost:8443/hook", allow_private=True) is None
    assert url_problem("https://localhost:8443/hook", allow_private=False) == "must be a public domain name"
    assert url_problem("https://api.localhost/hook", allow_private=False) == "must be a public domain name"
    for literal in ("https://127.0.0.1/", "https://[::1]/", "https://10.0.0.1/"):
        assert url_problem(literal, allow_private=True) == "must not be an IP address"
    assert url_problem("https://hooks.example.com/in?x=1", allow_private=False) is None
    assert url_problem("https://bücher.de/in", allow_private=False) is None


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.test/in",
        "https://evil.test./in",  # the root's trailing dot names the same host
        "https://a.internal/in",
        "https://printer.local./in",
        "https://x.onion/in",
        "https://router.home.arpa/in",
        "https://a.example/in",
        "https://nowhere.invalid./in",
        "https://localhost./in",
    ],
)
def test_names_that_are_never_public_are_refused_with_or_without_the_trailing_dot(url):
    assert url_problem(url, allow_private=False) == "must be a public domain name"
    assert url_problem(url, allow_private=True) is None


def test_create_dry_run_validates_and_writes_nothing(client, tenant):
    precognition = {"Precognition": "true"}
    passed = create(client, tenant, HOOK, headers=precognition)
    assert passed.status_code == 204
    assert passed.headers["Precognition-Success"] == "true"
    failed = create(client, tenant, {**HOOK, "url": "https://10.1.2.3/x"}, headers=precognition)
    assert failed.status_code == 422
    assert failed.headers["Precognition-Success"] == "false"
    assert list(failed.json()["message"]) == ["data.0.data.url"]
    only = create(
        client,
        tenant,
        {**HOOK, "url": "https://10.1.2.3/x"},
        headers={**precognition, "Precognition-Validate-Only": "data.0.data.events"},
    )
    assert only.status_code == 204
    assert listed(client, tenant)["data"] == []


def test_requests_need_a_token(client):
    assert client.get("/webhooks").status_code == 401
    assert client.post("/webhooks", json=webhook_items(HOOK)).status_code == 401


# ---- plan limit -------------------------------------------------------------------------------------


def test_plan_limit_counts_active_webhooks_and_writes_nothing_over_it(server, client):
    tenant = make_tenant(webhook_limit=2)
    assert create(client, tenant, HOOK).status_code == 201
    over = create(client, tenant, HOOK, HOOK)
    assert over.status_code == 400
    body = over.json()
    assert body["status"] == 400 and isinstance(body["message"], str) and "2" in body["message"]
    assert len(listed(client, tenant)["data"]) == 1  # neither item of the refused request was written
    second = create(client, tenant, HOOK).json()["data"][0]
    assert create(client, tenant, HOOK).status_code == 400

    # A disabled webhook does not count; re-enabling it does.
    assert patch(client, tenant, (second["uuid"], {"disabled": True})).status_code == 200
    third = create(client, tenant, HOOK)
    assert third.status_code == 201
    again = patch(client, tenant, (second["uuid"], {"disabled": None, "description": "back"}))
    assert again.status_code == 400
    current = {h["uuid"]: h for h in listed(client, tenant)["data"]}
    assert current[second["uuid"]]["data"]["disabled"] is not None
    assert current[second["uuid"]]["data"]["description"] is None
    # Disabling one and re-enabling another in the same request stays within the limit.
    swap = patch(client, tenant, (third.json()["data"][0]["uuid"], {"disabled": True}), (second["uuid"], {"disabled": None}))
    assert swap.status_code == 200, swap.text


def test_plan_limit_is_per_agency(server, client):
    small, other = make_tenant(webhook_limit=1), make_tenant(webhook_limit=1)
    assert create(client, small, HOOK).status_code == 201
    assert create(client, other, HOOK).status_code == 201
    assert create(client, small, HOOK).status_code == 400


# ---- update -----------------------------------------------------------------------------------------


def test_update_changes_only_what_is_given(client, tenant):
    hook = make_webhook(client, tenant, description="first")
    response = patch(client, tenant, (hook["uuid"], {"url": "https://other.example.org/x", "events": ["vehicle.deleted"]}))
    assert response.status_code == 200
    [updated] = response.json()["data"]
    assert updated["uuid"] == hook["uuid"]
    assert updated["data"] == {**hook["data"], "url": "https://other.example.org/x", "events": ["vehicle.deleted"]}
    assert updated["meta"]["signing_secret"] == hook["meta"]["signing_secret"]
    assert updated["meta"]["updated"] > hook["meta"]["updated"]
    cleared = patch(client, tenant, (hook["uuid"], {"description": None})).json()["data"][0]
    assert cleared["data"]["description"] is None


def test_update_refuses_type_changes_unknown_and_foreign_uuids(client, tenant, other_tenant):
    mine = make_webhook(client, tenant)
    theirs = make_webhook(client, other_tenant)
    same_type = patch(client, tenant, (mine["uuid"], {"type": "custom", "description": "ok"}))
    assert same_type.status_code == 200
    response = patch(
        client,
        tenant,
        (mine["uuid"], {"type": "zapier"}),
        (theirs["uuid"], {"description": "x"}),
        ("00000000-0000-4000-8000-000000000000", {"description": "x"}),
        (mine["uuid"], {"url": "https://192.168.0.1/x"}),
    )
    assert response.status_code == 422
    errors = response.json()["message"]
    assert errors["data.0.data.type"] == ["The data.0.data.type field cannot be changed; delete the webhook and create another."]
    assert errors["data.1.uuid"] == ["The selected data.1.uuid is invalid."]
    assert errors["data.2.uuid"] == ["The selected data.2.uuid is invalid."]
    assert errors["data.3.uuid"] == ["The data.3.uuid field has a duplicate value."]
    assert errors["data.3.data.url"] == ["The data.3.data.url field must not be an IP address."]
    assert listed(client, other_tenant)["data"][0]["data"]["description"] is None
    empty = patch(client, tenant, (mine["uuid"], {}))
    assert empty.status_code == 422
    assert "data.0.data" in empty.json()["message"]


def test_disable_and_re_enable(client, tenant):
    hook = make_webhook(client, tenant)
    before = datetime.datetime.now(datetime.UTC)
    disabled = patch(client, tenant, (hook["uuid"], {"disabled": True})).json()["data"][0]
    after = datetime.datetime.now(datetime.UTC)
    moment = datetime.datetime.fromisoformat(disabled["data"]["disabled"])
    assert before <= moment <= after  # the time of the request, however long it took
    # Disabling again keeps the original time.
    again = patch(client, tenant, (hook["uuid"], {"disabled": True})).json()["data"][0]
    assert again["data"]["disabled"] == disabled["data"]["disabled"]
    enabled = patch(client, tenant, (hook["uuid"], {"disabled": None})).json()["data"][0]
    assert enabled["data"]["disabled"] is None
    patch(client, tenant, (hook["uuid"], {"disabled": True}))
    assert patch(client, tenant, (hook["uuid"], {"disabled": False})).json()["data"][0]["data"]["disabled"] is None


def test_update_dry_run_writes_nothing(client, tenant):
    hook = make_webhook(client, tenant)
    passed = patch(client, tenant, (hook["uuid"], {"url": "https://new.example.com/"}), headers={"Precognition": "true"})
    assert passed.status_code == 204
    failed = patch(client, tenant, (hook["uuid"], {"type": "zapier"}), headers={"Precognition": "true"})
    assert failed.status_code == 422 and failed.headers["Precognition-Success"] == "false"
    assert listed(client, tenant)["data"][0]["data"]["url"] == hook["data"]["url"]


# ---- delete and rotate-secret -----------------------------------------------------------------------


def test_delete_answers_the_deleted_items(client, tenant, other_tenant):
    first, second = make_webhook(client, tenant), make_webhook(client, tenant)
    theirs = make_webhook(client, other_tenant)
    refused = delete(client, tenant, first["uuid"], theirs["uuid"])
    assert refused.status_code == 422
    assert list(refused.json()["message"]) == ["data.1.uuid"]
    assert len(listed(client, tenant)["data"]) == 2
    response = delete(client, tenant, first["uuid"])
    assert response.status_code == 200
    assert response.json() == {"data": [{"object": "webhook", "uuid": first["uuid"]}]}
    assert uuids(listed(client, tenant)) == [second["uuid"]]
    assert uuids(listed(client, other_tenant)) == [theirs["uuid"]]


def test_rotate_secret_replaces_the_secret(client, tenant, other_tenant):
    hook = make_webhook(client, tenant)
    response = client.post(f"/webhooks/{hook['uuid']}/rotate-secret", headers=tenant.headers)
    assert response.status_code == 200
    [rotated] = response.json()["data"]
    assert rotated["uuid"] == hook["uuid"]
    assert rotated["meta"]["signing_secret"] != hook["meta"]["signing_secret"]
    assert listed(client, tenant)["data"][0]["meta"]["signing_secret"] == rotated["meta"]["signing_secret"]
    assert client.post(f"/webhooks/{hook['uuid']}/rotate-secret", headers=other_tenant.headers).status_code == 404
    assert client.post("/webhooks/not-a-uuid/rotate-secret", headers=tenant.headers).status_code == 404


# ---- list -------------------------------------------------------------------------------------------


def test_list_filters(client, tenant, other_tenant):
    crm = make_webhook(
        client,
        tenant,
        url="https://crm.example.com/a",
        events=["driver.created", "form.completed"],
        description="CRM sync",
    )
    zap = make_webhook(client, tenant, url="https://hooks.zapier.com/b", events=["signature_packet.completed"], type_="zapier")
    off = make_webhook(client, tenant, url="https://audit.example.net/c", events=["driver.deleted"])
    patch(client, tenant, (off["uuid"], {"disabled": True}))
    make_webhook(client, other_tenant, url="https://crm.example.com/other", events=["driver.created"])

    def matching(**filters):
        return set(uuids(listed(client, tenant, **{f"filter[{k}]": v for k, v in filters.items()})))

    assert matching() == {crm["uuid"], zap["uuid"], off["uuid"]}
    assert matching(type="zapier") == {zap["uuid"]}
    assert matching(type="custom,zapier") == {crm["uuid"], zap["uuid"], off["uuid"]}
    assert matching(events="form.completed") == {crm["uuid"]}
    assert matching(events="signature_packet.completed,driver.deleted") == {zap["uuid"], off["uuid"]}
    assert matching(events="vehicle.created") == set()
    assert matching(is_disabled="false") == {crm["uuid"], zap["uuid"]}
    assert matching(is_disabled="true") == {crm["uuid"], zap["uuid"], off["uuid"]}
    assert matching(disabled="2000-01-01,") == {off["uuid"]}
    assert matching(uuid=f"{crm['uuid']},{off['uuid']}") == {crm["uuid"], off["uuid"]}
    assert matching(search="zapier") == {zap["uuid"]}
    assert matching(search="crm sync") == {crm["uuid"]}
    assert matching(search="EXAMPLE.NET") == {off["uuid"]}
    assert matching(created="2000-01-01,2000-12-31") == set()
    assert matching(updated="2000-01-01,") == {crm["uuid"], zap["uuid"], off["uuid"]}

    bad = client.get("/webhooks", params={"filter[events]": "nope.created", "filter[colour]": "x"}, headers=tenant.headers)
    assert bad.status_code == 422
    assert bad.json()["message"]["filter[events]"][0].startswith(
        "The selected filter[events] is invalid. Allowed values are `form.completed, signature_packet.completed, "
    )
    assert bad.json()["message"]["filter"][0].startswith("Requested filter(s) `colour` are not allowed.")
    bad_sort = client.get("/webhooks", params={"sort": "url"}, headers=tenant.headers)
    assert bad_sort.status_code == 422
    assert bad_sort.json()["message"]["sort"] == [
        "Requested sort(s) `url` is not allowed. Allowed sort(s) are `created, updated`."
    ]


def test_list_paginates_and_sorts(server, client):
    tenant = make_tenant(webhook_limit=20)
    made = [make_webhook(client, tenant, url=f"https://h{i}.example.com/") for i in range(12)]
    first = listed(client, tenant, per_page=10)
    assert uuids(first) == [h["uuid"] for h in made[:10]]
    assert first["next_cursor"] and first["prev_cursor"] is None and first["per_page"] == 10
    second = listed(client, tenant, per_page=10, cursor=first["next_cursor"])
    assert uuids(second) == [h["uuid"] for h in made[10:]]
    assert second["next_cursor"] is None
    back = listed(client, tenant, per_page=10, cursor=second["prev_cursor"])
    assert uuids(back) == uuids(first)
    newest = listed(client, tenant, per_page=10, sort="-created")
    assert uuids(newest) == [h["uuid"] for h in reversed(made)][:10]
