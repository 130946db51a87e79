"""jobs.recorder: outcomes are written, and no claim lapses while its outcome waits to be written."""

import dataclasses
import json
import logging
import threading
import time

import peewee
import pytest
import redis

import models
from jobs import claims
from jobs.https import transport
from jobs.lines import Engine, Item
from models import utcnow
from models.webhooks import FAILED, PENDING, SUCCEEDED, Attempt, Delivery, Webhook, pack_events
from tests.support import make_webhook
from tests.webhook_support import add_driver, settled
from toolkit.receiver import Reply
from toolkit.serving import wait_until
from webhooks import outbox


@pytest.fixture
def engine(settings, redis_url, queue_name):
    """An engine (not started: its recorder is driven by hand, in this thread) on this test's queue."""
    connection = redis.Redis.from_url(redis_url, socket_timeout=5)
    yield Engine(dataclasses.replace(settings, webhook_queue=queue_name), connection)
    connection.close()
    models.give_back()  # the recorder's connection is this thread's


@pytest.fixture
def claim(db_tenant, database, engine):
    """Return a function claiming `count` new deliveries as a worker does: a list of (item, webhook)."""
    agency = db_tenant.agency.id
    url, events = "https://hooks.example.com/in", pack_events(["x.y"])
    webhook = Webhook.create(agency=agency, type="custom", url=url, events=events, secret="s")

    def make(count: int = 1) -> list:
        with models.atomic():
            outbox.record(agency, "x.y", [{"n": n} for n in range(count)])
        rows = list(Delivery.select().where(Delivery.webhook == webhook.id).order_by(Delivery.id))[-count:]
        delivered, _ = claims.claim_batch({row.id: row.generation for row in rows}, engine.settings)
        return [(Item(d, d.generation, due=0.0, lease=time.monotonic()), webhook) for d in sorted(delivered, key=lambda d: d.id)]

    return make


@pytest.fixture
def claimed(claim):
    """One claimed delivery: (its item, its webhook)."""
    return claim(1)[0]


def locked_until(item):
    return Delivery.get_by_id(item.delivery.id).locked_until


def test_the_claim_of_an_outcome_waiting_to_be_written_is_renewed(engine, claimed):
    """A recorder behind (a machine short of CPU) renews the claim, so the rescue does not send it again."""
    item, webhook = claimed
    before = locked_until(item)
    engine.recorder.put((item, webhook, utcnow(), transport.Result(200, None, 3)))
    time.sleep(0.01)
    renewed = time.monotonic()
    engine.recorder._tend(renewing=False)  # each second, renewing or not
    assert locked_until(item) > before
    # Counted from the renewal, not from whenever a busy machine gets to this line.
    assert item.lease > renewed + engine.settings.webhook_stale_after


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


def test_outcomes_waiting_together_are_written_in_one_go_with_their_retries(engine, claim, redis_url, queue_name):
    from jobs import queue as jobs_queue

    (ok, webhook), (failing, _), (late, _) = claim(3)
    results = [transport.Result(200, None, 3), transport.Result(500, None, 3), transport.Result(204, None, 3)]
    batch = [(item, webhook, utcnow(), result) for item, result in zip((ok, failing, late), results, strict=True)]
    engine.recorder._settle_all(batch)
    rows = [Delivery.get_by_id(item.delivery.id) for item in (ok, failing, late)]
    assert [(row.status, row.tries) for row in rows] == [(SUCCEEDED, 1), (PENDING, 1), (SUCCEEDED, 1)]
    assert rows[1].next_attempt is not None and all(row.locked_until is None for row in rows)
    retry = jobs_queue.retry_id(failing.delivery.uuid, failing.generation, 1)
    assert retry in engine.recorder.target.scheduled_job_registry.get_job_ids()
    assert not engine.recorder._unrecorded


def attempt_lines(caplog) -> list[dict]:
    """Return the fields of the attempt lines logged (riskapi.attempts, INFO), in order."""
    return [record.fields for record in caplog.records if record.name == "riskapi.attempts"]


def errors(caplog) -> list[logging.LogRecord]:
    """Return the records logged at ERROR or above, or with a traceback."""
    return [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info]


def test_one_outcome_that_cannot_be_written_does_not_cost_the_others(engine, claim, caplog):
    """The batch's transaction fails as a whole; written one by one, every other outcome is kept. The one whose delivery
    was deleted meanwhile is an attempt line saying so, at INFO: no error, no traceback."""
    caplog.set_level(logging.INFO)
    (first, webhook), (gone, _), (last, _) = claim(3)
    Delivery.delete().where(Delivery.id == gone.delivery.id).execute()  # its attempt row now breaks a foreign key
    batch = [(item, webhook, utcnow(), transport.Result(200, None, 3)) for item in (first, gone, last)]
    engine.recorder._settle_all(batch)
    assert [Delivery.get_by_id(item.delivery.id).status for item in (first, last)] == [SUCCEEDED, SUCCEEDED]
    assert Attempt.select().where(Attempt.delivery.in_([first.delivery.id, last.delivery.id])).count() == 2
    outcomes = {line["delivery"]: line["outcome"] for line in attempt_lines(caplog)}
    assert outcomes == {str(first.delivery.uuid): "succeeded", str(gone.delivery.uuid): "delivery deleted meanwhile",
                        str(last.delivery.uuid): "succeeded"}  # fmt: skip
    assert errors(caplog) == [] and not engine.recorder._unrecorded


def test_outcomes_of_a_webhook_deleted_meanwhile_are_info_lines_naming_their_deliveries(engine, claim, caplog):
    """Its deliveries went with it (ON DELETE CASCADE): nothing left to write and nothing lost, which one INFO line per
    attempt says, naming the delivery, alone or in a batch; no ERROR, no traceback, nothing kept, attempts go on."""
    caplog.set_level(logging.INFO)
    (alone, webhook), (first, _), (second, _) = claim(3)
    Webhook.delete().where(Webhook.id == webhook.id).execute()
    recorder = engine.recorder
    recorder._settle_each([(alone, webhook, utcnow(), transport.Result(500, None, 3))])
    recorder._settle_all([(item, webhook, utcnow(), transport.Result(200, None, 3)) for item in (first, second)])
    lines = attempt_lines(caplog)
    assert [(line["delivery"], line["webhook"], line["attempt"], line["outcome"]) for line in lines] == [
        (str(item.delivery.uuid), str(webhook.uuid), 1, "webhook deleted meanwhile") for item in (alone, first, second)
    ]
    assert [record.levelno for record in caplog.records if record.name == "riskapi.attempts"] == [logging.INFO] * 3
    assert errors(caplog) == []
    assert not Attempt.select().where(Attempt.delivery.in_([i.delivery.id for i in (alone, first, second)])).exists()
    assert not recorder._kept and not recorder._unrecorded and not engine._paused
    assert recorder.target.scheduled_job_registry.get_job_ids() == []  # no retry for the failed one: it is gone


def test_a_webhook_deleted_while_its_attempt_is_in_flight_is_an_info_line_of_the_worker(
    client, tenant, receiver, start_worker, monkeypatch, connection
):
    """Over HTTP, a real worker: the receiver holds the attempt of one webhook's delivery while the webhook is deleted
    through the API. The worker's JSON log has that attempt's INFO line naming the delivery and saying its webhook was
    deleted meanwhile, and no ERROR or traceback; the other webhook's delivery of the same event is delivered and
    recorded once, the deleted one was sent once and left no row."""
    monkeypatch.setenv("RISKAPI_LOG_FORMAT", "json")
    monkeypatch.setenv("RISKAPI_ACCESS_LOG", "1")
    answer = threading.Event()
    receiver.responses = lambda request: Reply(200, until=answer) if request.path.endswith("/doomed") else Reply(200)
    worker = start_worker(timeout="60")  # roomy: the attempt is held while the test deletes its webhook
    doomed = make_webhook(client, tenant, url=receiver.url + "/doomed")
    kept = make_webhook(client, tenant, url=receiver.url + "/kept")
    add_driver(client, tenant)
    assert receiver.wait_for(2), worker.output()
    sent = {request.path: request.headers["service-delivery"] for request in receiver.requests}
    deleted = client.request("DELETE", "/webhooks", json={"data": [{"object": "webhook", "uuid": doomed["uuid"]}]},
                             headers=tenant.headers)  # fmt: skip
    assert deleted.status_code == 200, deleted.text
    answer.set()

    def lines() -> list[dict]:
        return [json.loads(line) for line in worker.output().splitlines() if line.startswith("{")]

    def attempted(delivery: str) -> list[dict]:
        return [line for line in lines() if line["logger"] == "riskapi.attempts" and line["delivery"] == delivery]

    assert wait_until(lambda: attempted(sent["/hook/doomed"]), timeout=60), worker.output()
    assert [(line["level"], line["webhook"], line["outcome"]) for line in attempted(sent["/hook/doomed"])] == [
        ("INFO", doomed["uuid"], "webhook deleted meanwhile")
    ]
    [log] = settled(client, tenant, kept)
    assert (log["uuid"], [a["status"] for a in log["data"]["attempts"]]) == (sent["/hook/kept"], [200])
    assert [line["outcome"] for line in attempted(sent["/hook/kept"])] == ["succeeded"]
    assert [line for line in lines() if line["level"] in ("ERROR", "CRITICAL") or "traceback" in line] == []
    assert "Traceback" not in worker.output(), worker.output()
    assert client.get(f"/webhooks/{doomed['uuid']}/deliveries", headers=tenant.headers).status_code == 404
    assert not Delivery.select().where(Delivery.uuid == sent["/hook/doomed"]).exists()
    assert sorted(request.path for request in receiver.requests) == ["/hook/doomed", "/hook/kept"]


def test_outcomes_the_database_cannot_take_wait_for_it_and_no_attempt_starts_meanwhile(engine, claim, monkeypatch):
    """The database is away: the outcomes are kept (not left to the rescue, which would send them again), the engine
    starts no attempt; when it answers, the claims are renewed first, then the outcomes written, then attempts start."""
    from jobs import recorder as recording

    (first, webhook), (second, _) = claim(2)
    recorder, real_write = engine.recorder, recording.write_all
    for item in (first, second):
        recorder.put((item, webhook, utcnow(), transport.Result(200, None, 3)))
    batch = recorder._next_batch()

    def away(*args):
        raise peewee.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(recording, "write_all", away)
    recorder._settle_all(batch)
    assert recorder._kept == batch and engine._paused and engine._take_due() == ([], None)
    assert [Delivery.get_by_id(item.delivery.id).status for item in (first, second)] == [PENDING, PENDING]
    before = locked_until(first)
    recorder._next_try = 0.0
    recorder._reconnect()  # the claims can be renewed, the outcomes still not written
    assert locked_until(first) > before and recorder._kept == batch and engine._paused

    monkeypatch.setattr(recording, "write_all", real_write)  # back
    recorder._next_try = 0.0
    recorder._reconnect()
    assert [Delivery.get_by_id(item.delivery.id).status for item in (first, second)] == [SUCCEEDED, SUCCEEDED]
    assert Attempt.select().where(Attempt.delivery.in_([first.delivery.id, second.delivery.id])).count() == 2
    assert not recorder._kept and not recorder._unrecorded and not engine._paused


def test_an_outcome_the_database_refuses_is_not_kept(engine, claim):
    """Only an unreachable database is waited for: an outcome whose row is gone is let go, and attempts go on."""
    ((item, webhook),) = claim(1)
    Delivery.delete().where(Delivery.id == item.delivery.id).execute()
    engine.recorder._settle_each([(item, webhook, utcnow(), transport.Result(200, None, 3))])
    assert not engine.recorder._kept and not engine._paused


def test_waiting_deliveries_of_a_webhook_disabled_meanwhile_are_failed_unattempted(engine, claim):
    """Tending the lines settles every waiting delivery of a disabled webhook (one transaction), and drops it from its line."""
    claimed = claim(3)
    engine.line_up([(item.delivery, webhook, item.generation, time.time() + 60) for item, webhook in claimed])
    webhook = claimed[0][1]
    Webhook.update(disabled=utcnow()).where(Webhook.id == webhook.id).execute()
    assert engine.tend([], False, time.monotonic())
    assert engine.waiting() == {}
    rows = Delivery.select().where(Delivery.id.in_([item.delivery.id for item, _ in claimed]))
    assert [(row.status, row.locked_until, row.tries) for row in rows] == [(FAILED, None, 0)] * 3
    assert not Attempt.select().where(Attempt.delivery.in_([row.id for row in rows])).exists()


def test_outcomes_written_together_come_to_what_each_written_alone_does(engine, claim):
    """jobs.outcomes.write_all (one insert, one update for the successes) against write, outcome by outcome: the same
    rows, the same answers, a superseded delivery left alone and the webhook's failures counted in order."""
    from jobs import outcomes

    together, alone = claim(4), claim(4)
    results = [transport.Result(200, None, 3), transport.Result(500, None, 4), transport.Result(200, None, 5)]
    results.append(transport.Result(None, "timed out after 5.0 s", 5000))
    figures = []
    for claimed, write in ((together, outcomes.write_all), (alone, None)):
        superseded = claimed[2][0]
        Delivery.update(generation=Delivery.generation + 1).where(Delivery.id == superseded.delivery.id).execute()
        webhook = claimed[0][1]
        Webhook.update(failures=2).where(Webhook.id == webhook.id).execute()
        webhook.failures = 2
        started = utcnow()
        attempts = [(item.delivery, item.generation, webhook, started, result, f"next-{n}")
                    for n, ((item, _), result) in enumerate(zip(claimed, results, strict=True))]  # fmt: skip
        with models.atomic():
            if write is not None:
                written = write(attempts, engine.settings)
            else:
                written = [outcomes.write(*args[:5], engine.settings, args[5]) for args in attempts]
        rows = [Delivery.get_by_id(item.delivery.id) for item, _ in claimed]
        states = [(r.status, r.tries, r.batch, r.locked_until is None, r.next_attempt is None) for r in rows]
        logged = [(a.status, a.error, a.duration_ms) for r in rows for a in Attempt.select().where(Attempt.delivery == r.id)]
        figures.append(([w[:3] for w in written], states, logged, Webhook.get_by_id(webhook.id).failures))
    assert figures[0] == figures[1]
    assert [w[:2] for w in figures[0][0]] == [("succeeded", 1), ("retry", 1), ("succeeded", 0), ("retry", 1)]
    assert figures[0][3] == 0  # reset once by the success (a retry counts no failure; the superseded one nothing)
