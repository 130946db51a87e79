"""Relay wake-ups: a write answered by the API sends its deliveries on at once, not at the relay's next poll."""

import time
import uuid

import httpx
import redis

from riskapi.webhooks import wakeups as wake
from tests.support import make_webhook
from toolkit.tenants import items


def test_a_nudge_wakes_one_wait_and_a_burst_is_one_token(redis_url):
    queue = f"wake-{uuid.uuid4().hex[:8]}"
    connection = redis.Redis.from_url(redis_url)
    nudger = wake.Nudger(redis_url, queue)
    assert not wake.wait(connection, queue, 0.05)
    for _ in range(20):
        nudger.nudge()
    began = time.monotonic()
    assert wake.wait(connection, queue, 5)
    assert time.monotonic() - began < 1
    more = 0
    while wake.wait(connection, queue, 0.3):  # the pusher may still push what came after its first push
        more += 1
    assert more <= 1, more  # 20 nudges in a burst wake a relay once or twice, not 20 times
    connection.delete(wake.key(queue))


def test_a_nudge_to_a_redis_that_is_away_is_dropped_without_delay():
    nudger = wake.Nudger("redis://127.0.0.1:1/0", "away")  # nothing listens on port 1
    began = time.monotonic()
    for _ in range(100):
        nudger.nudge()
    assert time.monotonic() - began < 0.1


def deliver_three(api: str, tenant, receiver) -> list[float]:
    """Create three drivers one by one; return how long each delivery took to arrive after its create."""
    waited = []
    with httpx.Client(base_url=api, timeout=10) as http:
        make_webhook(http, tenant, url=receiver.url)
        for _ in range(3):
            seen = len(receiver.requests)
            response = http.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)
            assert response.status_code == 201, response.text
            returned = time.monotonic()
            if not receiver.wait_for(seen + 1, timeout=2):
                waited.append(float("inf"))
                continue
            waited.append(receiver.requests[seen].at - returned)
    return waited


def test_deliveries_leave_at_once_although_the_relay_polls_every_30_s(tenant, receiver, start_worker, start_api, redis_url):
    worker = start_worker(relay_interval="30")
    api = start_api(REDIS_URL=redis_url, RISKAPI_WEBHOOK_QUEUE=worker.queue)
    waited = deliver_three(api, tenant, receiver)
    assert max(waited) < 1.0, waited


def test_without_wake_ups_the_same_deliveries_wait_for_the_poll(tenant, receiver, start_worker, start_api, redis_url):
    worker = start_worker(relay_interval="30")
    api = start_api(REDIS_URL=redis_url, RISKAPI_WEBHOOK_QUEUE=worker.queue, RISKAPI_WEBHOOK_RELAY_WAKE="0")
    waited = deliver_three(api, tenant, receiver)
    assert min(waited) > 1.0, waited  # the control: what the test above would see without them
