"""Fixtures: the real app served by uvicorn on a free port, and fresh tenants per test."""

import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass

import httpx
import pytest
import uvicorn

import models
from riskapi.config import Settings

if not os.environ.get("DATABASE_URL"):
    os.environ["DATABASE_URL"] = "sqlite:///" + os.path.join(tempfile.mkdtemp(prefix="riskapi-test-"), "test.db")
os.environ.setdefault("RISKAPI_VALIDATE_RESPONSES", "1")
# No request lines on the test run's stderr; tests/test_logs.py reads them through caplog.
os.environ.setdefault("RISKAPI_ACCESS_LOG", "0")
# No rate limit on the shared test app (tests/test_ratelimit.py starts API processes with one).
os.environ.setdefault("RISKAPI_RATE_LIMIT", "0")


def free_port() -> int:
    """Return a free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def reset_database(url: str) -> None:
    """Drop and recreate every table, so a run starts from nothing."""
    models.bind(url)
    with models.db.connection_context():
        models.db.drop_tables(models.all_models(), safe=True, cascade=not url.startswith("sqlite"))
    models.upgrade()


class ServerThread:
    """A uvicorn server running an app in a background thread."""

    def __init__(self, app, port: int):
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="session")
def settings() -> Settings:
    """Settings of the test run, from the environment."""
    return Settings.from_env()


@pytest.fixture(scope="session")
def server(settings):
    """The real app, served over HTTP."""
    from riskapi.app import create_app

    reset_database(settings.database_url)
    app = create_app(settings)
    with ServerThread(app, free_port()) as running:
        yield running


@pytest.fixture
def client(server):
    """An HTTP client of the running app."""
    with httpx.Client(base_url=server.url + "/api/v1", timeout=30) as http:
        yield http


@dataclass
class Tenant:
    """An agency with a token and a risk profile."""

    agency: object
    token: str
    risk: str
    risk_type: str

    @property
    def headers(self) -> dict:
        """Authorization headers of the tenant."""
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}

    def url(self, suffix: str = "") -> str:
        """Return a path under this tenant's risk profile."""
        return f"/risks/{self.risk}/data{suffix}"


def make_tenant(risk_type: str = "commercial", webhook_limit: int = 10) -> Tenant:
    """Create an agency, a token and a risk profile directly in the database."""
    from models.tenancy import Agency, Risk, Token

    with models.db.connection_context():
        agency = Agency.create(name="Agency", webhook_limit=webhook_limit)
        token = Token.issue(agency)
        risk = Risk.create(agency=agency, type=risk_type, name="Risk")
    return Tenant(agency=agency, token=token, risk=str(risk.uuid), risk_type=risk_type)


@pytest.fixture
def tenant(server) -> Tenant:
    """A fresh agency with a commercial risk profile."""
    return make_tenant()


@pytest.fixture
def other_tenant(server) -> Tenant:
    """A second, unrelated agency."""
    return make_tenant("personal")


def items(kind: str, *datas, **extra) -> dict:
    """Build a bulk create body."""
    return {"data": [{"object": kind, "data": data, **extra} for data in datas]}


# ---- webhooks (issue 3) ---------------------------------------------------------------------------
# Tests and development deliver to https://localhost: the API must accept it as a webhook host.
os.environ.setdefault("RISKAPI_WEBHOOK_ALLOW_PRIVATE", "1")


def webhook_items(*datas) -> dict:
    """Build a webhook create body."""
    return {"data": [{"object": "webhook", "data": data} for data in datas]}


def make_webhook(
    client, tenant, url="https://hooks.example.com/in", events=("driver.created",), type_="custom", **extra
) -> dict:
    """Create one webhook through the API and return it."""
    body = webhook_items({"type": type_, "url": url, "events": list(events), **extra})
    response = client.post("/webhooks", json=body, headers=tenant.headers)
    assert response.status_code == 201, response.text
    return response.json()["data"][0]


@pytest.fixture(scope="session")
def redis_url():
    """A real Redis: RISKAPI_TEST_REDIS_URL or REDIS_URL, the one on 127.0.0.1:6379, or an embedded one started here."""
    from tests.webhook_support import EmbeddedRedis, shared_redis_url

    url = shared_redis_url()
    if url:
        yield url
        return
    with EmbeddedRedis() as embedded:
        yield embedded.url


@pytest.fixture
def receiver():
    """A real HTTPS webhook receiver on localhost with a test CA."""
    from tests.receiver import Receiver

    with Receiver() as rx:
        yield rx


@pytest.fixture
def start_worker(server, settings, redis_url, receiver):
    """Start `riskapi worker` processes (own queue, short delays, the receiver CA trusted); stopped after the test."""
    from tests.webhook_support import WorkerProcess, delete_queue, drain_pending, new_queue_name

    drain_pending()
    started = []
    queue = new_queue_name()

    def start(**overrides):
        overrides.setdefault("ca_bundle", receiver.ca_path)
        worker = WorkerProcess(settings.database_url, overrides.pop("redis_url", redis_url), queue, **overrides)
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.stop()
    for url in {worker.redis_url for worker in started}:
        delete_queue(url, queue)


@pytest.fixture
def start_api(server, settings):
    """Start API processes (`uvicorn riskapi.app:asgi --factory`) on the test database; return their base URL."""
    import subprocess
    import sys

    from tests.webhook_support import wait_until

    started = []

    def start(**env_overrides) -> str:
        port = free_port()
        env = dict(os.environ, DATABASE_URL=settings.database_url, **env_overrides)
        command = [sys.executable, "-m", "uvicorn", "riskapi.app:asgi", "--factory", "--port", str(port), "--log-level=warning"]
        started.append(subprocess.Popen(command, env=env))
        url = f"http://127.0.0.1:{port}/api/v1"

        def up():
            try:
                return httpx.get(url + "/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        assert wait_until(up, timeout=30)
        return url

    yield start
    for process in started:
        process.terminate()
        process.wait(10)
