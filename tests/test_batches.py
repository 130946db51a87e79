"""First attempts in batch jobs: one RQ job for many deliveries, every guarantee of a lone job kept."""

from __future__ import annotations

import dataclasses
import json

import redis

import models
from jobs import queue as jobs_queue
from jobs.relay import Relay
from models import utcnow
from models.webhooks import Delivery, Webhook
from tests.support import make_webhook
from tests.webhook_support import deliveries, settled
from toolkit.receiver import Reply
from toolkit.serving import wait_until
from toolkit.tenants import items


def add_drivers(client, tenant, *names) -> None:
    body = items("driver", *[{"first_name": n} for n in names])
    response = client.post(tenant.url("/drivers"), json=body, headers=tenant.headers)
    assert response.status_code == 201, response.text


def test_plan_batches_first_attempts_and_gives_the_rest_their_own_job():
    first = [(i, f"u{i}", 1, 0) for i in range(5)]
    later = [(9, "u9", 4, 2)]
    planned = jobs_queue.plan(first + later, size=2)
    assert planned == [
        ("batch-u0-1", first[0:2]),
        ("batch-u2-1", first[2:4]),
        (None, later),
        (None, [first[4]]),  # a lone first attempt: a job of its own, as before batches
    ]


def test_relay_enqueues_one_batch_job_and_rescue_hands_back_what_a_lost_batch_carried(
    client, tenant, settings, redis_url, queue_name
):
    make_webhook(client, tenant)
    add_drivers(client, tenant, "a", "b", "c")
    connection = redis.Redis.from_url(redis_url)
    relay = Relay(connection, dataclasses.replace(settings, webhook_queue=queue_name, webhook_stale_after=0.0))
    try:
        with models.db.connection_context():
            assert relay.relay_pending() == 3
            theirs = Delivery.select().join(Webhook).where((Webhook.agency == tenant.agency.id) & (Delivery.status == "pending"))
            rows = list(theirs.order_by(Delivery.id))
            assert len(rows) == 3 and len({row.batch for row in rows}) == 1
            batch = rows[0].batch
            assert batch == jobs_queue.batch_id(rows[0].uuid, rows[0].generation)
            [job] = relay.queue.get_jobs()
            assert job.id == batch and job.func_name == jobs_queue.BATCH_FUNCTION
            assert job.args == ([(row.id, row.generation) for row in rows],)
            # rescue's cutoff is "now": wait until the relayed stamp lies strictly before it.
            assert wait_until(lambda: utcnow() > rows[0].relayed, timeout=30, interval=0.001)
            assert relay.rescue() == 0  # queued: a backlog, not a loss
            job.delete()  # Redis lost it
            assert relay.rescue() == 3
            assert theirs.where(Delivery.relayed.is_null()).count() == 3
    finally:
        connection.close()


def test_a_batch_delivers_each_with_its_own_id_and_a_failed_one_retries_on_its_own(client, tenant, receiver, start_worker):
    seen: set = set()

    def reply(request):
        name = json.loads(request.body)["data"]["data"]["first_name"]
        if name == "flaky" and name not in seen:
            seen.add(name)
            return Reply(500)
        return Reply(200)

    receiver.responses = reply
    start_worker(retry_delays="1,2")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_drivers(client, tenant, "one", "flaky", "two", "three")
    log = settled(client, tenant, hook, 4)
    assert {d["data"]["status"] for d in log} == {"succeeded"}
    by_name = {}
    for request in receiver.requests:
        by_name.setdefault(json.loads(request.body)["data"]["data"]["first_name"], []).append(request)
    assert sorted(len(r) for r in by_name.values()) == [1, 1, 1, 2]
    first, second = by_name["flaky"]
    assert first.headers["service-delivery"] == second.headers["service-delivery"] and first.body == second.body
    assert second.at - first.at >= 0.95  # not before its delay; how long after is the machine's business
    assert len({r.headers["service-delivery"] for r in receiver.requests}) == 4
    attempts = sorted([a["status"] for a in d["data"]["attempts"]] for d in log)
    assert attempts == [[200], [200], [200], [500, 200]]
    assert all(d["data"]["next_attempt"] is None for d in log)


def test_a_worker_killed_mid_batch_leaves_every_unsettled_delivery_to_be_rescued(client, tenant, receiver, start_worker):
    receiver.responses.append(Reply(200, delay=30))  # the batch's first post hangs until the worker is gone
    first = start_worker(timeout="2", stale_after="1")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_drivers(client, tenant, "a", "b", "c")
    assert receiver.wait_for(1)
    # Kill it once the two others are settled: one answered but not yet written down would (rightly, at
    # least once) be sent again, and this test is about the unsettled one alone.
    succeeded = lambda: sum(d["data"]["status"] == "succeeded" for d in deliveries(client, tenant, hook))  # noqa: E731
    assert wait_until(lambda: succeeded() == 2)
    first.kill()

    start_worker(timeout="2", stale_after="1")
    log = settled(client, tenant, hook, 3)
    assert {d["data"]["status"] for d in log} == {"succeeded"}
    assert all([a["status"] for a in d["data"]["attempts"]] == [200] for d in log)
    delivered = [r.headers["service-delivery"] for r in receiver.requests]
    assert sorted(set(delivered)) == sorted(d["uuid"] for d in log)
    assert len(delivered) == 4  # the hung one twice, the others once
    assert wait_until(lambda: len(deliveries(client, tenant, hook)) == 3)
