"""webhooks.outbox: events and deliveries written in the caller's transaction, for the subscribed active webhooks only."""

import datetime
import json
import uuid

import pytest

import models
from models.webhooks import PENDING, PING, SKIPPED, Delivery, Event, Webhook, pack_events
from tests.support import make_tenant
from webhooks import outbox


def hook(agency_id: int, *events: str, disabled=None) -> Webhook:
    """Store a webhook of an agency subscribed to events."""
    return Webhook.create(
        agency=agency_id,
        type="custom",
        url="https://hooks.example.com/in",
        events=pack_events(events),
        secret="s",
        disabled=disabled,
    )


@pytest.fixture
def agency(db_tenant, connection) -> int:
    """The id of a fresh agency (a connection held)."""
    return db_tenant.agency.id


def deliveries_of(*webhooks) -> list[Delivery]:
    """Return the deliveries of webhooks, oldest first."""
    return list(Delivery.select().where(Delivery.webhook.in_([w.id for w in webhooks])).order_by(Delivery.id))


def test_body_is_the_exact_json_sent_and_signed():
    """body() puts id, event, created (UTC, with offset) and data in that order, compactly."""
    event_uuid = uuid.UUID("12345678-1234-4234-8234-123456789012")
    created = datetime.datetime(2024, 3, 1, 12, 30, 0, 123456)
    data = {"object": "driver", "b": 1, "a": [None, "é"]}
    text = outbox.body(event_uuid, "driver.created", created, data)
    assert isinstance(text, bytes)
    assert json.loads(text) == {
        "id": str(event_uuid),
        "event": "driver.created",
        "created": "2024-03-01T12:30:00.123456+00:00",
        "data": data,
    }
    assert list(json.loads(text)) == ["id", "event", "created", "data"]
    assert b" " not in text and "é".encode() in text


def test_nothing_is_written_when_no_webhook_is_subscribed(agency):
    """No subscriber (another event's, another agency's): record() writes nothing and returns []."""
    hook(agency, "vehicle.created")
    hook(make_tenant().agency.id, "driver.created")
    before = Event.select().count()
    with models.atomic():
        assert outbox.record(agency, "driver.created", [{"n": 1}]) == []
    assert Event.select().count() == before


def test_keep_writes_the_events_without_deliveries(agency):
    """keep=True stores the events even when nobody listens (POST /events needs their ids)."""
    with models.atomic():
        written = outbox.record(agency, "form.completed", [{"n": 1}, {"n": 2}], keep=True)
    assert [w["event"] for w in written] == ["form.completed"] * 2
    events = list(Event.select().where(Event.uuid.in_([w["id"] for w in written])))
    assert len(events) == 2 and all(e.agency_id == agency for e in events)
    assert not Delivery.select().where(Delivery.stored_event.in_([e.id for e in events])).exists()


def test_no_payloads_write_nothing(agency):
    """An empty list records nothing, even with keep."""
    hook(agency, "driver.created")
    assert outbox.record(agency, "driver.created", [], keep=True) == []


def test_each_payload_is_one_event_with_a_pending_delivery_per_subscribed_active_webhook(agency):
    """Two subscribers of the agency get a delivery of each event; the disabled, the unsubscribed and others' get none."""
    one, two = hook(agency, "driver.created", "driver.updated"), hook(agency, "driver.created")
    disabled = hook(agency, "driver.created", disabled=datetime.datetime(2024, 1, 1))
    unsubscribed = hook(agency, "driver.updated")
    foreign = hook(make_tenant().agency.id, "driver.created")
    payloads = [{"object": "driver", "n": 1}, {"object": "driver", "n": 2}]
    with models.atomic():
        written = outbox.record(agency, "driver.created", payloads)

    assert [w["event"] for w in written] == ["driver.created"] * 2
    events = {str(e.uuid): e for e in Event.select().where(Event.uuid.in_([w["id"] for w in written]))}
    for sent, payload in zip(written, payloads, strict=True):
        event = events[sent["id"]]
        assert event.name == "driver.created" and event.agency_id == agency
        assert event.body == outbox.body(event.uuid, "driver.created", event.created, payload).decode()
        assert json.loads(event.body)["created"] == sent["created"]
    rows = deliveries_of(one, two)
    pairs = Delivery.select(Delivery.webhook, Delivery.stored_event).where(Delivery.id.in_([d.id for d in rows])).tuples()
    assert sorted(pairs) == sorted((w.id, e.id) for w in (one, two) for e in events.values())
    for row in rows:
        assert (row.status, row.tries, row.generation, row.event) == (PENDING, 0, 0, "driver.created")
        assert row.relayed is None and row.next_attempt is not None and row.locked_until is None
    assert len({row.uuid for row in rows}) == 4
    assert deliveries_of(unsubscribed, foreign) == []
    # The disabled webhook's are skipped: written already relayed, with no next attempt, so nothing sends them.
    skipped = deliveries_of(disabled)
    assert sorted(row.__data__["stored_event"] for row in skipped) == sorted(e.id for e in events.values())
    for row in skipped:
        assert (row.status, row.tries, row.generation, row.event) == (SKIPPED, 0, 0, "driver.created")
        assert row.relayed is not None and row.next_attempt is None and row.locked_until is None


def test_events_roll_back_with_the_callers_transaction(agency):
    """The rows are the caller's transaction's: a rollback leaves neither events nor deliveries."""
    subscriber = hook(agency, "driver.created")

    class Abort(Exception):
        pass

    with pytest.raises(Abort), models.atomic():
        written = outbox.record(agency, "driver.created", [{"n": 1}])
        assert len(written) == 1
        raise Abort
    assert not Event.select().where(Event.uuid == written[0]["id"]).exists()
    assert deliveries_of(subscriber) == []


def test_more_payloads_than_one_insert_takes_are_all_written(agency):
    """Payloads past the insert chunk size are written too, each with its delivery."""
    subscriber = hook(agency, "driver.created")
    with models.atomic():
        written = outbox.record(agency, "driver.created", [{"n": n} for n in range(1201)])
    assert len({w["id"] for w in written}) == 1201
    rows = deliveries_of(subscriber)
    assert len(rows) == 1201
    # Each delivery names its own event: ids are mapped back by uuid, whatever order RETURNING gives them in.
    named = [e for (e,) in models.tuples(Delivery.select(Delivery.stored_event).where(Delivery.webhook == subscriber.id))]
    bodies = dict(models.tuples(Event.select(Event.id, Event.body).where(Event.id.in_(named))))
    assert sorted(json.loads(bodies[e])["data"]["n"] for e in named) == list(range(1201))


def test_many_events_keep_their_exact_bodies_and_deliveries(agency):
    """A batch large enough to be streamed (COPY on PostgreSQL) stores the same bodies and delivery rows as a small one."""
    subscriber = hook(agency, "driver.created")
    tricky = 'back\\slash \\N tab\t new\nline cr\r quote" é ☃ \u2028'
    payloads = [{"object": "driver", "n": n, "text": tricky * n} for n in range(25)]
    with models.atomic():
        written = outbox.record(agency, "driver.created", payloads)
    events = {str(e.uuid): e for e in Event.select().where(Event.uuid.in_([w["id"] for w in written]))}
    for sent, payload in zip(written, payloads, strict=True):
        event = events[sent["id"]]
        assert event.body == outbox.body(event.uuid, "driver.created", event.created, payload).decode()
        assert json.loads(event.body)["data"] == payload and event.agency_id == agency
    rows = deliveries_of(subscriber)
    assert sorted(row.stored_event.id for row in rows) == sorted(e.id for e in events.values())
    for row in rows:
        assert (row.status, row.tries, row.generation, row.event) == (PENDING, 0, 0, "driver.created")
        assert row.relayed is None and row.next_attempt == row.created and row.locked_until is None


def test_ping_writes_a_ping_for_that_webhook_alone_whatever_it_subscribes_to(agency):
    """ping() writes a webhook.ping event with one delivery, for the webhook even if unsubscribed to pings."""
    target, bystander = hook(agency, "driver.created"), hook(agency, "webhook.ping")
    with models.atomic():
        sent = outbox.ping(target)
    assert sent["event"] == PING
    [delivery] = deliveries_of(target)
    assert str(delivery.uuid) == sent["delivery"] and delivery.event == PING and delivery.status == PENDING
    event = Event.get(Event.uuid == sent["id"])
    assert json.loads(event.body)["data"] == {"object": "webhook", "uuid": str(target.uuid)}
    assert deliveries_of(bystander) == []
