"""Isolation: a slow or dead receiver delays nobody else's deliveries.

One `riskapi worker` with the default threads and a 1 s deadline; agency A's receiver answers after
3 s (every attempt times out), agency B's (another server, as it would be) at once. While 1,000 of
A's deliveries are pending, to one webhook or to 50, each of B's deliveries must arrive ahead of A's
backlog: before A's receiver has seen a first attempt of every one of A's deliveries, which is when a
queue that serves in order would get to B. The assertions are about order, not time (how fast is
bench/deliveries.py's figure (c), a benchmark); the waits are only there so a failure ends.
Run alone with `pytest -m isolation`.
"""

from __future__ import annotations

import time

import pytest

import models
from tests.support import make_tenant, webhook_items
from toolkit.receiver import Receiver, Reply
from toolkit.serving import wait_until
from toolkit.tenants import items

pytestmark = pytest.mark.isolation

DEADLINE = 1  # RISKAPI_WEBHOOK_TIMEOUT of the worker
SLOW = 3.0  # seconds A's receivers take: every attempt runs into the deadline
PENDING = 1000


def subscribe(client, tenant, urls: list[str]) -> list[dict]:
    made = []
    for start in range(0, len(urls), 10):  # at most 10 webhooks per request
        datas = [{"type": "custom", "url": url, "events": ["driver.created"]} for url in urls[start : start + 10]]
        response = client.post("/webhooks", json=webhook_items(*datas), headers=tenant.headers)
        assert response.status_code == 201, response.text
        made += response.json()["data"]
    return made


def taken_in(agency_id: int) -> int:
    """Count the agency's pending deliveries that a worker has claimed or already attempted."""
    from models.webhooks import PENDING as WAITING
    from models.webhooks import Delivery, Webhook

    with models.db.connection_context():
        query = (
            Delivery.select()
            .join(Webhook)
            .where(
                (Webhook.agency == agency_id)
                & (Delivery.status == WAITING)
                & (Delivery.locked_until.is_null(False) | (Delivery.tries > 0))
            )
        )
        return query.count()


def pending(agency_id: int) -> int:
    from models.webhooks import PENDING as WAITING
    from models.webhooks import Delivery, Webhook

    with models.db.connection_context():
        return Delivery.select().join(Webhook).where((Webhook.agency == agency_id) & (Delivery.status == WAITING)).count()


def first_attempts(slow_receiver) -> int:
    """Count the slow agency's deliveries that its receiver has seen at least once."""
    return len({request.headers["webhook-id"] for request in slow_receiver.requests})


def healthy_arrivals(client, healthy, slow, receiver, slow_receiver, creates: int = 15) -> list[tuple[int, int]]:
    """Create drivers in the healthy agency one at a time; return, for each delivery's arrival, how many of
    the slow deliveries were still pending then, and how many had been attempted (counted after)."""
    seen_then = []
    for number in range(creates):
        seen = len(receiver.requests)
        body = items("driver", {"first_name": f"H{number}"})
        response = client.post(healthy.url("/drivers"), json=body, headers=healthy.headers)
        assert response.status_code == 201, response.text
        arrived = wait_until(lambda seen=seen: receiver.requests[seen:], timeout=60, interval=0.01)
        assert arrived, f"healthy delivery {number} did not arrive within 60 s"
        # Pending first: a slow delivery not yet attempted when counted after was pending when counted before.
        seen_then.append((pending(slow.agency.id), first_attempts(slow_receiver)))
        time.sleep(0.05)
    return seen_then


@pytest.fixture
def slow_receiver():
    """A second HTTPS receiver whose every answer comes after SLOW seconds."""
    with Receiver() as rx:
        rx.responses = lambda request: Reply(200, delay=SLOW)
        yield rx


def run(client, receiver, slow_receiver, start_worker, tmp_path, paths: list[str], per_create: int):
    bundle = tmp_path / "cas.pem"  # the worker trusts both receivers' CAs
    bundle.write_text(open(receiver.ca_path).read() + open(slow_receiver.ca_path).read())
    # No failure limit to speak of: a slow webhook disabled midway would drop its backlog without attempts.
    worker = start_worker(
        timeout=str(DEADLINE), retry_delays="1,2,3", stale_after="5", failure_limit=str(10 * PENDING), ca_bundle=str(bundle)
    )
    slow_urls = [slow_receiver.url.replace("/hook", path) for path in paths]
    slow, healthy = make_tenant(webhook_limit=100), make_tenant("personal")
    subscribe(client, slow, slow_urls)
    subscribe(client, healthy, [receiver.url])
    body = items("driver", *[{"first_name": f"S{n}"} for n in range(per_create)])
    assert client.post(slow.url("/drivers"), json=body, headers=slow.headers).status_code == 201
    assert pending(slow.agency.id) == PENDING
    # The worker takes the whole slow backlog in before the healthy creates start.
    assert wait_until(lambda: taken_in(slow.agency.id) == PENDING, timeout=60, interval=0.1), worker.output()
    assert slow_receiver.wait_for(1)
    seen_then = healthy_arrivals(client, healthy, slow, receiver, slow_receiver)
    attempted = [count for _, count in seen_then]
    report = f"(slow pending, slow deliveries attempted) at each healthy arrival {seen_then}"
    # Every healthy delivery overtook the backlog: in order, it would have come after all of them.
    assert all(count < PENDING for count in attempted), report
    # They were pending all along: every slow delivery not yet attempted was still waiting (none dropped
    # unattempted), however long a busy machine took over the healthy ones.
    assert all(waiting >= PENDING - count for waiting, count in seen_then), report
    assert "Traceback" not in worker.output(), worker.output()
    return attempted


def test_one_slow_webhook_with_1000_pending_delays_no_other_agency(client, receiver, slow_receiver, start_worker, tmp_path):
    run(client, receiver, slow_receiver, start_worker, tmp_path, ["/slow"], PENDING)


def test_50_slow_webhooks_with_20_pending_each_delay_no_other_agency(client, receiver, slow_receiver, start_worker, tmp_path):
    run(client, receiver, slow_receiver, start_worker, tmp_path, [f"/slow/{n}" for n in range(50)], PENDING // 50)
