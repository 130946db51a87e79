"""Dry-runs (Laravel Precognition): validation only, nothing written."""

import os

import httpx
import pytest
from playhouse.db_url import connect

import models
from models.tenancy import Risk
from toolkit.tenants import items

PRECOG = {"Precognition": "true"}


def count(client, tenant):
    return len(client.get(tenant.url("/drivers"), headers=tenant.headers).json()["data"])


def test_valid_dry_run_writes_nothing(client, tenant):
    response = client.post(
        tenant.url("/drivers"), json=items("driver", {"first_name": "A"}), headers={**tenant.headers, **PRECOG}
    )
    assert response.status_code == 204
    assert response.headers["Precognition-Success"] == "true"
    assert response.headers["Precognition"] == "true"
    assert "Precognition" in response.headers["Vary"]
    assert response.content == b""
    assert count(client, tenant) == 0


def test_invalid_dry_run_runs_database_rules(client, tenant):
    client.post(tenant.url("/drivers"), json=items("driver", {"number": 1}), headers=tenant.headers)
    response = client.post(
        tenant.url("/drivers"), json=items("driver", {"number": 1}, {"sex": "x"}), headers={**tenant.headers, **PRECOG}
    )
    assert response.status_code == 422
    assert response.headers["Precognition-Success"] == "false"
    assert response.headers["Precognition"] == "true"
    assert response.json()["errors"] == {
        "data.0.data.number": ["The data.0.data.number has already been taken."],
        "data.1.data.sex": ["The selected data.1.data.sex is invalid. Allowed values are `male, female, non_binary, unknown`."],
    }
    assert count(client, tenant) == 1


def test_validate_only_limits_the_fields(client, tenant):
    body = items("driver", {"number": "x", "sex": "bogus"}, {"sex": "nope"})
    only = {**tenant.headers, **PRECOG, "Precognition-Validate-Only": "data.*.data.sex"}
    response = client.post(tenant.url("/drivers"), json=body, headers=only)
    assert response.status_code == 422
    assert set(response.json()["errors"]) == {"data.0.data.sex", "data.1.data.sex"}
    passing = {**tenant.headers, **PRECOG, "Precognition-Validate-Only": "data.0.data.first_name"}
    response = client.post(tenant.url("/drivers"), json=body, headers=passing)
    assert response.status_code == 204 and response.headers["Precognition-Success"] == "true"


def test_update_dry_run_changes_nothing(client, tenant):
    driver = client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "A"}), headers=tenant.headers).json()[
        "data"
    ][0]
    body = {"data": [{"object": "driver", "uuid": driver["uuid"], "data": {"first_name": "B"}}]}
    response = client.patch(tenant.url(), json=body, headers={**tenant.headers, **PRECOG})
    assert response.status_code == 204
    assert client.get(tenant.url("/drivers"), headers=tenant.headers).json()["data"][0]["data"]["first_name"] == "A"
    missing = {"data": [{"object": "driver", "uuid": "00000000-0000-4000-8000-000000000000", "data": {"first_name": "B"}}]}
    response = client.patch(tenant.url(), json=missing, headers={**tenant.headers, **PRECOG})
    assert response.status_code == 422 and response.headers["Precognition-Success"] == "false"


def test_every_response_varies_on_precognition(client, tenant):
    for response in (
        client.get(tenant.url("/drivers"), headers=tenant.headers),
        client.post(tenant.url("/drivers"), json={"data": []}, headers=tenant.headers),
    ):
        assert "Precognition" in response.headers["Vary"]
        assert "Precognition" not in response.headers


def _counts() -> tuple:
    """Count every row a write could leave behind."""
    import models
    from models.risk_data import Address, Driver
    from models.webhooks import Delivery, Event, Webhook

    with models.db.connection_context():
        return tuple(model.select().count() for model in (Driver, Address, Webhook, Event, Delivery))


def test_dry_run_delete_checks_and_deletes_nothing(client, tenant):
    from tests.support import make_webhook

    make_webhook(client, tenant, events=["driver.deleted"])
    created = client.post(tenant.url("/drivers"), json=items("driver", {}, {}), headers=tenant.headers).json()["data"]
    body = {"data": [{"object": "driver", "uuid": d["uuid"]} for d in created]}
    before = _counts()
    response = client.request("DELETE", tenant.url(), json=body, headers={**tenant.headers, **PRECOG})
    assert response.status_code == 204 and response.headers["Precognition-Success"] == "true"
    assert "Content-Type" not in response.headers and response.content == b""
    override = {**tenant.headers, **PRECOG, "X-HTTP-Method-Override": "DELETE"}
    assert client.post(tenant.url(), json=body, headers=override).status_code == 204
    assert client.post(tenant.url(), json={**body, "_method": "DELETE"}, headers={**tenant.headers, **PRECOG}).status_code == 204
    assert _counts() == before
    missing = {"data": [{"object": "driver", "uuid": "00000000-0000-4000-8000-000000000000"}]}
    response = client.request("DELETE", tenant.url(), json=missing, headers={**tenant.headers, **PRECOG})
    assert response.status_code == 422 and response.headers["Precognition-Success"] == "false"
    assert "data.0.uuid" in response.json()["errors"]
    assert count(client, tenant) == 2


def test_dry_run_writes_nothing_on_any_route(client, tenant):
    from tests.support import make_webhook

    hook = make_webhook(client, tenant, events=["driver.created", "form.completed"])
    client.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)
    delivery = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers).json()["data"][0]
    dry = {**tenant.headers, **PRECOG}
    secret = client.get("/webhooks", headers=tenant.headers).json()["data"][0]["meta"]["signing_secret"]
    before = _counts()
    calls = [
        ("POST", f"/webhooks/{hook['uuid']}/rotate-secret", None),
        ("POST", f"/webhooks/{hook['uuid']}/ping", None),
        ("POST", f"/webhooks/{hook['uuid']}/deliveries/{delivery['uuid']}/redeliver", None),
        ("POST", "/events", {"event": "form.completed", "data": {"form": "F-1"}}),
        ("DELETE", "/webhooks", {"data": [{"object": "webhook", "uuid": hook["uuid"]}]}),
    ]
    for method, path, body in calls:
        response = client.request(method, path, json=body, headers=dry)
        assert response.status_code == 204, (path, response.text)
        assert response.headers["Precognition-Success"] == "true" and response.headers["Precognition"] == "true"
    assert _counts() == before
    after = client.get("/webhooks", headers=tenant.headers).json()["data"][0]
    assert after["meta"]["signing_secret"] == secret
    again = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers).json()["data"][0]
    assert again["meta"]["updated"] == delivery["meta"]["updated"]
    bad = client.post("/webhooks/00000000-0000-4000-8000-000000000000/ping", headers=dry)
    assert bad.status_code == 404


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="PostgreSQL's row locks (CI's postgres pass); on SQLite every write transaction takes the writer lock",
)
def test_a_dry_run_does_not_wait_for_a_write_in_progress_on_its_rows(client, tenant, settings):
    driver = client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "A"}), headers=tenant.headers).json()
    with models.db.connection_context():
        risk_id = Risk.get(Risk.uuid == tenant.risk).id
    writer = connect(settings.database_url)
    # Another process's write, begun and not yet committed: it holds the profile's numbering and the driver's row.
    with writer.atomic():
        writer.execute_sql("SELECT id FROM risk WHERE id = %s FOR UPDATE", (risk_id,))
        writer.execute_sql("SELECT id FROM driver WHERE risk_id = %s FOR UPDATE", (risk_id,))
        dry = {**tenant.headers, **PRECOG}
        named = {"object": "driver", "uuid": driver["data"][0]["uuid"]}
        update = {"data": [{**named, "data": {"first_name": "B"}}]}
        # A dry run that waited for the locks would wait for good: the timeout only ends such a failure, and
        # is roomy so that a busy machine's slow answer is not taken for one.
        with httpx.Client(base_url=str(client.base_url), timeout=30) as impatient:
            assert impatient.post(tenant.url("/drivers"), json=items("driver", {}), headers=dry).status_code == 204
            assert impatient.patch(tenant.url(), json=update, headers=dry).status_code == 204
            assert impatient.request("DELETE", tenant.url(), json={"data": [named]}, headers=dry).status_code == 204
    writer.close()
    assert count(client, tenant) == 1
