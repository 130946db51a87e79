"""Helpers of the webhook delivery tests: a Redis to use, worker processes, the delivery log, processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil
import redis

import models
from jobs.embedded_redis import EmbeddedRedis
from riskapi.process.serve import stop_process_group
from tests.support import items, wait_until

ROOT = Path(__file__).resolve().parent.parent


def shared_redis_url() -> str | None:
    """Return the Redis the tests may use without starting one: RISKAPI_TEST_REDIS_URL, REDIS_URL, or one on 6379.

    Tests only add queues of their own (random names) and remove them afterwards.
    """
    configured = os.environ.get("RISKAPI_TEST_REDIS_URL") or os.environ.get("REDIS_URL")
    if configured:
        return configured
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5):
            pass
        client = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=1)
        client.ping()
        client.close()
        return "redis://127.0.0.1:6379/0"
    except (OSError, redis.RedisError):
        return None


def delete_queue(url: str, name: str) -> None:
    """Remove a test queue, its registries and its jobs from Redis (best effort)."""
    from rq import Queue

    try:
        connection = redis.Redis.from_url(url, socket_timeout=2)
        job_ids = set()
        for queue in (Queue(name, connection=connection), Queue(f"{name}:retry", connection=connection)):  # jobs.queue.retries
            registries = [
                queue.scheduled_job_registry,
                queue.started_job_registry,
                queue.failed_job_registry,
                queue.finished_job_registry,
                queue.deferred_job_registry,
                queue.canceled_job_registry,
            ]
            job_ids.update(queue.get_job_ids())
            for registry in registries:
                job_ids.update(registry.get_job_ids(cleanup=False))
        keys = [f"rq:job:{job_id}" for job_id in job_ids] + [f"rq:results:{job_id}" for job_id in job_ids]
        keys += list(connection.scan_iter(match=f"rq:*:{name}"))
        keys += list(connection.scan_iter(match=f"rq:*:{name}:*"))
        if keys:
            connection.delete(*keys)
        connection.srem("rq:queues", f"rq:queue:{name}", f"rq:queue:{name}:retry")
        connection.close()
    except redis.RedisError:
        pass


class WorkerProcess:
    """`riskapi worker` in a child process (its own session, so RQ's scheduler goes down with it)."""

    def __init__(self, database_url: str, redis_url: str, queue: str, **settings):
        self.queue = queue
        self.redis_url = redis_url
        self.log = Path(tempfile.mkstemp(prefix="riskapi-worker-", suffix=".log")[1])
        self.env = dict(os.environ)
        self.env.update(
            {
                "DATABASE_URL": database_url,
                "REDIS_URL": redis_url,
                "RISKAPI_WEBHOOK_QUEUE": queue,
                "RISKAPI_WEBHOOK_ALLOW_PRIVATE": "1",
                "RISKAPI_WEBHOOK_TIMEOUT": "3",
                "RISKAPI_WEBHOOK_RETRY_DELAYS": "1,2,3",
                "RISKAPI_WEBHOOK_STALE_AFTER": "3",
                "RISKAPI_WEBHOOK_RELAY_INTERVAL": "0.02",
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
            }
        )
        self.env.update({f"RISKAPI_WEBHOOK_{key.upper()}": str(value) for key, value in settings.items()})
        self.process: subprocess.Popen | None = None

    def start(self) -> WorkerProcess:
        """Start the worker and wait until RQ lists it."""
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "riskapi", "worker"],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        connection = redis.Redis.from_url(self.redis_url, socket_timeout=2)
        try:
            started = wait_until(lambda: self._listening(connection), timeout=15, interval=0.05)
        finally:
            connection.close()
        if not started:
            self.stop()
            raise RuntimeError("worker did not start:\n" + self.output())
        return self

    def _listening(self, connection) -> bool:
        from rq import Worker

        if self.process.poll() is not None:
            raise RuntimeError("worker exited:\n" + self.output())
        try:
            return any(w.pid == self.process.pid for w in Worker.all(connection=connection))
        except redis.RedisError:
            return False

    def output(self) -> str:
        """Return what the worker logged."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL the worker and its scheduler: no chance to finish anything."""
        if self.process is not None:
            os.killpg(self.process.pid, 9)
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        """Stop the worker as `riskapi serve` does (once), and remove its log."""
        if self.process is not None:
            stop_process_group(self.process, grace=10)
            self.process = None
        self.log.unlink(missing_ok=True)

    def alive(self) -> bool:
        """Tell whether the worker process still runs."""
        return self.process is not None and self.process.poll() is None


def new_queue_name() -> str:
    """Return a queue name no other test run uses."""
    return f"riskapi-test-{uuid.uuid4().hex[:12]}"


def deliveries(client, tenant, hook, **params) -> list[dict]:
    """Return the first page of a webhook's delivery log (newest first), through the API."""
    response = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers, params=params)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def settled(client, tenant, hook, count: int = 1, timeout: float = 20.0) -> list[dict]:
    """Wait until the webhook's log holds `count` deliveries that are no longer pending; return the log."""

    def done():
        log = deliveries(client, tenant, hook)
        return log if len(log) >= count and all(d["data"]["status"] != "pending" for d in log) else None

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
    from models.webhooks import Delivery, Webhook

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
        self.slowest = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        import httpx

        with httpx.Client(base_url=self.api_url, headers=self.tenant.headers, timeout=30) as http:
            while not self.done.is_set():
                body = {"data": [{"object": "driver", "data": {}} for _ in range(self.per_request)]}
                started = time.monotonic()
                try:
                    response = http.post(self.tenant.url("/drivers"), json=body)
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                    self.done.wait(self.pace)
                    continue
                self.slowest = max(self.slowest, time.monotonic() - started)
                if response.status_code == 201:
                    self.created += [driver["uuid"] for driver in response.json()["data"]]
                else:
                    self.failures.append(f"{response.status_code} {response.text[:200]}")
                self.done.wait(self.pace)

    def stop(self) -> None:
        """Stop writing and wait for the request in hand."""
        self.done.set()
        self.join(60)


__all__ = [
    "EmbeddedRedis",
    "WorkerProcess",
    "Writer",
    "add_driver",
    "children",
    "delete_queue",
    "deliveries",
    "delivery_uuids",
    "descendants",
    "new_queue_name",
    "running",
    "settled",
    "shared_redis_url",
    "wait_until",
]
