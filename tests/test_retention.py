"""Retention: settled deliveries, their attempts and events older than the cutoff go, in batches; pending ones stay."""

import datetime
import uuid

import redis
from rq import SimpleWorker

import models
from jobs import queue as jobs_queue
from jobs import retention
from models import utcnow
from models.idempotency import IdempotencyKey
from models.webhooks import FAILED, PENDING, SKIPPED, SUCCEEDED, Attempt, Delivery, Event
from tests.support import make_webhook
from webhooks import outbox


def deliveries_of(client, tenant, count: int, status: str, days_old: int) -> list[int]:
    """Write `count` events with one delivery each to the tenant's webhook, back-dated and settled as asked."""
    with models.db.connection_context(), models.atomic():
        events = outbox.record(tenant.agency.id, "form.completed", [{"n": n} for n in range(count)])
        ids = [e["id"] for e in events]
        moment = utcnow() - datetime.timedelta(days=days_old)
        Event.update(created=moment).where(Event.uuid.in_(ids)).execute()
        rows = list(Delivery.select().join(Event).where(Event.uuid.in_(ids)))
        Delivery.update(status=status, created=moment).where(Delivery.id.in_([d.id for d in rows])).execute()
        for row in rows:
            Attempt.create(delivery=row.id, at=moment, status=500, error=None, duration_ms=3)
    return [row.id for row in rows]


def left(ids: list[int]) -> int:
    with models.db.connection_context():
        return Delivery.select().where(Delivery.id.in_(ids)).count()


def test_purge_keeps_pending_and_recent_and_works_in_batches(client, tenant):
    make_webhook(client, tenant, events=["form.completed"])
    old_done = deliveries_of(client, tenant, 5, SUCCEEDED, 40) + deliveries_of(client, tenant, 2, FAILED, 31)
    old_owed = deliveries_of(client, tenant, 2, PENDING, 90)
    recent = deliveries_of(client, tenant, 3, SUCCEEDED, 29)
    with models.db.connection_context():
        events_before = Event.select().where(Event.agency == tenant.agency.id).count()
        counts = retention.purge(utcnow() - datetime.timedelta(days=30), batch=2)
        assert Attempt.select().where(Attempt.delivery.in_(old_done)).count() == 0
        assert Attempt.select().where(Attempt.delivery.in_(old_owed + recent)).count() == 5
        events_after = Event.select().where(Event.agency == tenant.agency.id).count()
    assert counts["deliveries"] >= 7 and counts["attempts"] >= 7 and counts["events"] >= 7
    assert (left(old_done), left(old_owed), left(recent)) == (0, 2, 3)
    assert events_before - events_after == 7  # the pending deliveries' events stay with them


def test_relays_offer_the_purge_once_per_period_and_a_worker_runs_it(client, tenant, redis_url, monkeypatch):
    monkeypatch.setattr(retention, "LOCK", f"riskapi:retention:test:{uuid.uuid4().hex}")
    make_webhook(client, tenant, events=["form.completed"])
    old = deliveries_of(client, tenant, 3, SUCCEEDED, 10)
    with models.db.connection_context():
        expired = IdempotencyKey.create(
            agency=tenant.agency.id, key="spent", fingerprint="f", claim="c", status=201, expires=utcnow()
        )
    connection = redis.Redis.from_url(redis_url)
    queue = jobs_queue.queue(connection, f"retention-{uuid.uuid4().hex[:8]}")
    try:
        assert not retention.offer(connection, queue, 0)  # off
        assert retention.offer(connection, queue, 7)
        assert not retention.offer(connection, queue, 7)  # another relay, same period
        assert 0 < connection.ttl(retention.LOCK) <= retention.PERIOD
        SimpleWorker([queue], connection=connection).work(burst=True)
        assert left(old) == 0
        with models.db.connection_context():
            assert IdempotencyKey.get_or_none(IdempotencyKey.id == expired.id) is None
    finally:
        connection.delete(retention.LOCK)
        queue.delete(delete_jobs=True)


def test_the_purge_removes_expired_idempotency_keys_only_in_batches(db_tenant, connection):
    now = utcnow()
    for n in range(5):
        IdempotencyKey.create(agency=db_tenant.agency.id, key=f"old-{n}", fingerprint="f", claim="c", status=201, expires=now)
    for n in range(2):
        later = now + datetime.timedelta(hours=1)
        IdempotencyKey.create(agency=db_tenant.agency.id, key=f"live-{n}", fingerprint="f", claim="c", status=201, expires=later)
    assert retention.purge_keys(now + datetime.timedelta(seconds=1), batch=2) >= 5
    left_keys = IdempotencyKey.select(IdempotencyKey.key).where(IdempotencyKey.agency == db_tenant.agency.id)
    assert sorted(row.key for row in left_keys) == ["live-0", "live-1"]


def test_purge_removes_skipped_deliveries_like_the_others(client, tenant):
    hook = make_webhook(client, tenant, events=["form.completed"])
    toggle = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"disabled": True}}]}
    assert client.patch("/webhooks", json=toggle, headers=tenant.headers).status_code == 200
    with models.db.connection_context(), models.atomic():
        events = outbox.record(tenant.agency.id, "form.completed", [{"n": 1}, {"n": 2}])
    ids = [e["id"] for e in events]
    with models.db.connection_context():
        rows = [Delivery.select().join(Event).where(Event.uuid == event_id).get() for event_id in ids]
        assert [row.status for row in rows] == [SKIPPED, SKIPPED] and {row.relayed is not None for row in rows} == {True}
        old = utcnow() - datetime.timedelta(days=40)
        Event.update(created=old).where(Event.uuid == ids[0]).execute()
        retention.purge(utcnow() - datetime.timedelta(days=30))
        assert Event.select().where(Event.uuid.in_(ids)).count() == 1
    assert (left([rows[0].id]), left([rows[1].id])) == (0, 1)
