"""Relay wake-ups: a write answered by the API sends its deliveries on at once, not at the relay's next poll."""

from __future__ import annotations

import threading
import uuid

import httpx
import redis

from tests.support import make_webhook
from toolkit.tenants import items
from webhooks import wakeups as wake


def test_a_nudge_wakes_one_wait_and_a_burst_is_one_token(redis_url):
    queue = f"wake-{uuid.uuid4().hex[:8]}"
    connection = redis.Redis.from_url(redis_url)
    nudger = wake.Nudger(redis_url, queue)
    assert not wake.wait(connection, queue, 0.05)
    for _ in range(20):
        nudger.nudge()
    assert wake.wait(connection, queue, 30)  # roomy: the pusher thread may be slow to run on a busy machine
    more = 0
    while wake.wait(connection, queue, 0.3):  # the pusher may still push what came after its first push
        more += 1
    # 20 nudges in a burst wake a relay once or twice, not 20 times (a third push takes the OS pausing the
    # burst while the pusher runs, which a busy machine may do once).
    assert more <= 2, more
    connection.delete(wake.key(queue))


def test_a_wait_longer_than_the_clients_socket_timeout_is_still_a_wait(redis_url, monkeypatch):
    """A relay interval past the connection's socket timeout is waited out (in shorter BLPOPs), not an error."""
    monkeypatch.setattr(wake, "LONGEST_BLPOP", 0.2)  # as 2 s is to the relay's 10 s socket timeout
    queue = f"wake-{uuid.uuid4().hex[:8]}"
    connection = redis.Redis.from_url(redis_url, socket_timeout=0.5)
    assert not wake.wait(connection, queue, 1.0)  # one BLPOP of 1 s would raise redis's TimeoutError at 0.5 s
    wake.Nudger(redis_url, queue).nudge()
    assert wake.wait(connection, queue, 30)


class _Stalled:
    """A Redis that takes a push and does not answer until released."""

    def __init__(self) -> None:
        self.held, self.release = threading.Event(), threading.Event()

    def pipeline(self, transaction: bool = True) -> _Stalled:
        return self

    def __enter__(self) -> _Stalled:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def rpush(self, *args: object) -> None:
        pass

    def expire(self, *args: object) -> None:
        pass

    def execute(self) -> None:
        self.held.set()
        self.release.wait(60)


def test_a_nudge_to_a_redis_that_is_away_is_dropped_without_delay():
    """Nudges return while a push hangs on a Redis that does not answer: a request never waits for Redis."""
    nudger = wake.Nudger("redis://127.0.0.1:1/0", "away")  # nothing listens on port 1
    stalled = nudger.connection = _Stalled()
    nudger.nudge()
    assert stalled.held.wait(30)  # the pusher is stuck in Redis from here on
    nudging = threading.Thread(target=lambda: [nudger.nudge() for _ in range(100)], daemon=True)
    nudging.start()
    try:
        # Only nudges that wait for the stalled push could still be running: 30 s is room for a busy machine.
        nudging.join(30)
        assert not nudging.is_alive()
    finally:
        stalled.release.set()


def deliver_three(api: str, tenant, receiver, wait: float) -> list[bool]:
    """Create three drivers one by one; return, for each, whether its delivery arrived within `wait` s of its create."""
    arrived = []
    with httpx.Client(base_url=api, timeout=30) as http:
        make_webhook(http, tenant, url=receiver.url)
        for _ in range(3):
            seen = len(receiver.requests)
            response = http.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)
            assert response.status_code == 201, response.text
            arrived.append(receiver.wait_for(seen + 1, timeout=wait))
    return arrived


# The relay's first pass is at the worker's start, before the webhook exists, and its next is an hour away:
# any delivery that arrives was sent by a wake-up, whenever it arrives and however busy the machine.
NO_POLL = "3600"


def test_deliveries_leave_at_once_although_the_relay_does_not_poll_again(tenant, receiver, start_worker, start_api, redis_url):
    worker = start_worker(relay_interval=NO_POLL)
    api = start_api(REDIS_URL=redis_url, RISKAPI_WEBHOOK_QUEUE=worker.queue)
    assert deliver_three(api, tenant, receiver, wait=30) == [True] * 3


def test_without_wake_ups_the_same_deliveries_wait_for_the_poll(tenant, receiver, start_worker, start_api, redis_url):
    worker = start_worker(relay_interval=NO_POLL)
    api = start_api(REDIS_URL=redis_url, RISKAPI_WEBHOOK_QUEUE=worker.queue, RISKAPI_WEBHOOK_RELAY_WAKE="0")
    # The control: what the test above would see without them (waiting longer would only make it stricter).
    assert deliver_three(api, tenant, receiver, wait=1) == [False] * 3


def test_only_a_write_that_leaves_deliveries_waiting_wakes_a_relay(tenant, receiver, start_api, redis_url):
    queue = f"wake-{uuid.uuid4().hex[:8]}"  # no relay waits on it: every token pushed stays for the test to see
    api = start_api(REDIS_URL=redis_url, RISKAPI_WEBHOOK_QUEUE=queue)
    connection = redis.Redis.from_url(redis_url)
    try:
        with httpx.Client(base_url=api, timeout=30) as http:
            # A push follows its answer within milliseconds: a second's wait catches one. (On a machine too busy to
            # push in a second this could pass wrongly, never fail wrongly.)
            assert http.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers).status_code == 201
            assert not wake.wait(connection, queue, 1.0), "a create no webhook takes woke a relay"
            make_webhook(http, tenant, url=receiver.url)
            assert not wake.wait(connection, queue, 1.0), "a webhook's creation woke a relay"
            assert http.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers).status_code == 201
            assert wake.wait(connection, queue, 30), "a create with a delivery to send woke no relay"
    finally:
        connection.delete(wake.key(queue))
