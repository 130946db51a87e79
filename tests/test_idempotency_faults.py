"""Idempotency-Key under faults: concurrent retries write once; a process that dies between commit and answer replays.

The death comes from outside the product: tests.dies_after_commit serves the API with an after-commit hook that exits.
"""

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

import models
from api import idempotency
from models.tenancy import Risk
from tests import dies_after_commit
from tests.support import make_webhook
from tests.test_idempotency import counts, keyed, stored
from toolkit.serving import answers, free_port, wait_until
from toolkit.tenants import items

ROOT = Path(__file__).resolve().parent.parent
DRIVERS = items("driver", *({"first_name": f"Driver {n}", "last_name": "Lee"} for n in range(50)))


def at_once(base_url: str, requests: list[tuple[str, dict, dict]]) -> list[httpx.Response]:
    """POST every (path, headers, body) at once, one thread and connection each; return the answers in order."""
    barrier = threading.Barrier(len(requests))
    answered: list = [None] * len(requests)

    def post(index: int, path: str, headers: dict, body: dict) -> None:
        with httpx.Client(base_url=base_url, timeout=60) as http:
            barrier.wait()
            answered[index] = http.post(path, json=body, headers=headers)

    threads = [threading.Thread(target=post, args=(i, *request)) for i, request in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answered


def test_concurrent_retries_write_once_and_the_others_wait_or_replay(server, client, tenant):
    make_webhook(client, tenant, events=["driver.created"])
    for round_ in range(4):
        key = str(uuid.uuid4())
        answered = at_once(server.url + "/api/v1", [(tenant.url("/drivers"), keyed(tenant, key), DRIVERS)] * 8)
        ran = [a for a in answered if a.status_code == 201 and idempotency.REPLAYED not in a.headers]
        assert len(ran) == 1, [(a.status_code, a.text[:80]) for a in answered]
        for answer in answered:
            assert answer.status_code in {201, 409}, answer.text
            if answer.status_code == 409:
                assert answer.headers["Retry-After"] == "1"
            elif answer is not ran[0]:
                assert answer.content == ran[0].content
        assert counts(tenant) == (50 * (round_ + 1),) * 3  # drivers, events, deliveries: once each
        later = client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key))
        assert later.headers[idempotency.REPLAYED] == "true" and later.content == ran[0].content


@pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("sqlite"),
    reason="needs a row lock that holds a write after its key's claim; SQLite has one write lock for everything "
    "(there, test_a_key_in_use_answers_409_until_its_lease_ends_then_the_retry_runs and the concurrent test cover it)",
)
def test_a_retry_while_the_first_request_runs_answers_409_and_the_first_answer_after(client, tenant, settings):
    key = str(uuid.uuid4())
    with models.db.connection_context():
        risk_id = Risk.get(Risk.uuid == tenant.risk).id
    holder = psycopg.connect(settings.database_url)
    try:
        with holder.cursor() as cursor:  # a new driver's foreign key waits for this lock: the first request stalls mid-write
            cursor.execute("SELECT id FROM risk WHERE id = %s FOR UPDATE", (risk_id,))
        first: list[httpx.Response] = []
        running = threading.Thread(
            target=lambda: first.append(client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key)))
        )
        running.start()
        assert wait_until(lambda: stored(tenant, key) is not None, timeout=30)
        time.sleep(0.2)
        busy = client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key))
        assert busy.status_code == 409 and busy.headers["Retry-After"] == "1", busy.text
        assert counts(tenant)[0] == 0
    finally:
        holder.rollback()
        holder.close()
    running.join(30)
    assert first[0].status_code == 201 and idempotency.REPLAYED not in first[0].headers
    retried = client.post(tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key))
    assert retried.headers[idempotency.REPLAYED] == "true" and retried.content == first[0].content
    assert counts(tenant)[0] == 50


def start_api(settings, runner: str = "uvicorn") -> tuple[subprocess.Popen, str]:
    """Start an API process (`python -m runner`, uvicorn's command line) on the test database; return it and its base URL."""
    port = free_port()
    command = [sys.executable, "-m", runner, "api.app:asgi", "--factory", "--port", str(port), "--log-level=warning"]
    # From the checkout's root: `-m` imports this checkout's packages (and tests.*), not an installed copy.
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "DATABASE_URL": settings.database_url})
    url = f"http://127.0.0.1:{port}/api/v1"
    assert wait_until(lambda: answers(url), timeout=30)
    return process, url


def test_a_process_killed_between_commit_and_answer_replays_the_committed_answer(server, client, tenant, settings):
    make_webhook(client, tenant, events=["driver.created"])
    key = str(uuid.uuid4())
    dying, url = start_api(settings, runner="tests.dies_after_commit")
    try:
        with pytest.raises(httpx.TransportError):  # the client sees only a dropped connection
            httpx.post(url + tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key), timeout=60)
        assert dying.wait(30) == dies_after_commit.EXIT_STATUS  # its exit right after the commit, no other death
    finally:
        dying.kill()
        dying.wait()
    assert counts(tenant) == (50, 50, 50) and stored(tenant, key).status == 201  # committed with its answer, never sent
    serving, url = start_api(settings)
    try:
        retried = httpx.post(url + tenant.url("/drivers"), json=DRIVERS, headers=keyed(tenant, key), timeout=60)
    finally:
        serving.terminate()
        serving.wait(10)
    assert retried.status_code == 201 and retried.headers[idempotency.REPLAYED] == "true"
    listed = client.get(tenant.url("/drivers"), params={"per_page": 100}, headers=tenant.headers).json()["data"]
    assert sorted(d["uuid"] for d in retried.json()["data"]) == sorted(d["uuid"] for d in listed)
    assert counts(tenant) == (50, 50, 50)  # the retry wrote nothing, recorded nothing, sent nothing
