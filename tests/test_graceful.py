"""SIGTERM to a worker with deliveries in flight and waiting: nothing is lost, and only attempts already sent repeat."""

import collections

from tests.support import make_webhook
from toolkit.receiver import Reply
from toolkit.serving import wait_until
from toolkit.tenants import items

DRIVERS = 40


def test_sigterm_to_a_worker_loses_nothing_and_repeats_only_what_was_sent(client, tenant, receiver, start_worker):
    # Each answer takes 0.5 s and one webhook gets 4 attempts at a time: most deliveries are still
    # waiting in the worker's line when it is told to stop.
    receiver.responses = lambda request: Reply(200, delay=0.5)
    first = start_worker(stale_after="2")
    hook = make_webhook(client, tenant, url=receiver.url)
    created = client.post(tenant.url("/drivers"), json=items("driver", *[{}] * DRIVERS), headers=tenant.headers)
    assert created.status_code == 201
    assert receiver.wait_for(4)
    first.stop()  # SIGTERM; the group is killed only if it has not exited within the grace
    sent_before = {r.headers["service-delivery"] for r in receiver.requests}
    assert len(sent_before) < DRIVERS, "everything was sent before the stop: the test proves nothing"

    start_worker(stale_after="2")

    def delivered():
        log = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers, params={"per_page": 100}).json()
        return log["data"] if all(d["data"]["status"] == "succeeded" for d in log["data"]) else None

    log = wait_until(delivered, timeout=90, interval=0.5)
    assert log and len(log) == DRIVERS
    counts = collections.Counter(r.headers["service-delivery"] for r in receiver.requests)
    assert set(counts) == {d["uuid"] for d in log}  # none lost
    repeated = {uuid for uuid, n in counts.items() if n > 1}
    assert repeated <= sent_before  # only an attempt already sent before the stop may go again
    assert all(n <= 2 for n in counts.values())
