"""Prometheus metrics: requests by operation and status, latency, backlog; loopback or token; whole across processes."""

import dataclasses
import os
import re
import signal
import subprocess
import sys

import httpx

import models
from api.app import create_app
from tests.support import make_tenant
from toolkit.serving import ServerThread, answers, free_port, wait_until


def sample(text: str, name: str, **labels) -> float:
    """Return the value of one sample of a Prometheus exposition (0 when absent)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in text.splitlines():
        match = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if match and match.group(1) == name and ",".join(sorted((match.group(2) or "").split(","))).strip(",") == wanted:
            return float(match.group(3))
    return 0.0


def test_requests_are_counted_by_operation_and_status(server, client, tenant):
    before = client.get(server.url + "/metrics").text
    client.get(tenant.url("/drivers"), headers=tenant.headers)
    client.get(tenant.url("/drivers"), headers=tenant.headers, params={"per_page": 5})
    scraped = client.get(server.url + "/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    after = scraped.text
    ok = {"operation": "listDrivers", "status": "200"}
    bad = {"operation": "listDrivers", "status": "422"}
    assert sample(after, "riskapi_requests_total", **ok) - sample(before, "riskapi_requests_total", **ok) == 1
    assert sample(after, "riskapi_requests_total", **bad) - sample(before, "riskapi_requests_total", **bad) == 1
    count = sample(after, "riskapi_request_duration_seconds_count", operation="listDrivers")
    assert count - sample(before, "riskapi_request_duration_seconds_count", operation="listDrivers") == 2
    assert "riskapi_outbox_lag_seconds" in after
    # Tokens, secrets and paths never become labels.
    assert tenant.token not in after and tenant.risk not in after


def test_with_a_metrics_token_only_its_bearer_may_scrape(server, settings):
    guarded = dataclasses.replace(settings, metrics_token="m3trics-secret")
    try:
        with ServerThread(create_app(guarded), free_port()) as other:
            assert httpx.get(other.url + "/metrics", timeout=30).status_code == 404
            assert httpx.get(other.url + "/metrics", headers={"Authorization": "Bearer nope"}, timeout=30).status_code == 404
            assert (
                httpx.get(other.url + "/metrics", headers={"Authorization": "Bearer m3trics-secret"}, timeout=30).status_code
                == 200
            )
        off = dataclasses.replace(settings, metrics=False)
        with ServerThread(create_app(off), free_port()) as other:
            assert httpx.get(other.url + "/metrics", timeout=30).status_code == 404
    finally:
        models.bind(settings.database_url)


def test_serve_with_two_api_processes_counts_them_whole(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "PROMETHEUS_MULTIPROC_DIR"}}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path}/metrics.db")
    port = free_port()
    command = [sys.executable, "-m", "riskapi", "serve", "--workers", "2", "--port", str(port)]
    serve = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: answers(base + "/api/v1"), timeout=40)
        models.bind(env["DATABASE_URL"])
        tenant = make_tenant()
        for _ in range(30):  # new connections, so both processes answer some
            assert httpx.get(base + "/api/v1/webhooks", headers=tenant.headers, timeout=30).status_code == 200
        for _ in range(4):  # whichever process answers the scrape, it counts all 30
            text = httpx.get(base + "/metrics", timeout=30).text
            assert sample(text, "riskapi_requests_total", operation="listWebhooks", status="200") == 30
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(30) == 0
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        from foundation.config import Settings

        models.bind(Settings.from_env().database_url)


def test_a_worker_counts_its_attempts_and_logs_one_line_each(client, tenant, receiver, start_worker, monkeypatch):
    from tests.support import make_webhook
    from tests.webhook_support import add_driver, settled
    from toolkit.receiver import Reply

    port = free_port()
    monkeypatch.setenv("RISKAPI_METRICS_PORT", str(port))
    monkeypatch.setenv("RISKAPI_ACCESS_LOG", "1")
    receiver.responses.extend([Reply(500), Reply(200)])
    worker = start_worker(retry_delays="1")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    [log] = settled(client, tenant, hook)
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    assert sample(text, "riskapi_delivery_attempts_total", outcome="failed") == 1
    assert sample(text, "riskapi_delivery_attempts_total", outcome="succeeded") == 1
    assert sample(text, "riskapi_delivery_retries_scheduled_total") == 1
    assert sample(text, "riskapi_deliveries_total", status="succeeded") == 1
    assert "riskapi_queue_depth" in text and "riskapi_outbox_lag_seconds" in text
    lines = [line for line in worker.output().splitlines() if "riskapi.attempts" in line]
    assert len(lines) == 2, worker.output()
    assert f"delivery={log['uuid']}" in lines[0] and f"webhook={hook['uuid']}" in lines[0] and "status=500" in lines[0]
    assert "status=200" in lines[1] and "outcome=succeeded" in lines[1] and "duration_ms=" in lines[1]
    assert hook["meta"]["signing_secret"] not in worker.output()
