"""bench.yardsticks.floor, the bare ASGI + asyncpg side of bench.run: the service's very page, or its figure means nothing."""

import os
import subprocess
import sys

import httpx
import pytest

from toolkit import ROOT
from toolkit.serving import free_port, wait_until
from toolkit.tenants import items

pytestmark = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="the floor speaks asyncpg: PostgreSQL alone (CI's postgres pass)",
)


@pytest.fixture
def floor(settings):
    port = free_port()
    env = {**os.environ, "DATABASE_URL": settings.database_url, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "uvicorn", "bench.yardsticks.floor:app", "--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(argv, cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}/api/v1"

    def answers() -> bool:
        try:
            return httpx.get(base + "/nothing", timeout=10).status_code == 404
        except httpx.TransportError:
            return False

    try:
        assert wait_until(answers, timeout=60)
        yield base
    finally:
        process.terminate()
        process.wait(30)


def test_the_floor_answers_the_drivers_page_the_service_answers(floor, client, tenant):
    vehicle = client.post(tenant.url("/vehicles"), json=items("vehicle", {}), headers=tenant.headers).json()["data"][0]
    drivers = [{"first_name": "Ada", "date_of_birth": "1990-02-03"}, {"vehicle": vehicle["uuid"]}] + [{}] * 10
    made = client.post(tenant.url("/drivers"), json=items("driver", *drivers), headers=tenant.headers)
    assert made.status_code == 201, made.text
    served = client.get(tenant.url("/drivers"), params={"per_page": 10}, headers=tenant.headers)
    assert served.status_code == 200, served.text
    served = served.json()
    bare = httpx.get(floor + tenant.url("/drivers"), params={"per_page": 10}, headers=tenant.headers, timeout=30)
    assert bare.status_code == 200, bare.text
    bare = bare.json()
    assert bare["data"] == served["data"]
    assert (bare["per_page"], bare["prev_cursor"]) == (served["per_page"], served["prev_cursor"]) == (10, None)
    assert bare["next_cursor"] is not None and served["next_cursor"] is not None
    rest = httpx.get(floor + tenant.url("/drivers"), params={"per_page": 10, "cursor": bare["next_cursor"]},
                     headers=tenant.headers, timeout=30).json()  # fmt: skip
    after = client.get(tenant.url("/drivers"), params={"per_page": 10, "cursor": served["next_cursor"]}, headers=tenant.headers)
    assert rest["data"] == after.json()["data"] and len(rest["data"]) == 2
    assert httpx.get(floor + tenant.url("/drivers"), headers={"Authorization": "Bearer nope"}, timeout=30).status_code == 404
