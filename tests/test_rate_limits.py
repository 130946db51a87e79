"""Per-token rate limits shared through Redis by two API processes, answered as Laravel's throttle does."""

import httpx
import pytest

import models
from models.tenancy import Token
from tests.support import make_tenant
from toolkit.serving import free_port


@pytest.fixture
def api_processes(start_api, redis_url):
    """Start API processes on the test database and Redis, with a limit of 10 units a minute."""

    def start(redis=redis_url, limit="10"):
        return start_api(REDIS_URL=redis, RISKAPI_RATE_LIMIT=limit)

    return start


def test_two_processes_share_one_limit_per_token(api_processes):
    one, two = api_processes(), api_processes()
    tenant, other = make_tenant(), make_tenant()
    seen = []
    for i in range(10):
        response = httpx.get((one, two)[i % 2] + "/webhooks", headers=tenant.headers)
        assert response.status_code == 200
        assert response.headers["X-RateLimit-Limit"] == "10"
        seen.append(int(response.headers["X-RateLimit-Remaining"]))
    assert seen == list(range(9, -1, -1))
    refused = httpx.get(one + "/webhooks", headers=tenant.headers)
    assert refused.status_code == 429
    assert refused.json() == {"message": "Too many requests.", "status": 429}
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.headers["X-RateLimit-Remaining"] == "0" and int(refused.headers["X-RateLimit-Reset"]) > 0
    assert httpx.get(two + "/webhooks", headers=tenant.headers).status_code == 429
    # Another token has its own budget; errors carry the headers too; probes are never counted.
    missing = httpx.get(two + "/risks/none/data/drivers", headers=other.headers)
    assert missing.status_code == 404 and missing.headers["X-RateLimit-Remaining"] == "9"
    assert all(httpx.get(one + "/healthz").status_code == 200 for _ in range(12))


def test_a_large_body_weighs_more(api_processes):
    url = api_processes()
    tenant = make_tenant()
    drivers = [{"object": "driver", "data": {"notes": "x" * 9000}} for _ in range(20)]  # ~180 KB: 1 + 3 units
    response = httpx.post(url + tenant.url("/drivers"), json={"data": drivers}, headers=tenant.headers, timeout=30)
    assert response.status_code == 201, response.text
    assert response.headers["X-RateLimit-Remaining"] == "6"


def test_requests_pass_unlimited_while_redis_does_not_answer(api_processes):
    url = api_processes(redis=f"redis://127.0.0.1:{free_port()}/0")
    tenant = make_tenant()
    for _ in range(12):
        response = httpx.get(url + "/webhooks", headers=tenant.headers)
        assert response.status_code == 200 and "X-RateLimit-Remaining" not in response.headers


def test_a_write_refused_429_does_not_spend_its_idempotency_key(api_processes):
    url = api_processes(limit="6")  # a small write weighs 2 units (1, and 1 per started 64 KiB)
    tenant = make_tenant()
    with models.db.connection_context():
        second = Token.issue(tenant.agency)  # the same agency's other token: a budget of its own, the same keys
    body = {"data": [{"object": "driver", "data": {"first_name": "Ada"}}]}
    keyed = {**tenant.headers, "Idempotency-Key": "refused-then-run"}
    for _ in range(6):
        assert httpx.get(url + "/webhooks", headers=tenant.headers).status_code == 200
    refused = httpx.post(url + tenant.url("/drivers"), json=body, headers=keyed)
    assert refused.status_code == 429
    # Nothing ran under the key: the same request, from a token with budget left, runs (not 409, not a replay).
    ran = httpx.post(url + tenant.url("/drivers"), json=body, headers={**keyed, "Authorization": f"Bearer {second}"})
    assert ran.status_code == 201, ran.text
    assert "Idempotent-Replayed" not in ran.headers
    again = httpx.post(url + tenant.url("/drivers"), json=body, headers={**keyed, "Authorization": f"Bearer {second}"})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == ran.json()
