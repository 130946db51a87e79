"""Helpers of the webhook delivery tests: the delivery log through the API, processes, a background writer."""

from __future__ import annotations

import threading

import httpx
import psutil

import models
from jobs.runtime.embedded_redis import EmbeddedRedis
from models.webhooks import Delivery, Webhook
from toolkit.serving import wait_until
from toolkit.tenants import items

__all__ = [
    "EmbeddedRedis",
    "Writer",
    "add_driver",
    "children",
    "deliveries",
    "delivery_uuids",
    "descendants",
    "running",
    "settled",
]


def deliveries(client, tenant, hook, **params) -> list[dict]:
    """Return the first page of a webhook's delivery log (newest first), through the API."""
    response = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers, params=params)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def settled(client, tenant, hook, count: int = 1, timeout: float = 60.0) -> list[dict]:
    """Wait until the webhook's log holds `count` deliveries that are no longer pending; return the log.

    The default is roomy for a busy machine (retries and rescues included): it costs nothing when they settle.
    """

    def done():
        log = deliveries(client, tenant, hook)
        return log if len(log) >= count and all(d["data"]["status"] not in ("pending", "failing") for d in log) else None

    log = wait_until(done, timeout=timeout, interval=0.1)
    assert log, deliveries(client, tenant, hook)
    return log


def add_driver(client, tenant, **data) -> dict:
    """Create one driver through the API and return it."""
    response = client.post(tenant.url("/drivers"), json=items("driver", data), headers=tenant.headers)
    assert response.status_code == 201, response.text
    return response.json()["data"][0]


def descendants(pid: int) -> set[int]:
    """Return the pids of every process below pid (children, grandchildren...); none once pid is gone."""
    try:
        return {child.pid for child in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def running(pid: int) -> bool:
    """Tell whether a process exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def children(pid: int) -> list[int]:
    """Return the pids of a process's children (whichever of its threads started them); none once pid is gone."""
    try:
        return [child.pid for child in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


def delivery_uuids(webhook_uuid: str) -> set[str]:
    """Return the uuids of every delivery of a webhook, from the database the tests share."""
    with models.db.connection_context():
        query = Delivery.select(Delivery.uuid).join(Webhook).where(Webhook.uuid == webhook_uuid)
        return {str(value) for (value,) in query.tuples()}


class Writer(threading.Thread):
    """Creates drivers through the API from a thread, `per_request` per POST every `pace` s, until stop()."""

    def __init__(self, api_url: str, tenant, per_request: int = 5, pace: float = 0.1):
        super().__init__(name="writer", daemon=True)
        self.api_url, self.tenant, self.per_request, self.pace = api_url, tenant, per_request, pace
        self.created: list[str] = []  # driver uuids
        self.failures: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.api_url, headers=self.tenant.headers, timeout=30) as http:
            while not self.done.is_set():
                body = {"data": [{"object": "driver", "data": {}} for _ in range(self.per_request)]}
                try:
                    response = http.post(self.tenant.url("/drivers"), json=body)
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                    self.done.wait(self.pace)
                    continue
                if response.status_code == 201:
                    self.created += [driver["uuid"] for driver in response.json()["data"]]
                else:
                    self.failures.append(f"{response.status_code} {response.text[:200]}")
                self.done.wait(self.pace)

    def stop(self) -> None:
        """Stop writing and wait for the request in hand."""
        self.done.set()
        self.join(60)
