"""Fixtures: the real app served by uvicorn on a free port, its database, fresh tenants, Redis, workers and a receiver."""

import os
import tempfile

import httpx
import pytest

import models
from foundation.config import Settings
from jobs.runtime.embedded_redis import EmbeddedRedis
from tests.support import CREATED_AGENCIES, make_tenant, settle_pending
from toolkit.receiver import Receiver
from toolkit.serving import ServerThread, answers, free_port, wait_until
from toolkit.tenants import Tenant, reset_database
from toolkit.workers import WorkerProcess, delete_queue, new_queue_name, shared_redis_url

if not os.environ.get("DATABASE_URL"):
    os.environ["DATABASE_URL"] = "sqlite:///" + os.path.join(tempfile.mkdtemp(prefix="riskapi-test-"), "test.db")
os.environ.setdefault("RISKAPI_VALIDATE_RESPONSES", "1")
# No request lines on the test run's stderr; tests/test_logs.py reads them through caplog.
os.environ.setdefault("RISKAPI_ACCESS_LOG", "0")
# No rate limit on the shared test app (tests/test_ratelimit.py starts API processes with one).
os.environ.setdefault("RISKAPI_RATE_LIMIT", "0")
# Tests and development deliver to https://localhost: the API must accept it as a webhook host.
os.environ.setdefault("RISKAPI_WEBHOOK_ALLOW_PRIVATE", "1")


@pytest.fixture(scope="session")
def settings() -> Settings:
    """Settings of the test run, from the environment."""
    return Settings.from_env()


@pytest.fixture(scope="session")
def database(settings) -> str:
    """The test database, emptied once per run and bound to the models; return its URL."""
    reset_database(settings.database_url)
    return settings.database_url


@pytest.fixture
def connection(database):
    """A database connection held for the test (for tests that call the domain modules directly)."""
    with models.db.connection_context():
        yield models.db


@pytest.fixture(scope="session")
def server(settings, database):
    """The real app, served over HTTP."""
    from api.app import create_app

    app = create_app(settings)
    with ServerThread(app, free_port()) as running:
        yield running


@pytest.fixture(autouse=True)
def settle_what_the_test_left_pending():
    """After each test, settle the deliveries its agencies left pending: no later test's relay or worker sees them."""
    yield
    created = list(CREATED_AGENCIES)
    CREATED_AGENCIES.clear()
    settle_pending(created)


@pytest.fixture
def client(server):
    """An HTTP client of the running app."""
    with httpx.Client(base_url=server.url + "/api/v1", timeout=30) as http:
        yield http


@pytest.fixture
def tenant(server) -> Tenant:
    """A fresh agency with a commercial risk profile."""
    return make_tenant()


@pytest.fixture
def other_tenant(server) -> Tenant:
    """A second, unrelated agency."""
    return make_tenant("personal")


@pytest.fixture
def db_tenant(database) -> Tenant:
    """A fresh agency with a commercial risk profile, for tests that need the database but not the served app."""
    return make_tenant()


@pytest.fixture
def profile(db_tenant, connection):
    """The risk profile row of db_tenant (a connection held), for tests of the domain modules."""
    from models.tenancy import Risk

    return Risk.get(Risk.uuid == db_tenant.risk)


@pytest.fixture(scope="session")
def redis_url():
    """A real Redis: RISKAPI_TEST_REDIS_URL or REDIS_URL, the one on 127.0.0.1:6379, or an embedded one started here."""
    url = shared_redis_url()
    if url:
        yield url
        return
    with EmbeddedRedis() as embedded:
        yield embedded.url


@pytest.fixture
def queue_name(redis_url):
    """A Redis queue name of this test alone; the queue, its registries and its jobs are removed afterwards."""
    name = new_queue_name()
    yield name
    delete_queue(redis_url, name)


@pytest.fixture
def receiver():
    """A real HTTPS webhook receiver on localhost with a test CA (one connection per request: the
    timing-sensitive end-to-end tests were written for it; kept connections are tested in test_transport
    and test_connections, and under load in bench.soak)."""
    with Receiver() as rx:
        yield rx


@pytest.fixture
def start_worker(server, settings, redis_url, receiver, queue_name):
    """Start `riskapi worker` processes (own queue, short delays, the receiver CA trusted); stopped after the test."""
    started = []

    def start(**overrides):
        overrides.setdefault("ca_bundle", receiver.ca_path)
        worker = WorkerProcess(settings.database_url, overrides.pop("redis_url", redis_url), queue_name, **overrides)
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.stop()
    for url in {worker.redis_url for worker in started} - {redis_url}:
        delete_queue(url, queue_name)


@pytest.fixture
def start_api(server, settings):
    """Start API processes (`uvicorn api.app:asgi --factory`) on the test database; return their base URL."""
    import subprocess
    import sys

    started = []

    def start(**env_overrides) -> str:
        port = free_port()
        env = {**os.environ, "DATABASE_URL": settings.database_url, **env_overrides}
        command = [sys.executable, "-m", "uvicorn", "api.app:asgi", "--factory"]
        command += ["--port", str(port), "--log-level=warning"]
        started.append(subprocess.Popen(command, env=env))
        url = f"http://127.0.0.1:{port}/api/v1"
        assert wait_until(lambda: answers(url), timeout=30)
        return url

    yield start
    for process in started:
        process.terminate()
        process.wait(10)
