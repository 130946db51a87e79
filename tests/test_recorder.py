"""jobs.recorder: outcomes are written, and no claim lapses while its outcome waits to be written."""

import dataclasses
import time

import pytest
import redis
from riskapi.jobs import claims, outbox, transport
from riskapi.jobs.inflight import Engine, _Item
from riskapi.models import utcnow
from riskapi.models.webhooks import SUCCEEDED, Attempt, Delivery, Webhook, pack_events

from riskapi import models


@pytest.fixture
def engine(settings, redis_url, queue_name):
    """An engine (not started: its recorder is driven by hand) on this test's queue."""
    connection = redis.Redis.from_url(redis_url, socket_timeout=5)
    yield Engine(dataclasses.replace(settings, webhook_queue=queue_name), connection)
    connection.close()


@pytest.fixture
def claimed(db_tenant, connection, engine):
    """A delivery claimed as a worker claims it; return (its item, its webhook)."""
    agency = db_tenant.agency.id
    url, events = "https://hooks.example.com/in", pack_events(["x.y"])
    webhook = Webhook.create(agency=agency, type="custom", url=url, events=events, secret="s")
    with models.atomic():
        outbox.record(agency, "x.y", [{"n": 1}])
    row = Delivery.get(Delivery.webhook == webhook.id)
    [delivery], _ = claims.claim_batch({row.id: row.generation}, engine.settings)
    return _Item(delivery, row.generation, due=0.0, lease=time.monotonic()), webhook


def locked_until(item):
    return Delivery.get_by_id(item.delivery.id).locked_until


def test_the_claim_of_an_outcome_waiting_to_be_written_is_renewed(engine, claimed):
    """A recorder behind (a machine short of CPU) renews the claim, so the rescue does not send it again."""
    item, webhook = claimed
    before = locked_until(item)
    engine.recorder.put((item, webhook, utcnow(), transport.Result(200, None, 3)))
    time.sleep(0.01)
    engine.recorder._tend(renewing=False)  # each second, renewing or not
    assert locked_until(item) > before
    assert item.lease > time.monotonic() + engine.settings.webhook_stale_after


def test_a_written_outcome_is_no_longer_renewed(engine, claimed):
    item, webhook = claimed
    recorder = engine.recorder
    recorder.put((item, webhook, utcnow(), transport.Result(200, None, 3)))
    recorder._settle(*recorder._done.get_nowait())
    assert Delivery.get_by_id(item.delivery.id).status == SUCCEEDED and locked_until(item) is None
    assert Attempt.select().where(Attempt.delivery == item.delivery.id).count() == 1
    item.lease = time.monotonic()
    recorder._tend(renewing=True)
    assert locked_until(item) is None  # renewing a settled delivery would lock it for nothing
