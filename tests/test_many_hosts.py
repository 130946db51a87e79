"""Many hosts: two API processes and two `riskapi worker` processes on one database and one Redis."""

import collections
import concurrent.futures
import json
import time

import httpx

from tests.support import make_tenant
from toolkit.tenants import items

WRITES = 1000


def test_two_apis_and_two_workers_deliver_every_event_exactly_once(start_api, start_worker, receiver, redis_url):
    apis = [start_api(REDIS_URL=redis_url), start_api(REDIS_URL=redis_url)]
    start_worker()
    start_worker()
    tenant = make_tenant(webhook_limit=3)
    hook = {"type": "custom", "url": receiver.url, "events": ["driver.created"]}
    assert httpx.post(apis[0] + "/webhooks", json=items("webhook", hook), headers=tenant.headers, timeout=30).status_code == 201

    def write(n: int) -> httpx.Response:
        return httpx.post(apis[n % 2] + tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers, timeout=60)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(write, range(WRITES)))
    assert collections.Counter(r.status_code for r in answers) == {201: WRITES}
    drivers = [r.json()["data"][0] for r in answers]
    # Numbering holds across both APIs: every auto number is unique, none skipped.
    assert sorted(d["data"]["number"] for d in drivers) == list(range(1, WRITES + 1))

    assert receiver.wait_for(WRITES, timeout=120), len(receiver.requests)
    time.sleep(2)  # let any duplicate arrive
    sent = [r.headers["service-delivery"] for r in receiver.requests]
    assert len(sent) == len(set(sent)) == WRITES  # two relays, two workers: none twice, none lost
    delivered = {json.loads(r.body)["data"]["uuid"] for r in receiver.requests}
    assert delivered == {d["uuid"] for d in drivers}


def test_the_webhook_plan_limit_holds_across_two_apis(start_api):
    apis = [start_api(), start_api()]
    tenant = make_tenant(webhook_limit=3)

    def create(n: int) -> int:
        hook = {"type": "custom", "url": f"https://hooks.example.com/{n}", "events": ["driver.created"]}
        return httpx.post(apis[n % 2] + "/webhooks", json=items("webhook", hook), headers=tenant.headers, timeout=30).status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = collections.Counter(pool.map(create, range(16)))
    assert statuses == {201: 3, 400: 13}
    listed = httpx.get(apis[0] + "/webhooks", headers=tenant.headers, timeout=30).json()["data"]
    assert len(listed) == 3
