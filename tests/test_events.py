"""Events: what risk-data writes emit, POST /events, ping, and the outbox's cost when nobody listens."""

from __future__ import annotations

import json

import pytest

import models
from models.webhooks import Delivery, Event
from tests.support import make_webhook
from toolkit.tenants import items
from webhooks import outbox


def log(client, tenant, hook, **params) -> list[dict]:
    response = client.get(f"/webhooks/{hook['uuid']}/deliveries", params=params, headers=tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def bodies(hook_uuid: str) -> list[dict]:
    """The delivered bodies of a webhook's deliveries, oldest first."""
    from models.webhooks import Webhook

    with models.db.connection_context():
        query = (
            Event.select(Event.body)
            .join(Delivery, on=(Delivery.stored_event == Event.id))
            .join(Webhook)
            .where(Webhook.uuid == hook_uuid)
            .order_by(Delivery.id)
        )
        return [json.loads(body) for (body,) in query.tuples()]


def test_every_risk_data_write_emits_one_event_per_object(client, tenant):
    every = [f"{kind}.{action}" for kind in ("driver", "vehicle") for action in ("created", "updated", "deleted")]
    hook = make_webhook(client, tenant, events=every)
    vehicles = client.post(tenant.url("/vehicles"), json=items("vehicle", {"make": "Volvo"}), headers=tenant.headers)
    vehicle = vehicles.json()["data"][0]
    created = client.post(
        tenant.url("/drivers"), json=items("driver", {"first_name": "A"}, {"first_name": "B"}), headers=tenant.headers
    )
    drivers = created.json()["data"]
    update = {"data": [{"object": "driver", "uuid": drivers[0]["uuid"], "data": {"last_name": "Z"}}]}
    assert client.patch(tenant.url(), json=update, headers=tenant.headers).status_code == 200
    gone = {"data": [{"object": "driver", "uuid": drivers[1]["uuid"]}, {"object": "vehicle", "uuid": vehicle["uuid"]}]}
    assert client.request("DELETE", tenant.url(), json=gone, headers=tenant.headers).status_code == 200

    sent = bodies(hook["uuid"])
    assert [(b["event"], b["data"]["uuid"]) for b in sent] == [
        ("vehicle.created", vehicle["uuid"]),
        ("driver.created", drivers[0]["uuid"]),
        ("driver.created", drivers[1]["uuid"]),
        ("driver.updated", drivers[0]["uuid"]),
        ("driver.deleted", drivers[1]["uuid"]),
        ("vehicle.deleted", vehicle["uuid"]),
    ]
    assert all(b["data"]["risk"] == tenant.risk for b in sent)
    assert sent[1]["data"] == {**drivers[0], "risk": tenant.risk}
    assert sent[3]["data"]["data"]["last_name"] == "Z" and sent[3]["data"]["profile_type"] == "commercial"
    assert sent[4]["data"] == {
        "object": "driver",
        "uuid": drivers[1]["uuid"],
        "profile_type": "commercial",
        "risk": tenant.risk,
    }
    assert len({b["id"] for b in sent}) == 6
    assert [d["data"]["status"] for d in log(client, tenant, hook)] == ["pending"] * 6
    driver_log = log(client, tenant, hook, **{"filter[event]": "driver.created,driver.deleted"})
    assert len(driver_log) == 3


def test_only_subscribed_webhooks_of_the_agency_get_deliveries_a_disabled_one_skipped(client, tenant, other_tenant):
    drivers = make_webhook(client, tenant, events=["driver.created"])
    vehicles = make_webhook(client, tenant, events=["vehicle.created"])
    off = make_webhook(client, tenant, events=["driver.created"])
    client.patch(
        "/webhooks",
        json={"data": [{"object": "webhook", "uuid": off["uuid"], "data": {"disabled": True}}]},
        headers=tenant.headers,
    )
    foreign = make_webhook(client, other_tenant, events=["driver.created"])
    client.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)
    assert len(log(client, tenant, drivers)) == 1
    assert log(client, tenant, vehicles) == []
    # Kept, not sent, for recovery once it is enabled again (test_recover).
    assert [(d["data"]["status"], d["data"]["attempts"]) for d in log(client, tenant, off)] == [("skipped", [])]
    assert log(client, other_tenant, foreign) == []
    # Another agency sees neither the webhook nor its log.
    response = client.get(f"/webhooks/{drivers['uuid']}/deliveries", headers=other_tenant.headers)
    assert response.status_code == 404


def test_dry_runs_and_failed_writes_emit_nothing(client, tenant):
    hook = make_webhook(client, tenant, events=["driver.created", "driver.updated"])
    dry = client.post(tenant.url("/drivers"), json=items("driver", {}), headers={**tenant.headers, "Precognition": "true"})
    assert dry.status_code == 204
    bad = client.post(tenant.url("/drivers"), json=items("driver", {}, {"number": "x"}), headers=tenant.headers)
    assert bad.status_code == 422
    driver = client.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers).json()["data"][0]
    failed_update = {
        "data": [
            {"object": "driver", "uuid": driver["uuid"], "data": {"first_name": "ok"}},
            {"object": "driver", "uuid": "00000000-0000-4000-8000-000000000000", "data": {"first_name": "x"}},
        ]
    }
    assert client.patch(tenant.url(), json=failed_update, headers=tenant.headers).status_code == 422
    assert [d["data"]["event"] for d in log(client, tenant, hook)] == ["driver.created"]


def test_publish_event(client, tenant, other_tenant):
    hook = make_webhook(client, tenant, events=["form.completed"])
    theirs = make_webhook(client, other_tenant, events=["form.completed"])
    response = client.post(
        "/events", json={"event": "form.completed", "data": {"form": "F-1", "n": [1, 2]}}, headers=tenant.headers
    )
    assert response.status_code == 202
    accepted = response.json()
    assert accepted["event"] == "form.completed" and accepted["created"].endswith("+00:00")
    [delivery] = log(client, tenant, hook)
    assert delivery["data"]["event_id"] == accepted["id"]
    assert bodies(hook["uuid"]) == [
        {
            "id": accepted["id"],
            "event": "form.completed",
            "created": accepted["created"],
            "data": {"form": "F-1", "n": [1, 2]},
        }
    ]
    assert log(client, other_tenant, theirs) == []
    # Nobody subscribed: still accepted, with an id.
    unheard = client.post("/events", json={"event": "signature_packet.completed", "data": {}}, headers=tenant.headers)
    assert unheard.status_code == 202 and unheard.json()["id"] != accepted["id"]


@pytest.mark.parametrize(
    "body, path",
    [
        ({"event": "driver.created", "data": {}}, "event"),
        ({"event": "webhook.ping", "data": {}}, "event"),
        ({"event": "form.exploded", "data": {}}, "event"),
        ({"event": "form.completed"}, "data"),
        ({"event": "form.completed", "data": [1]}, "data"),
    ],
)
def test_publish_refuses_unknown_or_internal_events(client, tenant, body, path):
    response = client.post("/events", json=body, headers=tenant.headers)
    assert response.status_code == 422
    assert path in response.json()["message"]


def test_ping_goes_to_that_webhook_only(client, tenant, other_tenant):
    hook = make_webhook(client, tenant, events=["vehicle.created"])
    other = make_webhook(client, tenant, events=["webhook.ping"])
    response = client.post(f"/webhooks/{hook['uuid']}/ping", headers=tenant.headers)
    assert response.status_code == 202
    accepted = response.json()
    assert accepted["event"] == "webhook.ping"
    [delivery] = log(client, tenant, hook)
    assert delivery["uuid"] == accepted["delivery"] and delivery["data"]["event_id"] == accepted["id"]
    assert bodies(hook["uuid"])[0]["data"] == {"object": "webhook", "uuid": hook["uuid"]}
    assert log(client, tenant, other) == []
    assert client.post(f"/webhooks/{hook['uuid']}/ping", headers=other_tenant.headers).status_code == 404
    client.patch(
        "/webhooks",
        json={"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"disabled": True}}]},
        headers=tenant.headers,
    )
    assert client.post(f"/webhooks/{hook['uuid']}/ping", headers=tenant.headers).status_code == 409


def test_deleting_a_webhook_deletes_its_deliveries(client, tenant):
    hook = make_webhook(client, tenant)
    client.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)
    assert len(log(client, tenant, hook)) == 1
    client.request("DELETE", "/webhooks", json={"data": [{"object": "webhook", "uuid": hook["uuid"]}]}, headers=tenant.headers)
    with models.db.connection_context():
        assert not Delivery.select().join(models.webhooks.Webhook).where(models.webhooks.Webhook.uuid == hook["uuid"]).exists()


class _Counter:
    """Counts the SQL statements a database runs."""

    def __init__(self, database):
        self.database = database
        self.statements: list[str] = []

    def __enter__(self):
        original, cursor = self.database.execute_sql, self.database.cursor

        def counting(sql, params=None, *args, **kwargs):
            self.statements.append(sql)
            return original(sql, params, *args, **kwargs)

        def copying(*args, **kwargs):
            # PostgreSQL's COPY (models.inserts) goes through a cursor's copy(), not execute_sql.
            return _CopyCounter(cursor(*args, **kwargs), self.statements)

        self.database.execute_sql = counting
        self.database.cursor = copying
        return self

    def __exit__(self, *exc):
        del self.database.execute_sql
        del self.database.cursor


class _CopyCounter:
    """A database cursor that counts the COPY statements run through it."""

    def __init__(self, cursor, statements: list[str]):
        self.cursor, self.statements = cursor, statements

    def copy(self, statement, *args, **kwargs):
        self.statements.append(statement)
        return self.cursor.copy(statement, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.cursor, name)


def test_record_costs_one_query_when_nobody_is_subscribed(client, tenant):
    make_webhook(client, tenant, events=["vehicle.created"])
    payloads = [{"object": "driver", "uuid": str(i)} for i in range(1000)]
    with models.db.connection_context(), _Counter(models.db.obj) as counter:
        with models.atomic():
            assert outbox.record(tenant.agency.id, "driver.created", payloads) == []
    queries = [sql for sql in counter.statements if not sql.upper().startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))]
    assert len(queries) == 1, counter.statements


def test_record_writes_in_bulk_for_a_thousand_objects(client, tenant):
    make_webhook(client, tenant, events=["driver.created"])
    make_webhook(client, tenant, events=["driver.created"])
    payloads = [{"object": "driver", "uuid": str(i)} for i in range(1000)]
    with models.db.connection_context(), _Counter(models.db.obj) as counter:
        with models.atomic():
            written = outbox.record(tenant.agency.id, "driver.created", payloads)
    assert len(written) == 1000
    # The events, then the deliveries: multi-row INSERTs (SQLite) or COPY (PostgreSQL), a few statements each.
    writes = [sql for sql in counter.statements if sql.upper().startswith(("INSERT", "COPY"))]
    assert 2 <= len(writes) <= 8, writes
    with models.db.connection_context():
        assert Delivery.select().join(Event).where(Event.uuid.in_([w["id"] for w in written])).count() == 2000


def test_event_types_list_every_event_with_its_payload_schema_from_the_spec(client, tenant):
    import spec
    from services.schema_validation import SchemaValidator

    response = client.get("/event-types", headers=tenant.headers)
    assert response.status_code == 200, response.text
    types = response.json()["data"]
    assert [t["name"] for t in types] == spec.schema("EventName")["enum"]
    assert all(t["object"] == "event_type" and t["description"] for t in types)
    by_name = {t["name"]: t for t in types}
    # The schema is the one deliveries carry: a real driver.created payload validates, a deleted one does not.
    created = client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "Ann"}), headers=tenant.headers).json()
    payload = {**created["data"][0], "risk": tenant.risk}
    assert SchemaValidator(by_name["driver.created"]["schema"]).errors(payload) == {}
    assert SchemaValidator(by_name["driver.deleted"]["schema"]).errors(payload) != {}
    assert (
        SchemaValidator(by_name["driver.deleted"]["schema"]).errors(
            {"object": "driver", "uuid": created["data"][0]["uuid"], "profile_type": "commercial", "risk": tenant.risk}
        )
        == {}
    )
    assert by_name["webhook.ping"]["schema"]["required"] == ["object", "uuid"]


def test_event_types_filter_by_name_and_refuse_unknown_names(client, tenant):
    response = client.get("/event-types", params={"filter[name]": "webhook.ping,form.completed"}, headers=tenant.headers)
    assert [t["name"] for t in response.json()["data"]] == ["form.completed", "webhook.ping"]
    assert client.get("/event-types", params={"filter[name]": "driver.sold"}, headers=tenant.headers).status_code == 422
    assert client.get("/event-types").status_code == 401
