"""Idempotency-Key over HTTP: a retry answers the first answer and writes nothing again; misuse is a clear error."""

import datetime
import uuid

import pytest

import models
import spec
from api import idempotency
from models import utcnow
from models.idempotency import IdempotencyKey
from models.risk_data import Driver
from models.tenancy import Risk
from models.webhooks import Delivery, Event, Webhook
from tests.support import make_webhook
from toolkit.tenants import items

DRIVERS = items("driver", {"first_name": "Ada", "last_name": "Lee"}, {"first_name": "Sam"})


def keyed(tenant, key: str | bytes, **extra) -> dict:
    """The tenant's headers with an Idempotency-Key."""
    return {**tenant.headers, "Idempotency-Key": key, **extra}


def counts(tenant) -> tuple[int, int, int]:
    """(drivers of the tenant's risk profile, events of its agency, their deliveries)."""
    with models.db.connection_context():
        risk = Risk.get(Risk.uuid == tenant.risk)
        events = Event.select(Event.id).where(Event.agency == tenant.agency.id)
        return (
            Driver.select().where(Driver.risk == risk.id).count(),
            events.count(),
            Delivery.select().where(Delivery.stored_event.in_(events)).count(),
        )


def stored(tenant, key: str) -> IdempotencyKey | None:
    with models.db.connection_context():
        return IdempotencyKey.find(tenant.agency.id, key)


def test_every_write_operation_declares_the_key_and_its_answers():
    writes = [
        (path, method, op)
        for path, item in spec.resolved()["paths"].items()
        for method, op in item.items()
        if method in {"post", "patch", "delete"}
    ]
    assert len(writes) == 18
    for path, method, op in writes:
        params = spec.parameters(op["operationId"])
        assert any(p["in"] == "header" and p["name"] == idempotency.HEADER for p in params), (method, path)
        assert "Retry-After" in op["responses"]["409"]["headers"], (method, path)
        success = next(code for code in op["responses"] if code in {"200", "201", "202"})
        assert idempotency.REPLAYED in op["responses"][success]["headers"], (method, path)


def test_a_retry_answers_the_first_answer_and_nothing_happens_twice(client, tenant):
    make_webhook(client, tenant, events=["driver.created"])
    key = str(uuid.uuid4())
    first = client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key))
    assert first.status_code == 201, first.text
    assert idempotency.REPLAYED not in first.headers
    assert counts(tenant) == (2, 2, 2)
    # The same request, its JSON keys in another order: the same canonical body.
    reordered = {"data": [{"data": item["data"], "object": "driver"} for item in DRIVERS["data"]]}
    for body in (DRIVERS, reordered):
        again = client.post(tenant.url("/drivers"), json=body, headers=keyed(tenant, key))
        assert again.status_code == 201
        assert again.headers[idempotency.REPLAYED] == "true"
        assert again.headers["content-type"] == "application/json"
        assert again.content == first.content
    assert counts(tenant) == (2, 2, 2)  # no row, no event, no delivery a second time


def test_the_key_with_another_request_answers_422_naming_it(client, tenant):
    key = str(uuid.uuid4())
    assert client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key)).status_code == 201
    other_body = items("driver", {"first_name": "Other"})
    for method, path, body in [
        ("POST", tenant.url("/drivers"), other_body),
        ("POST", tenant.url("/vehicles"), items("vehicle", {"make": "Ford"})),
        ("POST", tenant.url("/drivers") + "?include=address", DRIVERS),
        ("PATCH", tenant.url(), {"data": []}),
    ]:
        response = client.request(method, path, json=body, headers=keyed(tenant, key))
        assert response.status_code == 422, (method, path, response.text)
        assert list(response.json()["errors"]) == ["Idempotency-Key"]
        assert "Idempotency-Key" in response.json()["errors"]["Idempotency-Key"][0]
    assert counts(tenant)[0] == 2


@pytest.mark.parametrize("value", [b"", b"x" * 256, "caf\u00e9".encode("latin-1")])
def test_an_empty_too_long_or_unprintable_key_answers_422(client, tenant, value):
    hook = make_webhook(client, tenant)
    for path, body in [(tenant.url("/drivers"), DRIVERS), (f"/webhooks/{hook['uuid']}/ping", None)]:
        headers = keyed(tenant, value)
        response = client.post(path, json=body, headers=headers)
        assert response.status_code == 422, response.text
        assert "Idempotency-Key" in response.json()["errors"]
    assert counts(tenant)[0] == 0
    assert client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, "x" * 255)).status_code == 201


def test_a_request_refused_before_or_by_its_rules_does_not_spend_its_key(client, tenant):
    key = str(uuid.uuid4())
    unknown_vehicle = items("driver", {"first_name": "Ada", "vehicle": str(uuid.uuid4())})
    refused = [
        ({**keyed(tenant, key), "Authorization": "Bearer nope"}, DRIVERS, 401),  # before it ran
        (keyed(tenant, key), items("driver", {"date_of_birth": "not a date"}), 422),  # the body's schema
        (keyed(tenant, key), unknown_vehicle, 422),  # the write's rules, checked in its transaction
    ]
    for headers, body, status in refused:
        response = client.post(tenant.url("/drivers"), json=body, headers=headers)
        assert response.status_code == status, response.text
        assert stored(tenant, key) is None
    missing = client.post(f"/risks/{uuid.uuid4()}/data/drivers", json=DRIVERS, headers=keyed(tenant, key))
    assert missing.status_code == 404 and stored(tenant, key) is None
    corrected = client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key))
    assert corrected.status_code == 201 and idempotency.REPLAYED not in corrected.headers
    assert counts(tenant)[0] == 2


def test_a_dry_run_neither_reads_nor_spends_a_key(client, tenant):
    key = str(uuid.uuid4())
    dry = keyed(tenant, key, Precognition="true")
    assert client.post(tenant.url("/drivers"), json=DRIVERS, headers=dry).status_code == 204
    assert stored(tenant, key) is None
    assert client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key)).status_code == 201
    # Another body under the spent key: a dry-run validates it, it does not compare it with the key's.
    other = client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "B"}), headers=dry)
    assert other.status_code == 204 and idempotency.REPLAYED not in other.headers
    assert counts(tenant)[0] == 2


def test_keys_belong_to_their_agency(client, tenant, other_tenant):
    key = str(uuid.uuid4())
    for owner in (tenant, other_tenant):
        response = client.post(owner.url("/drivers"), json=DRIVERS, headers=keyed(owner, key))
        assert response.status_code == 201 and idempotency.REPLAYED not in response.headers
        assert counts(owner)[0] == 2


def test_a_key_in_use_answers_409_until_its_lease_ends_then_the_retry_runs(client, tenant):
    key = str(uuid.uuid4())
    path = f"/api/v1{tenant.url('/drivers')}"
    print_ = idempotency.fingerprint("POST", path, [], idempotency.canonical(DRIVERS))
    with models.db.connection_context():  # a request of another process holds the key, as its row says
        assert IdempotencyKey.claim_new(tenant.agency.id, key, print_, idempotency.LEASE, 3600) is not None
    busy = client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key))
    assert busy.status_code == 409 and busy.headers["Retry-After"] == "1"
    assert busy.json() == {"message": busy.json()["message"], "status": 409} and "Idempotency-Key" in busy.json()["message"]
    assert counts(tenant)[0] == 0
    with models.db.connection_context():  # that process died before its commit: its lease ran out
        IdempotencyKey.update(lease=utcnow() - datetime.timedelta(seconds=1)).where(IdempotencyKey.key == key).execute()
    ran = client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key))
    assert ran.status_code == 201 and idempotency.REPLAYED not in ran.headers
    replayed = client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key))
    assert replayed.headers[idempotency.REPLAYED] == "true" and replayed.content == ran.content
    assert counts(tenant)[0] == 2


def test_an_expired_key_is_unknown_again(client, tenant):
    key = str(uuid.uuid4())
    assert client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key)).status_code == 201
    with models.db.connection_context():
        IdempotencyKey.update(expires=utcnow() - datetime.timedelta(seconds=1)).where(IdempotencyKey.key == key).execute()
    other = client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "C"}), headers=keyed(tenant, key))
    assert other.status_code == 201 and idempotency.REPLAYED not in other.headers
    assert counts(tenant)[0] == 3


def test_every_other_write_replays_too(client, tenant):
    hook = make_webhook(client, tenant, events=["form.completed"])
    rotate, ping = f"/webhooks/{hook['uuid']}/rotate-secret", f"/webhooks/{hook['uuid']}/ping"
    event = {"event": "form.completed", "data": {"form": "acord-125"}}
    answers = {}
    for path, body in [(rotate, None), (ping, None), ("/events", event)]:
        key = str(uuid.uuid4())
        first = client.post(path, json=body, headers=keyed(tenant, key))
        again = client.post(path, json=body, headers=keyed(tenant, key))
        assert first.status_code in {200, 202} and again.status_code == first.status_code, first.text
        assert again.content == first.content and again.headers[idempotency.REPLAYED] == "true"
        answers[path] = first.json()
    with models.db.connection_context():  # rotated once: the secret is the one the first answer gave
        secret = Webhook.get(Webhook.uuid == hook["uuid"]).secret
    assert secret == answers[rotate]["data"][0]["meta"]["signing_secret"]
    assert counts(tenant)[1:] == (2, 2)  # one ping, one published event, each delivered once


def test_replays_and_conflicts_are_counted(server, client, tenant):
    def counted(outcome: str) -> float:
        for line in client.get(server.url + "/metrics").text.splitlines():
            if line.startswith(f'riskapi_idempotency_keys_total{{outcome="{outcome}"}}'):
                return float(line.split()[-1])
        return 0.0

    before = {outcome: counted(outcome) for outcome in ("replayed", "mismatch")}
    key = str(uuid.uuid4())
    for body in (DRIVERS, DRIVERS, items("driver", {})):
        client.post(tenant.url("/drivers"), json=body, headers=keyed(tenant, key))
    assert counted("replayed") == before["replayed"] + 1
    assert counted("mismatch") == before["mismatch"] + 1
