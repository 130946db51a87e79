"""Redis for the delivery pipeline, queues of a run's own, and `riskapi worker` in a child process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import redis
from rq import Queue, Worker

from riskapi.serve import stop_process_group
from toolkit import ROOT
from toolkit.serving import wait_until

# Short retries, rescues and polling, so tests see them within seconds. A caller measuring the worker as
# deployed overrides each of them (bench/deliveries.py passes the defaults). The attempt's deadline is
# roomy, though: a busy machine may take seconds over an exchange that must succeed (a test of the
# deadline itself passes its own).
QUICK = {"timeout": "10", "retry_delays": "1,2,3", "stale_after": "3", "relay_interval": "0.02"}


def shared_redis_url() -> str | None:
    """Return a Redis to use without starting one: RISKAPI_TEST_REDIS_URL, REDIS_URL, or one on 6379.

    Callers only add queues of their own (random names) and remove them afterwards.
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


def new_queue_name() -> str:
    """Return a queue name no other run uses."""
    return f"riskapi-test-{uuid.uuid4().hex[:12]}"


def delete_queue(url: str, name: str) -> None:
    """Remove a queue of our own, its registries and its jobs from Redis (best effort)."""
    try:
        connection = redis.Redis.from_url(url, socket_timeout=2)
        job_ids = set()
        # The queue, its bulk lane (jobs.queue.bulk) and its retries (jobs.queue.retries).
        for queue in (
            Queue(name, connection=connection),
            Queue(f"{name}:bulk", connection=connection),
            Queue(f"{name}:retry", connection=connection),
        ):
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
        connection.srem("rq:queues", f"rq:queue:{name}", f"rq:queue:{name}:bulk", f"rq:queue:{name}:retry")
        connection.close()
    except redis.RedisError:
        pass


class WorkerProcess:
    """`riskapi worker` in a child process (its own session, so RQ's scheduler goes down with it).

    Keyword settings become RISKAPI_WEBHOOK_<NAME> variables, over QUICK's; private hosts (the local receiver) are allowed.
    """

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
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
            }
        )
        self.env.update({f"RISKAPI_WEBHOOK_{key.upper()}": str(value) for key, value in {**QUICK, **settings}.items()})
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
