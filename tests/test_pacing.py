"""Per-webhook pacing: RISKAPI_WEBHOOK_MAX_RATE attempts a second to one webhook at most, across workers."""

import uuid

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from jobs.pacing import Pacer
from models.webhooks import Attempt, Delivery, Webhook
from tests.support import make_webhook
from toolkit.serving import wait_until
from toolkit.tenants import items

RATE = 10.0


def most_in_any_second(times: list[float]) -> int:
    times = sorted(times)
    return max(sum(1 for t in times[i:] if t - start < 1.0) for i, start in enumerate(times))


def test_slots_are_one_interval_apart_for_every_pacer_sharing_redis(redis_url):
    prefix = f"riskapi:pace:test-{uuid.uuid4().hex}"
    connection = redis.Redis.from_url(redis_url)
    one, other = Pacer(connection, RATE, prefix), Pacer(connection, RATE, prefix)
    first = one.reserve(7, 3)
    then = other.reserve(7)
    assert first[0] < 0.01 and [round(b - a, 3) for a, b in zip(first, first[1:], strict=False)] == [0.1, 0.1]
    assert 0.25 <= then[0] <= 0.31, then  # after the three the first pacer took, not beside them
    assert other.reserve(8)[0] < 0.01  # each webhook has its own slots
    connection.delete(one.key(7), one.key(8))


def test_several_webhooks_reserve_in_one_round_trip_as_one_by_one(redis_url):
    prefix = f"riskapi:pace:test-{uuid.uuid4().hex}"
    connection = redis.Redis.from_url(redis_url)
    one, other = Pacer(connection, RATE, prefix), Pacer(connection, RATE, prefix)
    other.reserve(7, 2)  # webhook 7 has two slots taken already; 8 none
    waits = one.reserve_many({7: 2, 8: 1, 9: 0})
    assert set(waits) == {7, 8, 9} and waits[9] == []
    assert 0.15 <= waits[7][0] <= 0.21 and round(waits[7][1] - waits[7][0], 3) == 0.1, waits
    assert waits[8][0] < 0.01, waits
    connection.delete(one.key(7), one.key(8))


def test_without_a_rate_nothing_waits_and_redis_is_not_asked():
    pacer = Pacer(redis.Redis(port=1), 0, "riskapi:pace:none")  # nothing listens on port 1
    assert pacer.reserve(1, 3) == [0.0, 0.0, 0.0]


def test_without_redis_a_process_paces_by_itself():
    away = redis.Redis(port=1, retry=Retry(NoBackoff(), 0))  # nothing listens on port 1
    pacer = Pacer(away, RATE, "riskapi:pace:away")
    waits = pacer.reserve(1, 2) + pacer.reserve(1)
    assert waits[0] < 0.01 and 0.09 <= waits[1] <= 0.11 and 0.15 <= waits[2] <= 0.21, waits


def test_a_burst_reaches_the_receiver_at_the_rate_with_two_workers(client, tenant, receiver, start_worker, connection):
    start_worker(max_rate=str(RATE))
    start_worker(max_rate=str(RATE))
    hook = make_webhook(client, tenant, url=receiver.url)
    response = client.post(tenant.url("/drivers"), json=items("driver", *[{}] * 30), headers=tenant.headers)
    assert response.status_code == 201, response.text
    assert receiver.wait_for(30, timeout=30)
    arrived = [request.at for request in receiver.requests]
    assert len({request.headers["service-delivery"] for request in receiver.requests}) == 30
    # The rate bounds when attempts start, which the attempt log records: arrivals also carry each
    # connection's set-up (a TLS handshake for a new one, none for a kept one), which can bunch them,
    # and the first one's handshake, late on a busy machine, shortened their span below 2.7 s.
    attempts = Attempt.select(Attempt.at).join(Delivery).join(Webhook).where(Webhook.uuid == hook["uuid"])
    assert wait_until(lambda: attempts.count() == 30, timeout=10)
    started = [attempt.at.timestamp() for attempt in attempts]
    # 30 slots 0.1 s apart span 2.9 s; an attempt may start a little after its slot, never before.
    assert max(started) - min(started) >= 2.7, max(started) - min(started)
    assert most_in_any_second(started) <= RATE + 1, most_in_any_second(started)
    assert most_in_any_second(arrived) <= RATE + 3, most_in_any_second(arrived)


def test_other_webhooks_do_not_wait_for_a_paced_one(client, tenant, other_tenant, receiver, start_worker):
    start_worker(max_rate="2")
    make_webhook(client, tenant, url=receiver.url)
    other = make_webhook(client, other_tenant, url=receiver.url)
    client.post(tenant.url("/drivers"), json=items("driver", *[{}] * 20), headers=tenant.headers)  # 10 s at 2/s
    assert receiver.wait_for(1, timeout=10)
    client.post(other_tenant.url("/drivers"), json=items("driver", {}), headers=other_tenant.headers)

    def arrived_for_other():
        return any(request.headers["service-webhook"] == other["uuid"] for request in receiver.requests)

    assert wait_until(arrived_for_other, timeout=3)
    assert len(receiver.requests) < 10  # the paced webhook is still being served at its rate
