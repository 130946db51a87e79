"""Helpers the test modules share (not a test module): ports, servers, tenants, request bodies, waiting."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import httpx
import uvicorn

import models

# Agencies make_tenant created since the last call of forget_agencies(): conftest settles what they left pending.
CREATED_AGENCIES: list[int] = []


def free_port() -> int:
    """Return a free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05):
    """Poll predicate until it returns something truthy; return that, or the last falsy value at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def answers(api_url: str) -> bool:
    """Tell whether the API at api_url (ending in /api/v1) answers its liveness probe."""
    try:
        return httpx.get(api_url + "/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def reset_database(url: str) -> None:
    """Drop and recreate every table, so a run starts from nothing."""
    models.bind(url)
    with models.db.connection_context():
        models.db.drop_tables(models.all_models(), safe=True, cascade=not url.startswith("sqlite"))
    models.upgrade()


class ServerThread:
    """A uvicorn server running an app in a background thread."""

    def __init__(self, app, port: int):
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self):
        self.thread.start()
        if not wait_until(lambda: self.server.started or not self.thread.is_alive(), timeout=15, interval=0.02):
            raise RuntimeError("server did not start")
        if not self.server.started:
            raise RuntimeError("server exited before it started")
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


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
    CREATED_AGENCIES.append(agency.id)
    return Tenant(agency=agency, token=token, risk=str(risk.uuid), risk_type=risk_type)


def settle_pending(agency_ids) -> int:
    """Mark the pending deliveries of these agencies' webhooks failed, so no later worker or relay picks them up."""
    from models.webhooks import FAILED, PENDING, Delivery, Webhook

    ids = list(agency_ids)
    if not ids:
        return 0
    with models.live_connection():  # a pooled connection a test cut is replaced, not used
        theirs = Webhook.select(Webhook.id).where(Webhook.agency.in_(ids))
        return (
            Delivery.update(status=FAILED, next_attempt=None)
            .where((Delivery.status == PENDING) & Delivery.webhook.in_(theirs))
            .execute()
        )


def items(kind: str, *datas, **extra) -> dict:
    """Build a bulk create body."""
    return {"data": [{"object": kind, "data": data, **extra} for data in datas]}


def webhook_items(*datas) -> dict:
    """Build a webhook create body."""
    return {"data": [{"object": "webhook", "data": data} for data in datas]}


def make_webhook(client, tenant, url="https://hooks.example.com/in", events=("driver.created",), type_="custom", **extra) -> dict:
    """Create one webhook through the API and return it."""
    body = webhook_items({"type": type_, "url": url, "events": list(events), **extra})
    response = client.post("/webhooks", json=body, headers=tenant.headers)
    assert response.status_code == 201, response.text
    return response.json()["data"][0]
