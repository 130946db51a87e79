"""Figure (c) of bench/deliveries.py: a healthy webhook's create → delivery latency while slow deliveries are pending.

Another agency subscribes webhooks to a receiver that answers after 10 s (every attempt runs into
the 5 s deadline); N form.completed events (default 1,000) go to them, to one webhook or spread over
50. Right after, without waiting for the worker to take them in, the healthy agency creates drivers
one at a time at random moments, and each create's delivery is timed at the healthy receiver.
"""

from __future__ import annotations

import json
import random
import sys
import time

import models
from foundation import signing
from toolkit.tenants import items, make_tenant
from webhooks import outbox

SLOW_REPLY = 10.0  # seconds the slow receiver takes, as in issue 9


def percentile(values: list[float], share: float) -> float:
    """Return the value at `share` (0..1) of the sorted values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def slow_backlog(slow_url: str, webhooks: int, pending: int) -> object:
    """Subscribe `webhooks` webhooks of a new agency to the slow receiver and queue `pending` deliveries to them."""
    from models.webhooks import Webhook, pack_events

    tenant = make_tenant(webhook_limit=webhooks)
    with models.db.connection_context():
        for number in range(webhooks):
            Webhook.create(
                agency=tenant.agency.id, type="custom", url=slow_url.replace("/hook", f"/slow/{number}"),
                secret=signing.generate_secret(), events=pack_events(["form.completed"]),
            )  # fmt: skip
        with models.atomic():
            outbox.record(tenant.agency.id, "form.completed", [{"form": f"S-{n}"} for n in range(pending // webhooks)])
    return tenant


def retire(tenant) -> None:
    """Disable the slow agency's webhooks: their pending deliveries fail without being sent, so the next case starts clean."""
    from models.webhooks import Webhook

    with models.db.connection_context():
        Webhook.update(disabled=models.utcnow()).where(Webhook.agency == tenant.agency.id).execute()


def pending_count(tenant) -> int:
    """Count the slow agency's pending deliveries."""
    from models.webhooks import PENDING, Delivery, Webhook

    with models.db.connection_context():
        return Delivery.select().join(Webhook).where((Webhook.agency == tenant.agency.id) & (Delivery.status == PENDING)).count()


def healthy_latencies(http, tenant, receiver, creates: int, label: str, seed: int = 11) -> list[float]:
    """Create drivers one at a time at random moments; return create → delivery milliseconds of each.

    Random moments: a fixed pace would lock onto the relay's polling period.
    """
    pace = random.Random(seed)
    latencies = []
    for number in range(creates):
        time.sleep(pace.uniform(0, 0.1))
        seen = len(receiver.requests)
        response = http.post(tenant.url("/drivers"), json=items("driver", {"first_name": f"{label}{number}"}))
        returned = time.monotonic()
        if response.status_code != 201:
            raise SystemExit(f"create failed: {response.status_code} {response.text}")
        if not receiver.wait_for(seen + 1, timeout=60):
            raise SystemExit("isolation: a healthy delivery did not arrive within 60 s")
        arrived = receiver.requests[seen]
        assert json.loads(arrived.body)["data"]["data"]["first_name"] == f"{label}{number}"
        latencies.append((arrived.at - returned) * 1000)
    return latencies


def run_case(http, tenant, receiver, slow_receiver, webhooks: int, pending: int, creates: int) -> dict:
    """One case: the slow backlog, then the healthy creates; return the figures."""
    slow = slow_backlog(slow_receiver.url, webhooks, pending)
    started = time.monotonic()
    latencies = healthy_latencies(http, tenant, receiver, creates, f"I{webhooks}-")
    figures = {
        "webhooks": webhooks,
        "pending_at_start": pending,
        "pending_at_end": pending_count(slow),
        "slow_attempts": len(slow_receiver.requests),
        "seconds": time.monotonic() - started,
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies),
        "creates": creates,
    }
    retire(slow)
    return figures


if __name__ == "__main__":
    sys.exit("bench/isolation.py is figure (c) of the deliveries bench: python -m bench.deliveries (--slow, --slow-creates)")
