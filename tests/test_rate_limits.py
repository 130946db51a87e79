"""Per-token rate limits shared through Redis by two API processes, answered as Laravel's throttle does."""

import time
import types

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
        response = httpx.get((one, two)[i % 2] + "/webhooks", headers=tenant.headers, timeout=30)
        assert response.status_code == 200
        assert response.headers["X-RateLimit-Limit"] == "10"
        seen.append(int(response.headers["X-RateLimit-Remaining"]))
    assert seen == list(range(9, -1, -1))
    refused = httpx.get(one + "/webhooks", headers=tenant.headers, timeout=30)
    assert refused.status_code == 429
    assert refused.json() == {"message": "Too many requests.", "status": 429}
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.headers["X-RateLimit-Remaining"] == "0" and int(refused.headers["X-RateLimit-Reset"]) > 0
    assert httpx.get(two + "/webhooks", headers=tenant.headers, timeout=30).status_code == 429
    # Another token has its own budget; errors carry the headers too; probes are never counted.
    missing = httpx.get(two + "/risks/none/data/drivers", headers=other.headers, timeout=30)
    assert missing.status_code == 404 and missing.headers["X-RateLimit-Remaining"] == "9"
    assert all(httpx.get(one + "/healthz", timeout=30).status_code == 200 for _ in range(12))


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
        response = httpx.get(url + "/webhooks", headers=tenant.headers, timeout=30)
        assert response.status_code == 200 and "X-RateLimit-Remaining" not in response.headers


def test_a_write_refused_429_does_not_spend_its_idempotency_key(api_processes):
    url = api_processes(limit="6")  # a small write weighs 2 units (1, and 1 per started 64 KiB)
    tenant = make_tenant()
    with models.db.connection_context():
        second = Token.issue(tenant.agency)  # the same agency's other token: a budget of its own, the same keys
    body = {"data": [{"object": "driver", "data": {"first_name": "Ada"}}]}
    keyed = {**tenant.headers, "Idempotency-Key": "refused-then-run"}
    for _ in range(6):
        assert httpx.get(url + "/webhooks", headers=tenant.headers, timeout=30).status_code == 200
    refused = httpx.post(url + tenant.url("/drivers"), json=body, headers=keyed, timeout=30)
    assert refused.status_code == 429
    # Nothing ran under the key: the same request, from a token with budget left, runs (not 409, not a replay).
    ran = httpx.post(url + tenant.url("/drivers"), json=body, headers={**keyed, "Authorization": f"Bearer {second}"}, timeout=30)
    assert ran.status_code == 201, ran.text
    assert "Idempotent-Replayed" not in ran.headers
    again = httpx.post(
        url + tenant.url("/drivers"), json=body, headers={**keyed, "Authorization": f"Bearer {second}"}, timeout=30
    )
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == ran.json()


class _Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _process(redis_url: str, limit: int, clock: _Clock, monkeypatch) -> tuple:
    """Return (a RateLimitMiddleware of one API process, the list of units it leased from Redis, one per round trip)."""
    from api import rate_limits

    # The module's own clock, not time.monotonic itself: asyncio's loop reads that one for the client's timeouts.
    monkeypatch.setattr(rate_limits, "time", types.SimpleNamespace(monotonic=clock, time=time.time))
    middleware = rate_limits.RateLimitMiddleware(None, redis_url, limit)
    leased = []
    lease = middleware._lease

    async def counted(authorization, units):
        leased.append(units)
        return await lease(authorization, units)

    middleware._lease = counted
    return middleware, leased


def test_a_busy_token_leases_units_in_batches_and_never_passes_its_limit(redis_url, monkeypatch):
    import asyncio
    import uuid

    clock = _Clock()
    one, leased_one = _process(redis_url, 100, clock, monkeypatch)  # leases of at most 100 // 25 = 4 units
    two, leased_two = _process(redis_url, 100, clock, monkeypatch)
    token = f"Bearer {uuid.uuid4()}".encode()

    async def scenario():
        first_second = [await process._spend(token, 1) for _ in range(10) for process in (one, two)]
        clock.now += 1  # the token spent 10 units in each process in the last second: from now on they lease
        answers = []
        while not answers or answers[-1][1] is None:
            for process in (one, two):
                answers.append(await process._spend(token, 1))
        return first_second, answers

    first_second, answers = asyncio.run(scenario())
    # A new token is counted in Redis request by request, exactly.
    assert leased_one[:10] == leased_two[:10] == [1] * 10
    assert [left for left, _ in first_second] == list(range(99, 79, -1))
    # A busy one takes a round trip for several requests (1 + 4 more), and is never let past the limit.
    assert leased_one[10] == leased_two[10] == 5 and len(leased_one) + len(leased_two) - 20 < len(answers) / 2
    passed = sum(1 for _, refused in answers if refused is None)
    assert 100 - 4 <= 20 + passed <= 100  # short of it by at most the other process's unspent lease
    refusals = [answer for answer in answers if answer[1] is not None]
    assert refusals and all(left == 0 and 1 <= retry <= 60 for left, retry in refusals)
    # Each process's X-RateLimit-Remaining only goes down.
    for process in range(2):
        left = [remaining for remaining, refused in answers[process::2] if refused is None]
        assert left == sorted(left, reverse=True)


def test_a_lease_ends_with_its_window(redis_url, monkeypatch):
    import asyncio
    import uuid

    import redis as redis_client

    clock = _Clock()
    one, leased = _process(redis_url, 100, clock, monkeypatch)
    token = f"Bearer {uuid.uuid4()}".encode()

    async def scenario():
        for _ in range(3):
            await one._spend(token, 1)
        clock.now += 1
        await one._spend(token, 1)  # leases 1 + 2 (3 spent in the last second)
        redis_client.Redis.from_url(redis_url).delete("riskapi:rate:" + __import__("hashlib").sha256(token).hexdigest()[:32])
        clock.now += 61  # past the window: the two unspent units are not spent in the next one
        return await one._spend(token, 1)

    assert asyncio.run(scenario()) == (99, None)
    assert leased == [1, 1, 1, 3, 1]


def test_a_silent_redis_is_asked_again_once_in_a_while_not_by_every_request(redis_url, monkeypatch):
    """A Redis cut off by the network hangs each call for its timeout: once known away, requests do not wait on it."""
    import asyncio

    import redis.asyncio

    from api import rate_limits
    from toolkit.serving import wait_until
    from toolkit.silent import SilentServer

    clock = _Clock()
    token = b"Bearer silent-redis"
    with SilentServer() as silent:
        middleware, leased = _process(silent.url, 100, clock, monkeypatch)

        async def scenario():
            answers = [await middleware._spend(token, 1) for _ in range(20)]
            clock.now += rate_limits.AWAY / 2
            answers += [await middleware._spend(token, 1) for _ in range(20)]
            clock.now += rate_limits.AWAY  # one request asks again, finds it still silent
            answers += [await middleware._spend(token, 1) for _ in range(20)]
            return answers

        answers = asyncio.run(scenario())
        assert answers == [None] * 60  # every request let through uncounted
        assert len(leased) == 60  # each of them wanted a lease...
        assert wait_until(lambda: silent.accepted >= 2, timeout=10)
        assert silent.accepted == 2  # ...and Redis was asked twice: first, and once AWAY had passed

    # The link heals: once AWAY has passed, the first request that asks gets its count, and the limits are back.
    middleware.redis = redis.asyncio.Redis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)

    async def healed():
        still_away = await middleware._spend(token, 1)
        clock.now += rate_limits.AWAY
        return still_away, [await middleware._spend(token, 1) for _ in range(3)]

    still_away, counted = asyncio.run(healed())
    assert still_away is None and [left for left, _ in counted] == [99, 98, 97]
