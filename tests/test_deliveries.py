"""Webhook delivery end to end: API write → outbox → relay → RQ worker (with scheduler) → HTTPS receiver."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import httpx
import psutil

from foundation.signing import verify
from riskapi import __version__
from tests.support import make_tenant, make_webhook
from tests.webhook_support import EmbeddedRedis, add_driver, deliveries, descendants, running, settled
from toolkit.receiver import Reply
from toolkit.serving import free_port, wait_until
from toolkit.tenants import items
from toolkit.workers import WorkerProcess


def test_driver_create_is_delivered_signed_with_every_header(client, tenant, receiver, start_worker):
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url, events=["driver.created"])
    created = client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "Ada"}), headers=tenant.headers)
    assert created.status_code == 201
    driver = created.json()["data"][0]

    assert receiver.wait_for(1)
    path, headers, body, *_ = receiver.requests[0]
    assert path == "/hook"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == f"riskapi-webhooks/{__version__}"
    assert headers["service-event"] == "driver.created"
    assert headers["service-webhook"] == hook["uuid"]
    assert verify(hook["meta"]["signing_secret"], body, headers["service-signature"])
    assert headers["service-signature"] == headers["service-signature"].lower()
    event = json.loads(body)
    assert list(event) == ["id", "event", "created", "data"]
    assert event["event"] == "driver.created"
    assert event["data"]["uuid"] == driver["uuid"] and event["data"]["object"] == "driver"
    assert event["data"]["risk"] == tenant.risk
    assert event["data"]["data"]["first_name"] == "Ada"

    log = wait_until(lambda: [d for d in deliveries(client, tenant, hook) if d["data"]["status"] == "succeeded"])
    assert log[0]["uuid"] == headers["service-delivery"]
    assert log[0]["data"]["event_id"] == event["id"]
    assert [a["status"] for a in log[0]["data"]["attempts"]] == [200]
    assert log[0]["data"]["next_attempt"] is None


def webhook_state(client, tenant, hook) -> dict:
    page = client.get("/webhooks", params={"filter[uuid]": hook["uuid"]}, headers=tenant.headers).json()
    return page["data"][0]


def test_three_retries_in_order_and_spacing_with_one_delivery_id_then_failed(client, tenant, receiver, start_worker):
    receiver.responses.extend([Reply(500), Reply.redirect("https://example.com/"), Reply(404), Reply(503)])
    start_worker(retry_delays="1,2,3")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)

    assert receiver.wait_for(4, timeout=60)
    [log] = settled(client, tenant, hook)
    time.sleep(1.5)  # nothing more comes
    requests = receiver.requests
    assert len(requests) == 4
    assert len({r.headers["service-delivery"] for r in requests}) == 1
    assert len({r.body for r in requests}) == 1
    # No retry starts before its slot: each is due its delay after the previous attempt's answer was written
    # (0.05 s for the wall clock it is scheduled by against the receiver's monotonic one). How much later it
    # comes is the machine's business: no upper bound.
    gaps = [later.at - earlier.at for earlier, later in zip(requests, requests[1:], strict=False)]
    for gap, delay in zip(gaps, (1, 2, 3), strict=True):
        assert gap >= delay - 0.05, gaps
    assert log["uuid"] == requests[0].headers["service-delivery"]
    assert log["data"]["status"] == "failed" and log["data"]["next_attempt"] is None
    assert [a["status"] for a in log["data"]["attempts"]] == [500, 302, 404, 503]
    assert all(a["error"] is None and a["duration_ms"] >= 0 for a in log["data"]["attempts"])
    assert webhook_state(client, tenant, hook)["data"]["disabled"] is None  # one failure is below the limit


def test_a_retry_that_succeeds_settles_the_delivery(client, tenant, receiver, start_worker):
    receiver.responses.extend([Reply(502)])
    start_worker(retry_delays="1")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    pending = wait_until(lambda: [d for d in deliveries(client, tenant, hook) if d["data"]["attempts"]])
    assert pending[0]["data"]["status"] == "failing" and pending[0]["data"]["next_attempt"] is not None
    [log] = settled(client, tenant, hook)
    assert log["data"]["status"] == "succeeded"
    assert [a["status"] for a in log["data"]["attempts"]] == [502, 200]
    assert log["data"]["next_attempt"] is None


def test_a_stalled_or_trickling_receiver_fails_at_the_total_deadline(client, tenant, receiver, start_worker):
    receiver.responses.extend([Reply(200, delay=30), Reply(200, body=b"x" * 200, trickle=0.05, trickle_head=True)])
    start_worker(timeout="1", retry_delays="1")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    [log] = settled(client, tenant, hook)
    attempts = log["data"]["attempts"]
    assert log["data"]["status"] == "failed"
    assert [a["status"] for a in attempts] == [None, None]
    for attempt in attempts:
        assert attempt["error"] == "timed out after 1.0 s"
        # The deadline can't fire early; a busy machine may fire it late, so the upper bound is 10 s past
        # it, still short of the 30 s stall and the 13 s trickle it cuts.
        assert 900 <= attempt["duration_ms"] <= 11000


def test_a_zapier_hook_answering_410_is_disabled_at_once(client, tenant, receiver, start_worker):
    receiver.responses.extend([Reply(410), Reply(410)])
    start_worker(retry_delays="1")
    zapier = make_webhook(client, tenant, url=receiver.url + "?zap", type_="zapier")
    custom = make_webhook(client, tenant, url=receiver.url + "?custom", type_="custom", events=["vehicle.created"])
    add_driver(client, tenant)
    [log] = settled(client, tenant, zapier)
    assert log["data"]["status"] == "failed"
    assert [a["status"] for a in log["data"]["attempts"]] == [410]
    assert webhook_state(client, tenant, zapier)["data"]["disabled"] is not None
    # A custom webhook's 410 is an ordinary failure, retried.
    client.post(tenant.url("/vehicles"), json=items("vehicle", {}), headers=tenant.headers)
    [other] = settled(client, tenant, custom)
    assert [a["status"] for a in other["data"]["attempts"]] == [410, 200]
    assert webhook_state(client, tenant, custom)["data"]["disabled"] is None
    assert sum(1 for r in receiver.requests if r.path.endswith("?zap")) == 1


def test_consecutive_failed_deliveries_disable_a_webhook_and_a_success_resets_the_count(client, tenant, receiver, start_worker):
    receiver.responses = lambda request: 500 if json.loads(request.body)["data"]["data"]["first_name"] == "fail" else 200
    start_worker(retry_delays="", failure_limit="2")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant, first_name="fail")
    settled(client, tenant, hook, 1)
    add_driver(client, tenant, first_name="ok")
    settled(client, tenant, hook, 2)
    add_driver(client, tenant, first_name="fail")
    settled(client, tenant, hook, 3)
    assert webhook_state(client, tenant, hook)["data"]["disabled"] is None  # fail, success, fail: the count is 1
    add_driver(client, tenant, first_name="fail")
    log = settled(client, tenant, hook, 4)
    assert [d["data"]["status"] for d in log] == ["failed", "failed", "succeeded", "failed"]
    assert webhook_state(client, tenant, hook)["data"]["disabled"] is not None
    # Disabled: the next event is recorded for it as skipped, and not sent.
    add_driver(client, tenant, first_name="ok")
    assert [d["data"]["status"] for d in deliveries(client, tenant, hook)] == ["skipped", *(d["data"]["status"] for d in log)]
    # Re-enabled: the count starts again from zero.
    body = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"disabled": None}}]}
    assert client.patch("/webhooks", json=body, headers=tenant.headers).status_code == 200
    add_driver(client, tenant, first_name="fail")
    settled(client, tenant, hook, 6)
    assert webhook_state(client, tenant, hook)["data"]["disabled"] is None


def test_rotate_secret_changes_the_signature_of_later_deliveries(client, tenant, receiver, start_worker):
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url)
    old = hook["meta"]["signing_secret"]
    add_driver(client, tenant)
    assert receiver.wait_for(1)
    rotated = client.post(f"/webhooks/{hook['uuid']}/rotate-secret", headers=tenant.headers).json()["data"][0]
    new = rotated["meta"]["signing_secret"]
    add_driver(client, tenant)
    assert receiver.wait_for(2)
    first, second = receiver.requests
    assert verify(old, first.body, first.headers["service-signature"])
    assert verify(new, second.body, second.headers["service-signature"])
    assert not verify(old, second.body, second.headers["service-signature"])


def test_nothing_of_another_agency_is_delivered(server, client, receiver, start_worker):
    one, two = make_tenant(), make_tenant()
    start_worker()
    make_webhook(client, one, url=receiver.url + "?one", events=["driver.created", "form.completed"])
    make_webhook(client, two, url=receiver.url + "?two", events=["driver.created", "form.completed"])
    add_driver(client, one)
    client.post("/events", json={"event": "form.completed", "data": {"x": 1}}, headers=one.headers)
    assert receiver.wait_for(2)
    time.sleep(0.5)  # nothing of the other agency comes later either
    assert [r.path for r in receiver.requests] == ["/hook?one", "/hook?one"]
    assert {json.loads(r.body)["event"] for r in receiver.requests} == {"driver.created", "form.completed"}


def test_redeliver_sends_the_same_delivery_again(client, tenant, other_tenant, receiver, start_worker):
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    [log] = settled(client, tenant, hook)
    url = f"/webhooks/{hook['uuid']}/deliveries/{log['uuid']}/redeliver"
    assert client.post(url, headers=other_tenant.headers).status_code == 404
    assert client.post(f"/webhooks/{hook['uuid']}/deliveries/{hook['uuid']}/redeliver", headers=tenant.headers).status_code == 404
    response = client.post(url, headers=tenant.headers)
    assert response.status_code == 202
    assert response.json()["data"]["data"]["status"] == "pending"
    assert receiver.wait_for(2)
    first, second = receiver.requests
    assert first.headers["service-delivery"] == second.headers["service-delivery"] == log["uuid"]
    assert first.body == second.body
    [again] = settled(client, tenant, hook)
    assert [a["status"] for a in again["data"]["attempts"]] == [200, 200]
    body = {"data": [{"object": "webhook", "uuid": hook["uuid"], "data": {"disabled": True}}]}
    client.patch("/webhooks", json=body, headers=tenant.headers)
    assert client.post(url, headers=tenant.headers).status_code == 409


def test_delivery_log_filters_and_pages_newest_first(client, tenant):
    hook = make_webhook(client, tenant, events=["driver.created", "vehicle.created"])
    client.post(tenant.url("/drivers"), json=items("driver", *[{} for _ in range(11)]), headers=tenant.headers)
    client.post(tenant.url("/vehicles"), json=items("vehicle", {}), headers=tenant.headers)
    first = client.get(f"/webhooks/{hook['uuid']}/deliveries", params={"per_page": 10}, headers=tenant.headers).json()
    assert first["data"][0]["data"]["event"] == "vehicle.created"
    assert first["next_cursor"]
    rest = client.get(first["next_page_url"], headers=tenant.headers).json()
    assert len(first["data"]) + len(rest["data"]) == 12
    only = deliveries(client, tenant, hook, **{"filter[event]": "vehicle.created", "filter[status]": "pending"})
    assert len(only) == 1
    assert deliveries(client, tenant, hook, **{"filter[status]": "succeeded,failed"}) == []
    bad = client.get(f"/webhooks/{hook['uuid']}/deliveries", params={"filter[status]": "lost"}, headers=tenant.headers)
    assert bad.status_code == 422


def test_private_destinations_are_refused_at_delivery_time_without_the_setting(client, tenant, receiver, start_worker):
    start_worker(allow_private="0", retry_delays="")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    [log] = settled(client, tenant, hook)
    [attempt] = log["data"]["attempts"]
    assert attempt["status"] is None
    assert "is not allowed" in attempt["error"] and "127.0.0.1" in attempt["error"]
    assert receiver.requests == []


# ---- failures of the machinery itself ---------------------------------------------------------------


def test_redis_down_during_writes_then_back_every_delivery_arrives(client, tenant, receiver, start_worker):
    own = EmbeddedRedis(port=free_port()).start()  # ours alone: stopping it touches nobody else
    worker = None
    try:
        worker = start_worker(redis_url=own.url)
        hook = make_webhook(client, tenant, url=receiver.url)
        add_driver(client, tenant, first_name="before")
        assert receiver.wait_for(1)

        own.stop()
        for i in range(5):
            add_driver(client, tenant, first_name=f"during-{i}")  # answered 201: the write needs no Redis
        time.sleep(1.0)  # while Redis is down, nothing goes out
        assert len(receiver.requests) == 1
        own.start()

        assert receiver.wait_for(6, timeout=60), len(receiver.requests)
        names = sorted(json.loads(r.body)["data"]["data"]["first_name"] for r in receiver.requests)
        assert names == ["before"] + [f"during-{i}" for i in range(5)]
        log = settled(client, tenant, hook, 6)
        assert {d["data"]["status"] for d in log} == {"succeeded"}
    finally:
        if worker is not None:
            worker.stop()  # while its Redis still answers
        own.close()


def test_a_worker_killed_mid_delivery_leaves_the_delivery_to_be_retried(client, tenant, receiver, start_worker):
    receiver.responses.append(Reply(200, delay=30))  # the first attempt hangs until the worker is gone
    first = start_worker(timeout="2", stale_after="1")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    assert receiver.wait_for(1)
    first.kill()
    assert not first.alive()

    start_worker(timeout="2", stale_after="1")
    assert receiver.wait_for(2, timeout=30)
    one, two = receiver.requests[:2]
    assert one.headers["service-delivery"] == two.headers["service-delivery"]
    assert one.body == two.body
    [log] = settled(client, tenant, hook)
    assert log["data"]["status"] == "succeeded"
    assert [a["status"] for a in log["data"]["attempts"]] == [200]


def test_serve_runs_api_relay_worker_and_embedded_redis_and_stops_them_all(tmp_path, receiver):
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path}/serve.db",
        RISKAPI_WEBHOOK_ALLOW_PRIVATE="1",
        RISKAPI_WEBHOOK_CA_BUNDLE=receiver.ca_path,
    )

    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "riskapi", *args], env=env, capture_output=True, check=True)
        return json.loads(out.stdout)

    agency = cli("agency", "create", "--name", "Serve")
    token = cli("token", "create", "--agency", agency["uuid"])["token"]
    risk = cli("risk", "create", "--agency", agency["uuid"], "--type", "commercial")["uuid"]
    port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "riskapi", "serve", "--port", str(port)], env=env, start_new_session=True)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", headers=headers, timeout=10) as http:

            def up():
                try:
                    return http.get("/webhooks").status_code == 200
                except httpx.TransportError:
                    return False

            assert wait_until(up, timeout=30)
            body = {
                "data": [{"object": "webhook", "data": {"type": "custom", "url": receiver.url, "events": ["driver.created"]}}]
            }
            assert http.post("/webhooks", json=body).status_code == 201
            assert http.post(f"/risks/{risk}/data/drivers", json=items("driver", {})).status_code == 201
            assert receiver.wait_for(1)
        started = descendants(serve.pid)
        assert len(started) >= 2  # the worker, its scheduler and redis-server
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(30) == 0
        assert wait_until(lambda: not any(running(pid) for pid in started), timeout=30)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()


def test_worker_burst_delivers_what_is_waiting_and_exits(client, tenant, settings, redis_url, receiver, queue_name):
    hook = make_webhook(client, tenant, url=receiver.url)
    for i in range(3):
        add_driver(client, tenant, first_name=f"b{i}")
    worker = WorkerProcess(settings.database_url, redis_url, queue_name, ca_bundle=receiver.ca_path)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "riskapi", "worker", "--burst"], env=worker.env, capture_output=True, timeout=60
        )
    finally:
        worker.stop()  # never started: this only removes its log file
    assert done.returncode == 0, done.stderr.decode()
    assert len(receiver.requests) == 3
    assert {d["data"]["status"] for d in deliveries(client, tenant, hook)} == {"succeeded"}


def test_serve_killed_outright_takes_its_worker_and_redis_down(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path}/killed.db"
    port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "riskapi", "serve", "--port", str(port)], env=env, start_new_session=True)
    try:

        def up():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/v1/webhooks", timeout=2).status_code == 401
            except httpx.TransportError:
                return False

        assert wait_until(up, timeout=30)
        started = wait_until(lambda: descendants(serve.pid) if len(descendants(serve.pid)) >= 2 else None, timeout=30)
        assert started
        # The embedded Redis's private directory: nobody is left to remove it after a SIGKILL.
        directories = set()
        for pid in started:
            with contextlib.suppress(psutil.Error):
                # redis-server retitles itself "redis-server unixsocket:/tmp/riskapi-redis-.../redis.sock".
                for token in re.split(r"[\s:]", " ".join(psutil.Process(pid).cmdline())):
                    if "riskapi-redis-" in token and token.endswith("redis.sock"):
                        directories.add(os.path.dirname(token))
        serve.kill()  # no chance to clean up: the children must notice by themselves
        serve.wait()
        assert wait_until(lambda: not any(running(pid) for pid in started), timeout=30)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        for pid in started or ():
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        for directory in directories:
            shutil.rmtree(directory, ignore_errors=True)


def test_a_deliveries_page_shows_each_delivery_with_the_attempts_of_one_moment(client, tenant, settings, monkeypatch):
    from playhouse.db_url import connect

    from services import webhook_ops

    hook = make_webhook(client, tenant)  # nothing sends to it here: its delivery waits, unattempted
    add_driver(client, tenant)
    read_attempts = webhook_ops.attempts

    def recorded_meanwhile(ids):
        # A worker records an attempt and settles the delivery, committed between the page's two reads.
        recorder = connect(settings.database_url)
        with recorder.atomic():
            recorder.execute_sql(
                f"INSERT INTO attempt (delivery_id, at, status, duration_ms) VALUES ({ids[0]}, '2026-01-01 00:00:00', 200, 5)"
            )
            recorder.execute_sql(f"UPDATE delivery SET status = 'succeeded', tries = 1 WHERE id = {ids[0]}")
        recorder.close()
        return read_attempts(ids)

    monkeypatch.setattr(webhook_ops, "attempts", recorded_meanwhile)
    [log] = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers).json()["data"]
    # The page is of the moment before the attempt: pending, and no attempt yet.
    assert (log["data"]["status"], log["data"]["attempts"]) == ("pending", [])
    monkeypatch.setattr(webhook_ops, "attempts", read_attempts)
    [log] = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers).json()["data"]
    assert (log["data"]["status"], [a["status"] for a in log["data"]["attempts"]]) == ("succeeded", [200])
