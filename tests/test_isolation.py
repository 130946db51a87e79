"""Isolation: a slow or dead receiver delays nobody else's deliveries.

One `riskapi worker` with the default threads and a 1 s deadline; agency A's receiver answers after
3 s (every attempt times out), agency B's (another server, as it would be) at once. While 1,000 of
A's deliveries are pending, to one webhook or to 50, each of B's creates must reach B's receiver
within a second. Run alone with `pytest -m isolation`.
"""

from __future__ import annotations

import statistics
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


def healthy_latencies(client, healthy, receiver, creates: int = 15) -> list[float]:
    """Create drivers in the healthy agency one at a time; return create → arrival seconds of each."""
    latencies = []
    for number in range(creates):
        seen = len(receiver.requests)
        body = items("driver", {"first_name": f"H{number}"})
        response = client.post(healthy.url("/drivers"), json=body, headers=healthy.headers)
        returned = time.monotonic()
        assert response.status_code == 201, response.text
        arrived = wait_until(lambda seen=seen: receiver.requests[seen:], timeout=10, interval=0.01)
        assert arrived, f"healthy delivery {number} did not arrive within 10 s"
        latencies.append(arrived[0].at - returned)
        time.sleep(0.05)
    return latencies


@pytest.fixture
def slow_receiver():
    """A second HTTPS receiver whose every answer comes after SLOW seconds."""
    with Receiver() as rx:
        rx.responses = lambda request: Reply(200, delay=SLOW)
        yield rx


def run(client, receiver, slow_receiver, start_worker, tmp_path, paths: list[str], per_create: int):
    bundle = tmp_path / "cas.pem"  # the worker trusts both receivers' CAs
    bundle.write_text(open(receiver.ca_path).read() + open(slow_receiver.ca_path).read())
    worker = start_worker(timeout=str(DEADLINE), retry_delays="1,2,3", stale_after="5", ca_bundle=str(bundle))
    slow_urls = [slow_receiver.url.replace("/hook", path) for path in paths]
    slow, healthy = make_tenant(webhook_limit=100), make_tenant("personal")
    subscribe(client, slow, slow_urls)
    subscribe(client, healthy, [receiver.url])
    body = items("driver", *[{"first_name": f"S{n}"} for n in range(per_create)])
    assert client.post(slow.url("/drivers"), json=body, headers=slow.headers).status_code == 201
    assert pending(slow.agency.id) == PENDING
    # The worker takes the whole slow backlog in before the healthy creates start.
    assert wait_until(lambda: taken_in(slow.agency.id) == PENDING, timeout=20, interval=0.1), worker.output()
    assert slow_receiver.wait_for(1, timeout=5)
    latencies = healthy_latencies(client, healthy, receiver)
    still = pending(slow.agency.id)
    slow_seen = len(slow_receiver.requests)
    report = f"healthy latencies {[round(x, 3) for x in latencies]}; slow pending {still}, slow attempts {slow_seen}"
    # p99 <= 1 s is the aim (bench/deliveries.py measures it over 100 creates); on a shared 2-core
    # machine one create of 15 may meet a stall of its own, so one is allowed up to 5 s (it was 80 s).
    assert sum(latency > 1.0 for latency in latencies) <= 1 and max(latencies) <= 5.0, report
    assert statistics.median(latencies) <= 0.3, report
    assert still >= PENDING * 0.8, report  # they were pending all along
    assert "Traceback" not in worker.output(), worker.output()
    return latencies


def test_one_slow_webhook_with_1000_pending_delays_no_other_agency(client, receiver, slow_receiver, start_worker, tmp_path):
    run(client, receiver, slow_receiver, start_worker, tmp_path, ["/slow"], PENDING)


def test_50_slow_webhooks_with_20_pending_each_delay_no_other_agency(client, receiver, slow_receiver, start_worker, tmp_path):
    run(client, receiver, slow_receiver, start_worker, tmp_path, [f"/slow/{n}" for n in range(50)], PENDING // 50)
