"""Faults of the delivery machinery itself: Redis stopped under load, a worker or its scheduler killed, database connections cut.

Every Redis stopped here is one the test started on a port of its own: the shared one is never touched.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import httpx
import peewee
import psutil
import pytest
import redis

import models
from foundation.signing import verify
from jobs import claims
from jobs.relay import Relay
from riskapi.serve import stop_process_group
from tests.support import make_webhook
from tests.webhook_support import EmbeddedRedis, Writer, children, delivery_uuids
from toolkit import ROOT
from toolkit.serving import free_port, wait_until
from toolkit.tenants import items
from toolkit.workers import WorkerProcess, delete_queue, new_queue_name

pytestmark = pytest.mark.faults


def received(receiver) -> dict[str, list]:
    """Map each delivery id the receiver saw to its requests."""
    seen: dict[str, list] = {}
    for request in receiver.requests:
        seen.setdefault(request.headers["service-delivery"], []).append(request)
    return seen


def assert_signed(receiver, secret: str) -> None:
    for request in receiver.requests:
        assert verify(secret, request.body, request.headers["service-signature"]), request.headers


def all_succeeded(hook_uuid: str) -> bool:
    from models.webhooks import SUCCEEDED, Delivery, Webhook

    with models.db.connection_context():
        query = Delivery.select().join(Webhook).where((Webhook.uuid == hook_uuid) & (Delivery.status != SUCCEEDED))
        return not query.exists()


def test_a_worker_rides_out_redis_stopped_under_load(server, client, tenant, settings, receiver):
    # This worker's Redis is ours (stopped below), so the worker is too, not start_worker's.
    own = EmbeddedRedis(port=free_port()).start()
    queue = new_queue_name()
    worker = WorkerProcess(settings.database_url, own.url, queue, ca_bundle=receiver.ca_path)
    try:
        worker.start()
        hook = make_webhook(client, tenant, url=receiver.url)
        writer = Writer(server.url + "/api/v1", tenant)
        writer.start()
        try:
            assert wait_until(lambda: len(receiver.requests) >= 20, timeout=60)  # deliveries are flowing
            own.stop()
            time.sleep(6)
            own.start()  # empty: every job it held is gone
            time.sleep(1)
            # A count, not a stretch of time: a busy machine writes fewer drivers a second.
            assert wait_until(lambda: len(writer.created) > 100, timeout=60)
        finally:
            writer.stop()
        # Every write answered 201 (the API has no Redis of this worker's to wait for; how fast it
        # answered is the machine's business).
        assert writer.failures == []

        expected = delivery_uuids(hook["uuid"])
        assert len(expected) == len(writer.created) > 100
        missing = lambda: expected - set(received(receiver))  # noqa: E731
        assert wait_until(lambda: not missing(), timeout=60, interval=0.2), (
            f"{len(missing())} of {len(expected)} never arrived\n{worker.output()}"
        )
        assert_signed(receiver, hook["meta"]["signing_secret"])
        bodies = {json.loads(r.body)["data"]["uuid"] for r in receiver.requests}
        assert set(writer.created) <= bodies
        assert wait_until(lambda: all_succeeded(hook["uuid"]), timeout=30)

        assert worker.alive()
        # RQ's scheduler is back at work: it holds its queue's lock in the restarted Redis.
        client_of_own = redis.Redis.from_url(own.url, socket_timeout=2)
        assert wait_until(lambda: client_of_own.exists(f"rq:scheduler-lock:{queue}"), timeout=30)
        client_of_own.close()
        output = worker.output()
        assert output.count("Redis unreachable") == 1, output
        assert output.count("Redis reachable again") == 1, output
        assert "Traceback" not in output, output
    finally:
        worker.stop()  # while its Redis still answers
        delete_queue(own.url, queue)
        own.close()


def test_a_killed_scheduler_is_started_again_within_seconds(start_worker):
    worker = start_worker()
    [first] = wait_until(lambda: children(worker.process.pid), timeout=30)  # RQ's forked scheduler
    os.kill(first, signal.SIGKILL)
    again = wait_until(lambda: [pid for pid in children(worker.process.pid) if pid != first], timeout=30)
    assert again, worker.output()
    assert wait_until(lambda: "RQ's scheduler (pid" in worker.output(), timeout=30), worker.output()
    assert worker.alive()


def _worker_child(serve_pid: int) -> int | None:
    for pid in children(serve_pid):
        try:
            command = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue
        if command[1:3] == ["-m", "riskapi"] and "worker" in command:  # python -m riskapi worker (riskapi.serve)
            return pid
    return None


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_serve_starts_a_killed_worker_again_and_every_delivery_arrives(tmp_path, receiver):
    own = EmbeddedRedis(port=free_port()).start()
    queue = new_queue_name()
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path}/serve.db",
        REDIS_URL=own.url,
        PYTHONPATH=str(ROOT),
        RISKAPI_WEBHOOK_QUEUE=queue,
        RISKAPI_WEBHOOK_ALLOW_PRIVATE="1",
        RISKAPI_WEBHOOK_CA_BUNDLE=receiver.ca_path,
        RISKAPI_WEBHOOK_TIMEOUT="3",
        RISKAPI_WEBHOOK_RETRY_DELAYS="1,2,3",
        RISKAPI_WEBHOOK_STALE_AFTER="3",
        RISKAPI_WEBHOOK_RELAY_INTERVAL="0.02",
    )

    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "riskapi", *args], env=env, cwd=ROOT, capture_output=True, check=True)
        return json.loads(out.stdout)

    agency = cli("agency", "create", "--name", "Supervised")
    token = cli("token", "create", "--agency", agency["uuid"])["token"]
    risk = cli("risk", "create", "--agency", agency["uuid"], "--type", "commercial")["uuid"]
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen(
            [sys.executable, "-m", "riskapi", "serve", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    created: list[str] = []
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as http:

            def up():
                try:
                    return http.get("/webhooks").status_code == 200
                except httpx.TransportError:
                    return False

            def write(count: int) -> None:
                for _ in range(count):
                    response = http.post(f"/risks/{risk}/data/drivers", json=items("driver", *[{} for _ in range(5)]))
                    assert response.status_code == 201, response.text
                    created.extend(driver["uuid"] for driver in response.json()["data"])

            assert wait_until(up, timeout=30), log.read_text()
            body = {
                "data": [{"object": "webhook", "data": {"type": "custom", "url": receiver.url, "events": ["driver.created"]}}]
            }
            hook = http.post("/webhooks", json=body).json()["data"][0]
            first = wait_until(lambda: _worker_child(serve.pid), timeout=30)
            assert first, log.read_text()
            write(3)
            assert receiver.wait_for(15, timeout=60)
            write(2)
            os.kill(first, signal.SIGKILL)  # some of those in flight
            write(2)

            def replaced():
                pid = _worker_child(serve.pid)
                return pid if pid not in (None, first) else None

            assert wait_until(replaced, timeout=60), log.read_text()
            assert not _zombie(first)  # reaped
            write(2)

            delivered = lambda: {json.loads(r.body)["data"]["uuid"] for r in receiver.requests}  # noqa: E731
            assert wait_until(lambda: set(created) <= delivered(), timeout=90, interval=0.2), (
                f"{len(set(created) - delivered())} of {len(created)} never arrived\n{log.read_text()}"
            )
            assert_signed(receiver, hook["meta"]["signing_secret"])
            log_page = http.get(f"/webhooks/{hook['uuid']}/deliveries", params={"per_page": 100}).json()
            assert {d["uuid"] for d in log_page["data"]} <= set(received(receiver))
        assert "delivery worker (pid" in log.read_text()
    finally:
        stop_process_group(serve, 30)
        delete_queue(own.url, queue)
        own.close()
    assert serve.returncode == 0, log.read_text()


def test_a_delivery_attempt_outlives_its_database_connection_being_cut(
    server, client, tenant, receiver, settings, redis_url, queue_name, monkeypatch
):
    # The engine of this process: the claim runs here, in this thread; the attempt in a pool thread; its record in the recorder's.
    from jobs import recorder as recording
    from jobs.lines import Engine
    from models.webhooks import Attempt, Delivery, Webhook

    hook = make_webhook(client, tenant, url=receiver.url)
    client.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)
    with models.db.connection_context():
        row = Delivery.select().join(Webhook).where(Webhook.uuid == hook["uuid"]).get()
    own = dataclasses.replace(
        settings, webhook_ca_bundle=receiver.ca_path, webhook_allow_private=True, webhook_timeout=30.0, webhook_queue=queue_name
    )
    record, cuts = recording.record, []

    def cut_then_record(*args):
        if not cuts:  # between the POST and its record, behind peewee's back, as a server-side cut looks
            cuts.append(models.db.connection())
            models.db.connection().close()
        return record(*args)

    monkeypatch.setattr(recording, "record", cut_then_record)
    connection = redis.Redis.from_url(redis_url, socket_timeout=5)
    engine = Engine(own, connection).start()
    models.db.connect(reuse_if_open=True)
    models.db.connection().close()  # before the claim
    try:
        assert claims.take(row.id, row.generation, engine) == "in flight"
        with models.db.connection_context():
            wait_until(lambda: Delivery.get_by_id(row.id).status != "pending", timeout=30)
    finally:
        engine.close(5)
        connection.close()
        models.give_back()
    assert len(receiver.requests) == 1 and len(cuts) == 1
    with models.db.connection_context():
        assert Delivery.get_by_id(row.id).status == "succeeded"
        assert [a.status for a in Attempt.select().where(Attempt.delivery == row.id)] == [200]


class _Stop(threading.Event):
    """A relay's stop event that notes each backoff the relay waits out, and returns at once."""

    def __init__(self) -> None:
        super().__init__()
        self.waited: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waited.append(timeout)
        return self.is_set()


def test_the_relay_backs_off_and_reports_each_outage_once(server, settings, caplog, monkeypatch):
    relay = Relay(redis.Redis(port=free_port()), settings)
    script = [redis.ConnectionError("refused")] * 2 + [1] + [peewee.OperationalError("terminated")] * 2 + [1]
    calls: list[int] = []

    def relay_pending(limit=500):
        calls.append(len(calls))
        step = script[len(calls) - 1] if len(calls) <= len(script) else 0
        if isinstance(step, Exception):
            raise step
        return step

    monkeypatch.setattr(relay, "relay_pending", relay_pending)
    monkeypatch.setattr(relay, "rescue", lambda: 0)
    monkeypatch.setattr("jobs.retention.offer", lambda *args: False)  # its Redis is scripted above, not real
    # The waits the relay asks for, not how long they took: a busy machine stretches every one of them.
    stop = _Stop()
    thread = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    with caplog.at_level(logging.WARNING, logger="riskapi.relay"):
        thread.start()
        assert wait_until(lambda: len(calls) > len(script), timeout=30)
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    # Only failures wait: 0.5 s, doubling; and from 0.5 s again after a success.
    assert stop.waited == [0.5, 1.0, 0.5, 1.0]
    messages = [record.getMessage() for record in caplog.records if record.name == "riskapi.relay"]
    for line in ("Redis unreachable", "Redis reachable again", "database unreachable", "database reachable again"):
        assert sum(line in message for message in messages) == 1, messages


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="cuts PostgreSQL connections (pg_terminate_backend)"
)
def test_cut_database_connections_lose_no_delivery(server, client, tenant, settings, redis_url, receiver):
    # Only this worker's connections are cut: they alone carry this application_name.
    tag = f"riskapi-faults-{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in settings.database_url else "?"
    queue = new_queue_name()
    worker = WorkerProcess(
        settings.database_url + f"{separator}application_name={tag}", redis_url, queue, ca_bundle=receiver.ca_path
    )
    cut = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE application_name = %s AND datname = current_database()"
    )
    try:
        worker.start()
        hook = make_webhook(client, tenant, url=receiver.url)
        writer = Writer(server.url + "/api/v1", tenant)
        writer.start()
        terminated = 0
        try:
            assert wait_until(lambda: len(receiver.requests) >= 10, timeout=60)
            with models.db.connection_context():
                for _ in range(10):
                    terminated += models.db.execute_sql(cut, (tag,)).fetchone()[0]
                    time.sleep(0.5)
        finally:
            writer.stop()
        assert terminated > 0 and writer.failures == []
        expected = delivery_uuids(hook["uuid"])
        assert len(expected) == len(writer.created)
        assert wait_until(lambda: expected <= set(received(receiver)), timeout=60, interval=0.2), worker.output()
        assert wait_until(lambda: all_succeeded(hook["uuid"]), timeout=30)
        assert worker.alive()
    finally:
        worker.stop()
        delete_queue(redis_url, queue)


def test_each_rq_worker_of_a_process_has_a_redis_pool_of_its_own(settings, redis_url, queue_name, connection):
    # RQ names a new worker's connection, then looks for the name among Redis's clients: through a pool shared with
    # the other threads' workers another's name could land on it in between (RQ then warned "CLIENT LIST command
    # not supported" on `riskapi serve`'s first run, on a busy machine). Each worker's pool is its own.
    from jobs.runtime.worker import DeliveryProcess

    ours = dataclasses.replace(settings, redis_url=redis_url, webhook_queue=queue_name)
    shared = redis.Redis.from_url(redis_url)
    process = DeliveryProcess(ours, shared, redis.Redis.from_url(redis_url), burst=True, threads=3)
    workers = [process.main_worker(), process.thread_worker(first_only=True), process.thread_worker()]
    pools = {id(worker.connection.connection_pool) for worker in workers} | {id(shared.connection_pool)}
    assert len(pools) == len(workers) + 1
    assert all(worker.ip_address != "unknown" for worker in workers)  # each found its own connection by its name
