"""jobs.relay: committed deliveries become RQ jobs once, lost jobs are handed back, and the loop relays until stopped."""

import dataclasses
import datetime
import threading
import time
import types

import peewee
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from rq.job import JobStatus

import models
from jobs import outages
from jobs import queue as jobs_queue
from jobs.outages import RESCUE_GRACE
from jobs.relay import Relay
from models import utcnow
from models.webhooks import FAILED, Delivery, Webhook, pack_events
from toolkit.serving import free_port, wait_until
from webhooks import outbox


class _Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def redis_connection(redis_url):
    """A connection to the tests' Redis."""
    connection = redis.Redis.from_url(redis_url, socket_timeout=5)
    yield connection
    connection.close()


@pytest.fixture
def relay_settings(settings, queue_name):
    """Settings of a relay on this test's own queue; a delivery is stale as soon as it was relayed; no retention job."""
    return dataclasses.replace(settings, webhook_queue=queue_name, webhook_stale_after=0.0, retention_days=0)


@pytest.fixture
def relay(redis_connection, relay_settings, connection):
    """A relay on this test's queue (a database connection held)."""
    return Relay(redis_connection, relay_settings)


@pytest.fixture
def waiting(db_tenant, connection):
    """Write `count` deliveries that wait for the relay, through the outbox; return their rows in id order."""
    agency = db_tenant.agency.id
    events = pack_events(["x.y"])
    webhook = Webhook.create(agency=agency, type="custom", url="https://hooks.example.com/in", events=events, secret="s")

    def write(count: int = 1) -> list[Delivery]:
        with models.atomic():
            outbox.record(agency, "x.y", [{"n": n} for n in range(count)])
        return list(Delivery.select().where(Delivery.webhook == webhook.id).order_by(Delivery.id))[-count:]

    return write


def fresh(row: Delivery) -> Delivery:
    """Read a delivery again."""
    return Delivery.get_by_id(row.id)


def stale(rows) -> bool:
    """Wait until the clock has passed every row's relay time (the relay's cutoff is now minus stale_after = now)."""
    latest = max(fresh(row).relayed for row in rows)
    return wait_until(lambda: utcnow() > latest, timeout=30, interval=0.001)


def test_nothing_waiting_enqueues_nothing(relay):
    """With no delivery waiting a pass moves nothing and leaves the queue empty."""
    assert relay.relay_pending() == 0
    assert relay.queue.count == 0


def test_a_lone_delivery_gets_a_job_of_its_own_once(relay, waiting):
    """One waiting delivery: one job named after its new generation, carrying (id, generation); not relayed twice."""
    [row] = waiting(1)
    assert relay.relay_pending() == 1
    row = fresh(row)
    assert row.relayed is not None and row.generation == 1 and row.batch is None
    [job] = relay.queue.get_jobs()
    assert job.id == jobs_queue.job_id(row.uuid, 1)
    assert job.func_name == jobs_queue.JOB_FUNCTION and job.args == (row.id, 1)
    assert relay.relay_pending() == 0
    assert relay.queue.count == 1


def test_first_attempts_share_a_batch_and_a_later_attempt_gets_its_own_job(relay, waiting):
    """Three first attempts go in one batch job; a delivery already tried (a redelivery mid-round) goes alone."""
    rows = waiting(4)
    Delivery.update(tries=2).where(Delivery.id == rows[3].id).execute()
    assert relay.relay_pending() == 4
    rows = [fresh(row) for row in rows]
    jobs = {job.id: job for job in relay.queue.get_jobs()}
    batch = jobs_queue.batch_id(rows[0].uuid, 1)
    assert set(jobs) == {batch, jobs_queue.job_id(rows[3].uuid, 1)}
    assert [row.batch for row in rows] == [batch, batch, batch, None]
    # Each handed over once, in one write of its row: one new generation, whether its job is a batch or its own.
    assert [row.generation for row in rows] == [1, 1, 1, 1] and all(row.relayed is not None for row in rows)
    assert jobs[batch].args == ([(row.id, 1) for row in rows[:3]],)


def test_a_burst_beyond_each_webhooks_first_delivery_takes_the_bulk_lane(redis_connection, relay_settings, waiting):
    """Of a pass larger than a batch, each webhook's first delivery goes on the queue and the rest on the bulk lane
    that workers serve after it; a job waiting there is a backlog to the rescue, not a loss."""
    relay = Relay(redis_connection, relay_settings)
    rows = waiting(jobs_queue.BATCH_SIZE + 2)
    assert relay.relay_pending() == len(rows)
    rows = [fresh(row) for row in rows]
    [first] = relay.queue.get_jobs()
    [rest] = relay.bulk.get_jobs()
    assert first.id == jobs_queue.job_id(rows[0].uuid, 1) and first.args == (rows[0].id, 1)  # a lone one: its own job
    assert rest.id == jobs_queue.batch_id(rows[1].uuid, 1) and rest.args == ([(row.id, 1) for row in rows[1:]],)
    assert [row.batch for row in rows] == [None] + [rest.id] * (len(rows) - 1)
    assert stale(rows)
    assert relay.rescue() == 0
    rest.delete()  # Redis lost the bulk lane's job
    assert relay.rescue() == len(rows) - 1


def test_lanes_keep_the_order_and_a_small_pass_on_the_queue():
    """jobs.queue.lanes: a pass within a batch all on the queue; a larger one each webhook's first, in the pass's order."""
    deliveries = [(1, "a", 1, 0, 7), (2, "b", 1, 0, 8), (3, "c", 1, 0, 7), (4, "d", 1, 0, 9), (5, "e", 1, 0, 8)]
    assert jobs_queue.lanes(deliveries, 5) == ([d[:4] for d in deliveries], [], set())
    first, rest, bursting = jobs_queue.lanes(deliveries, 4)
    assert (first, rest) == ([(1, "a", 1, 0), (2, "b", 1, 0), (4, "d", 1, 0)], [(3, "c", 1, 0), (5, "e", 1, 0)])
    assert bursting == {7, 8}  # 9 had one delivery: not a burst
    # A burst that spans passes had its first on the queue in the previous pass: now all of it is bulk.
    first, rest, bursting = jobs_queue.lanes(deliveries, 4, bursting={7, 9})
    assert (first, rest) == ([(2, "b", 1, 0)], [(1, "a", 1, 0), (3, "c", 1, 0), (4, "d", 1, 0), (5, "e", 1, 0)])
    assert bursting == {7, 8, 9}
    assert jobs_queue.lanes(deliveries, 5, bursting={7}) == ([d[:4] for d in deliveries], [], set())  # a small pass


def test_a_burst_over_several_passes_puts_only_new_webhooks_first_deliveries_on_the_queue(relay, waiting, db_tenant):
    """The second pass of one webhook's burst goes to the bulk lane; another webhook's new delivery to the queue."""
    waiting(60)
    assert relay.relay_pending(limit=30) == 30
    assert [len(relay.queue), len(relay.bulk)] == [1, 1]  # the first delivery alone; 29 in one bulk batch
    other = Webhook.create(
        agency=db_tenant.agency.id, type="custom", url="https://other.example.com/in", events=pack_events(["x.y"]), secret="s"
    )
    with models.atomic():
        outbox.record(db_tenant.agency.id, "x.y", [{"n": "new"}])
    [new] = Delivery.select().where(Delivery.webhook == other.id)
    assert relay.relay_pending(limit=30) == 30
    assert [len(relay.queue), len(relay.bulk)] == [2, 2]  # the other webhook's delivery alone on the queue
    assert relay.queue.jobs[-1].args == (new.id, 1)


def test_a_pass_takes_at_most_its_limit(relay, waiting):
    """relay_pending(limit) hands over the oldest `limit`; the rest wait for the next pass."""
    rows = waiting(3)
    assert relay.relay_pending(limit=2) == 2
    assert [fresh(row).relayed is not None for row in rows] == [True, True, False]
    assert relay.relay_pending(limit=2) == 1
    assert relay.relay_pending(limit=2) == 0


def test_a_full_pass_takes_each_webhooks_oldest_ahead_of_a_backlog(relay, waiting, db_tenant):
    """A webhook's one new delivery goes in the next pass, not after the passes another webhook's burst needs."""
    burst = waiting(5)
    other = Webhook.create(
        agency=db_tenant.agency.id, type="custom", url="https://other.example.com/in", events=pack_events(["x.y"]), secret="s"
    )
    with models.atomic():
        outbox.record(db_tenant.agency.id, "x.y", [{"n": "new"}])  # one more to the burst's webhook, one to the other
    [new] = Delivery.select().where(Delivery.webhook == other.id)
    assert relay.relay_pending(limit=3) == 3
    assert fresh(new).relayed is not None
    assert [fresh(row).relayed is not None for row in burst] == [True, True, False, False, False]  # the rest keep their order
    assert relay.relay_pending(limit=3) == 3
    assert [fresh(row).relayed is not None for row in burst] == [True, True, True, True, True]


def test_a_pass_that_is_not_full_takes_all_in_order(relay, waiting):
    """No backlog, no reordering: a pass below its limit takes every waiting delivery (one statement)."""
    rows = waiting(3)
    assert relay.relay_pending(limit=4) == 3
    assert all(fresh(row).relayed is not None for row in rows)


def test_settled_deliveries_are_not_relayed(relay, waiting):
    """Only pending deliveries wait for the relay."""
    [row] = waiting(1)
    Delivery.update(status=FAILED).where(Delivery.id == row.id).execute()
    assert relay.relay_pending() == 0
    assert relay.queue.count == 0


def test_redis_unreachable_hands_the_deliveries_back_for_the_next_pass(relay, relay_settings, waiting):
    """When the enqueue fails the error goes up and the rows wait again; the next pass uses a newer generation."""
    [row] = waiting(1)
    nobody = redis.Redis(port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))  # no retries: fail at once
    unreachable = Relay(nobody, relay_settings)
    with pytest.raises(redis.ConnectionError):
        unreachable.relay_pending()
    assert fresh(row).relayed is None
    assert relay.relay_pending() == 1
    [job] = relay.queue.get_jobs()
    assert job.id == jobs_queue.job_id(row.uuid, fresh(row).generation) and fresh(row).generation == 2


def test_rescue_leaves_a_job_that_waits_in_its_queue(relay, waiting):
    """A queued job still in its queue's list is a backlog, not a loss."""
    rows = waiting(2)
    relay.relay_pending()
    assert stale(rows)
    assert relay.rescue() == 0
    assert all(fresh(row).relayed is not None for row in rows)


def test_rescue_hands_back_a_delivery_whose_job_vanished(relay, waiting):
    """A job Redis lost: the delivery waits again, and the next pass gives it a new generation's job."""
    [row] = waiting(1)
    relay.relay_pending()
    [job] = relay.queue.get_jobs()
    job.delete()
    assert stale([row])
    assert relay.rescue() == 1
    assert fresh(row).relayed is None and fresh(row).locked_until is None
    assert relay.relay_pending() == 1
    assert [job.id for job in relay.queue.get_jobs()] == [jobs_queue.job_id(row.uuid, 2)]


def test_rescue_hands_back_a_job_taken_off_its_queue_but_never_started(relay, waiting):
    """A job that says queued but no queue holds (its worker died after taking it) is lost."""
    [row] = waiting(1)
    relay.relay_pending()
    [job] = relay.queue.get_jobs()
    relay.queue.remove(job)
    assert job.get_status() == JobStatus.QUEUED
    assert stale([row])
    assert relay.rescue() == 1
    assert fresh(row).relayed is None


def test_rescue_hands_back_a_job_that_ended_without_settling(relay, waiting):
    """A finished (or failed) job whose delivery is still pending will not run again: it is lost."""
    [row] = waiting(1)
    relay.relay_pending()
    [job] = relay.queue.get_jobs()
    relay.queue.remove(job)
    job.set_status(JobStatus.FINISHED)
    assert stale([row])
    assert relay.rescue() == 1


def test_rescue_leaves_a_claimed_delivery(relay, waiting):
    """A delivery an attempt holds (locked_until ahead) is not handed back, even if its job is gone."""
    [row] = waiting(1)
    relay.relay_pending()
    relay.queue.get_jobs()[0].delete()
    Delivery.update(locked_until=utcnow() + datetime.timedelta(minutes=1)).where(Delivery.id == row.id).execute()
    assert stale([row])
    assert relay.rescue() == 0
    assert fresh(row).relayed is not None


def test_rescue_waits_stale_after_before_calling_a_job_lost(redis_connection, relay_settings, connection, waiting):
    """Within stale_after of its hand-over a delivery is never handed back."""
    patient = Relay(redis_connection, dataclasses.replace(relay_settings, webhook_stale_after=3600.0))
    [row] = waiting(1)
    patient.relay_pending()
    patient.queue.get_jobs()[0].delete()
    assert patient.rescue() == 0
    assert fresh(row).relayed is not None


def test_run_relays_what_is_written_until_stopped(relay, waiting):
    """The loop picks up a delivery written while it runs, and returns once stop is set."""
    stop = threading.Event()
    loop = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    loop.start()
    try:
        [row] = waiting(1)
        # The job is enqueued just after the commit that stamps `relayed`: wait for the job itself.
        assert wait_until(lambda: relay.queue.get_job_ids(), timeout=30)
        assert fresh(row).relayed is not None
        assert relay.queue.get_job_ids() == [jobs_queue.job_id(row.uuid, 1)]
    finally:
        stop.set()
        loop.join(30)
    assert not loop.is_alive()


def test_after_a_database_outage_the_rescue_waits_for_live_workers_to_renew_their_claims(relay, waiting, monkeypatch):
    """Claims lapse while the database is away and nobody can renew them: the rescue waits RESCUE_GRACE after
    the process last saw it fail, long enough for a live worker to renew its own first."""
    # The outage's clock is the test's: the grace is counted in its time, not the busy machine's.
    clock = _Clock()
    monkeypatch.setattr(outages, "time", types.SimpleNamespace(monotonic=clock))
    [row] = waiting(1)
    relay.relay_pending()
    relay.queue.get_jobs()[0].delete()  # lost: a rescue would hand it back at once
    assert stale([row])
    relay.database_outage.lost(peewee.OperationalError("the database system is starting up"))
    stop = threading.Event()
    loop = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    loop.start()
    try:
        clock.now += RESCUE_GRACE / 2
        time.sleep(1.0)  # the loop passes many times meanwhile; waiting longer would only be stricter
        assert fresh(row).generation == 1  # not handed back yet
        clock.now += RESCUE_GRACE / 2
        assert wait_until(lambda: fresh(row).generation == 2, timeout=30)  # then handed back, relayed again
    finally:
        stop.set()
        loop.join(30)
