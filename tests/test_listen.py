"""Listen sessions over HTTP: opened, streamed (server-sent events), reported, logged; and triggered events."""

import datetime
import hashlib
import hmac
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading

import httpx
import pytest
import standardwebhooks

import spec
from foundation import signing
from jobs import retention
from models import utcnow
from models.tenancy import Risk
from models.webhooks import Webhook
from tests.support import make_webhook
from toolkit import ROOT
from toolkit.serving import answers, free_port, stop_serve, wait_until
from toolkit.tenants import Tenant, items


def sse(text: str) -> list[tuple[str, dict]]:
    """Parse server-sent events into (event, data) pairs; comment lines are skipped."""
    found = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        fields = dict(line.split(": ", 1) for line in lines)
        if fields:
            found.append((fields["event"], json.loads(fields["data"])))
    return found


def open_session(client, tenant, **body) -> dict:
    response = client.post("/listen-sessions", json=body, headers=tenant.headers)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def test_a_triggered_event_is_streamed_signed_then_its_report_is_the_attempt_in_the_log(client, tenant):
    session = open_session(client, tenant, events=["driver.created"], forward_to="http://localhost:3000/hooks")
    assert session["meta"]["signing_secret"].startswith("whsec_")
    triggered = client.post("/event-types/driver.created/trigger", headers=tenant.headers)
    assert triggered.status_code == 202, triggered.text
    (made,) = triggered.json()["deliveries"]
    assert made["webhook"] == session["uuid"]
    stream = client.get(f"/listen-sessions/{session['uuid']}/stream?timeout=0", headers=tenant.headers)
    assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
    (ready, ready_data), (name, delivery) = sse(stream.text)
    assert (ready, ready_data["uuid"], name) == ("ready", session["uuid"], "delivery")
    assert delivery["delivery"] == made["delivery"] and delivery["headers"]["Service-Webhook"] == session["uuid"]
    assert json.loads(delivery["body"])["event"] == "driver.created"
    again = client.get(f"/listen-sessions/{session['uuid']}/stream?timeout=0", headers=tenant.headers)
    assert [name for name, _ in sse(again.text)] == ["ready"]  # claimed: not streamed twice
    url = f"/listen-sessions/{session['uuid']}/deliveries/{made['delivery']}/attempts"
    reported = client.post(url, json={"status": 204, "duration_ms": 7}, headers=tenant.headers)
    assert reported.status_code == 201, reported.text
    assert reported.json()["data"]["data"]["status"] == "succeeded"
    log = client.get(f"/webhooks/{session['uuid']}/deliveries", headers=tenant.headers).json()["data"]
    assert [(d["uuid"], d["data"]["status"], [a["status"] for a in d["data"]["attempts"]]) for d in log] == [
        (made["delivery"], "succeeded", [204])
    ]
    one = client.get(f"/webhooks/{session['uuid']}/deliveries/{made['delivery']}", headers=tenant.headers)
    assert one.status_code == 200 and one.json()["data"] == log[0], one.text


def test_a_session_with_a_channel_gets_only_the_events_of_that_channel(client, tenant, connection):
    other = Risk.create(agency=tenant.agency.id, type="commercial", name="Another customer")
    session = open_session(client, tenant, events=["driver.created", "form.completed"], channels=[f"risk:{tenant.risk}"])
    assert session["data"]["channels"] == [f"risk:{tenant.risk}"]
    for risk in (tenant.risk, str(other.uuid)):
        created = client.post(f"/risks/{risk}/data/drivers", json=items("driver", {}), headers=tenant.headers)
        assert created.status_code == 201, created.text
    published = client.post("/events", json={"event": "form.completed", "data": {"form": "f"}}, headers=tenant.headers)
    assert published.status_code == 202, published.text  # no channels: not for a session with channels
    stream = client.get(f"/listen-sessions/{session['uuid']}/stream?timeout=0", headers=tenant.headers)
    forwarded = [json.loads(data["body"]) for name, data in sse(stream.text) if name == "delivery"]
    assert [(body["event"], body["data"]["risk"]) for body in forwarded] == [("driver.created", tenant.risk)]


def test_a_session_is_not_a_webhook_of_the_plan_nor_of_the_list(client, tenant):
    hook = make_webhook(client, tenant, events=["form.completed"])
    session = open_session(client, tenant)
    listed = client.get("/webhooks", headers=tenant.headers).json()["data"]
    assert [w["uuid"] for w in listed] == [hook["uuid"]]
    assert client.post(f"/webhooks/{session['uuid']}/rotate-secret", headers=tenant.headers).status_code == 404
    triggered = client.post("/event-types/form.completed/trigger", headers=tenant.headers).json()
    assert sorted(d["webhook"] for d in triggered["deliveries"]) == sorted([hook["uuid"], session["uuid"]])


def test_ping_redeliver_and_recover_of_a_session_say_it_is_a_session_that_is_not_pinged_nor_retried(client, tenant, other_tenant):
    session = open_session(client, tenant, events=["form.completed"])
    (made,) = client.post("/event-types/form.completed/trigger", headers=tenant.headers).json()["deliveries"]
    url = f"/listen-sessions/{session['uuid']}/deliveries/{made['delivery']}/attempts"
    assert client.post(url, json={"status": 500, "duration_ms": 3}, headers=tenant.headers).status_code == 201
    hook = f"/webhooks/{session['uuid']}"
    operations = [
        (f"{hook}/ping", None),
        (f"{hook}/deliveries/{made['delivery']}/redeliver", None),
        (f"{hook}/recover", {"since": "2020-01-01T00:00:00Z"}),
    ]
    responses = spec.resolved()["components"]["responses"]
    shown = responses["WebhookDisabledOrWriteInProgress"]["content"]["application/json"]["examples"]["listenSession"]["value"]
    assert shown["message"].startswith("The uuid names a listen session")
    for path, body in operations:
        for headers in (tenant.headers, {**tenant.headers, "Precognition": "true"}):  # a dry-run too
            answer = client.post(path, json=body, headers=headers)
            assert (answer.status_code, answer.json()) == (409, shown), path
        assert client.post(path, json=body, headers=other_tenant.headers).status_code == 404  # another agency's: unknown
    # Nothing was sent again: the delivery stands as its one attempt left it.
    log = client.get(f"{hook}/deliveries", headers=tenant.headers).json()["data"]
    assert [(d["uuid"], d["data"]["status"], len(d["data"]["attempts"])) for d in log] == [(made["delivery"], "failed", 1)]


def test_a_dry_run_opens_nothing_and_triggers_nothing(client, tenant):
    dry = {**tenant.headers, "Precognition": "true"}
    assert client.post("/listen-sessions", json={}, headers=dry).status_code == 204
    session = open_session(client, tenant)
    assert client.post("/event-types/webhook.ping/trigger", headers=dry).status_code == 204
    log = client.get(f"/webhooks/{session['uuid']}/deliveries", headers=tenant.headers).json()["data"]
    assert log == []


def test_a_session_no_stream_holds_ends_by_itself(client, tenant, connection):
    session = open_session(client, tenant, events=["form.completed"])
    # Its process died: nothing pushes its end ahead, which comes (here, at once).
    Webhook.update(listen_expires=utcnow() - datetime.timedelta(seconds=1)).where(Webhook.uuid == session["uuid"]).execute()
    assert client.post("/event-types/form.completed/trigger", headers=tenant.headers).json()["deliveries"] == []
    assert client.get(f"/listen-sessions/{session['uuid']}/stream", headers=tenant.headers).status_code == 404


def test_retention_purges_sessions_ended_before_its_cutoff_with_their_deliveries(client, tenant, connection):
    old, live = open_session(client, tenant), open_session(client, tenant)
    client.post("/event-types/form.completed/trigger", headers=tenant.headers)
    long_ago = utcnow() - datetime.timedelta(days=40)
    Webhook.update(listen_expires=long_ago).where(Webhook.uuid == old["uuid"]).execute()
    assert retention.purge_sessions(utcnow() - datetime.timedelta(days=30), batch=1) >= 1
    assert Webhook.get_or_none(Webhook.uuid == old["uuid"]) is None
    log = client.get(f"/webhooks/{live['uuid']}/deliveries", headers=tenant.headers).json()["data"]
    assert len(log) == 1  # the live session keeps its delivery


def test_an_unknown_session_answers_404_at_once(client, tenant, other_tenant):
    session = open_session(client, tenant)
    for who, sid in ((tenant, "0d0c4a52-8a4c-4a43-9c43-6f0d2a0f3b61"), (other_tenant, session["uuid"]), (tenant, "nope")):
        answer = client.get(f"/listen-sessions/{sid}/stream", headers=who.headers)
        assert (answer.status_code, answer.json()) == (404, {"message": "Listen session not found.", "status": 404})


# ---- `riskapi listen` and `riskapi trigger` as a developer runs them ---------------------------------------


class LocalReceiver:
    """A plain-HTTP receiver on loopback, as a developer's app: records each POST, answers `status`."""

    def __init__(self, status: int = 200):
        self.status = status
        self.received: list[tuple[dict, bytes]] = []
        self.as_got: list[list[tuple[str, str]]] = []  # each POST's headers as they came: every one, in order, its case
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.received.append(({name.lower(): value for name, value in self.headers.items()}, body))
                owner.as_got.append(list(self.headers.items()))
                self.send_response(owner.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _as_at_a_terminal() -> None:
    # A command started in the background by a non-interactive shell (as CI may start the suite) inherits SIGINT
    # ignored, and Python then never raises KeyboardInterrupt: at a terminal, Ctrl-C is never ignored.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Cli:
    """A `riskapi` command in a child process (this worktree's code), its output lines collected."""

    def __init__(self, api_url: str, token: str, *args: str):
        env = dict(os.environ, RISKAPI_API_URL=api_url, RISKAPI_TOKEN=token, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        command = [sys.executable, "-m", "riskapi", *args]
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=_as_at_a_terminal
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def line(self, starting: str) -> str | None:
        return next((line for line in self.lines if line.startswith(starting)), None)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(30)


def run(api_url: str, token: str, *args: str) -> str:
    cli = Cli(api_url, token, *args)
    assert cli.process.wait(60) == 0, cli.lines
    cli.reader.join(30)
    return "\n".join(cli.lines)


@pytest.fixture
def local_receiver():
    rx = LocalReceiver()
    yield rx
    rx.close()


def listen_through(api_url, tenant, client, local_receiver, events="driver.created,form.completed"):
    """Run `riskapi listen` against an API until Ctrl-C: a created driver and a triggered event reach the local receiver."""
    cli = Cli(api_url, tenant.token, "listen", "--forward-to", local_receiver.url, "--events", events)
    try:
        assert wait_until(lambda: cli.line("Ready!"), timeout=60), cli.lines
        ready = cli.line("Ready!")
        secret = re.search(r"(whsec_\S+)", ready).group(1)
        session = re.search(r"session ([0-9a-f-]{36})", ready).group(1)
        created = client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "Ada"}), headers=tenant.headers)
        assert created.status_code == 201, created.text
        assert wait_until(lambda: len(local_receiver.received) >= 1, timeout=60), cli.lines
        triggered = run(api_url, tenant.token, "trigger", "form.completed")
        assert json.loads(triggered)["deliveries"][0]["webhook"] == session
        assert wait_until(lambda: len(local_receiver.received) >= 2 and len(cli.lines) >= 3, timeout=60), cli.lines
    finally:
        code = cli.stop()
    assert code == 0, cli.lines
    assert cli.lines[-1].startswith("Stopped listening"), cli.lines
    return cli, secret, session


def check_forwarded(local_receiver, secret, session, tenant, client, cli):
    (driver_headers, driver_body), (form_headers, form_body) = local_receiver.received
    assert json.loads(driver_body)["event"] == "driver.created" and json.loads(form_body)["event"] == "form.completed"
    for headers, body in local_receiver.received:
        assert headers["service-webhook"] == session and headers["webhook-id"] == headers["service-delivery"]
        assert headers["content-type"] == "application/json"
        assert signing.verify(secret, body, headers["service-signature"])
        assert hmac.compare_digest(hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(), headers["service-signature"])
        assert standardwebhooks.Webhook(secret).verify(body, headers)["id"] == json.loads(body)["id"]
    # One line per delivery: time, event, delivery id, the local answer's status and its milliseconds.
    printed = [line for line in cli.lines if " POST " in line]
    assert [line.split()[2:4] for line in printed] == [
        ["driver.created", driver_headers["service-delivery"]],
        ["form.completed", form_headers["service-delivery"]],
    ]
    assert all(re.search(r"\[200\] \d+ ms$", line) for line in printed), printed
    log = client.get(f"/webhooks/{session}/deliveries?sort=created", headers=tenant.headers).json()["data"]
    assert [(d["uuid"], d["data"]["status"], [a["status"] for a in d["data"]["attempts"]]) for d in log] == [
        (driver_headers["service-delivery"], "succeeded", [200]),
        (form_headers["service-delivery"], "succeeded", [200]),
    ]
    # Each attempt's request headers are those the receiver got: every one, in the order and the case they came in
    # (a webhook's Content-Type and lowercase webhook-id, not urllib's Content-type and Webhook-Id), and no other.
    for delivery, got in zip(log, local_receiver.as_got, strict=True):
        assert list(delivery["data"]["attempts"][0]["request_headers"].items()) == got
        assert [name for name, _ in got] == [
            "Host", "Content-Type", "User-Agent", "Service-Event", "Service-Delivery", "Service-Signature", "Service-Webhook",
            "webhook-id", "webhook-timestamp", "webhook-signature", "Content-Length",
        ]  # fmt: skip
    # Ctrl-C ended the session: its stream is gone, and events after it make no delivery for it.
    assert wait_until(lambda: client.get(f"/listen-sessions/{session}/stream", headers=tenant.headers).status_code == 404, 30)
    after = client.post("/event-types/form.completed/trigger", headers=tenant.headers).json()
    assert after["deliveries"] == []


def test_listen_forwards_signed_deliveries_to_a_local_receiver_and_ends_on_ctrl_c(server, client, tenant, local_receiver):
    cli, secret, session = listen_through(server.url + "/api/v1", tenant, client, local_receiver)
    check_forwarded(local_receiver, secret, session, tenant, client, cli)


def riskapi(env: dict, *args: str) -> dict:
    """Run a `riskapi` command on the database env names; return the JSON it printed."""
    done = subprocess.run([sys.executable, "-m", "riskapi", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_listen_works_with_serve_workers_2(tmp_path, local_receiver):
    """The stream is held by one API process; the trigger, the driver and the reports reach either of the two."""
    port = free_port()
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/listen.db", RISKAPI_RATE_LIMIT="0", RISKAPI_ACCESS_LOG="0")
    argv = [sys.executable, "-m", "riskapi", "serve", "--port", str(port), "--workers", "2", "--no-worker"]
    serve = subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    api_url = f"http://127.0.0.1:{port}/api/v1"
    try:
        assert wait_until(lambda: answers(api_url), timeout=60)

        agency = riskapi(env, "agency", "create", "--name", "Two processes")["uuid"]
        token = riskapi(env, "token", "create", "--agency", agency)["token"]
        risk = riskapi(env, "risk", "create", "--agency", agency, "--type", "commercial")["uuid"]
        tenant = Tenant(agency=agency, token=token, risk=risk, risk_type="commercial")
        with httpx.Client(base_url=api_url, timeout=30) as client:
            cli, secret, session = listen_through(api_url, tenant, client, local_receiver)
            check_forwarded(local_receiver, secret, session, tenant, client, cli)
    finally:
        stop_serve(serve)


def test_serve_stopping_ends_the_stream_it_holds(tmp_path, local_receiver):
    """`serve` (one process, uvicorn.run) asked to stop does not wait for a held stream to run out."""
    port = free_port()
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/stop.db", RISKAPI_RATE_LIMIT="0", RISKAPI_ACCESS_LOG="0")
    argv = [sys.executable, "-m", "riskapi", "serve", "--port", str(port), "--no-worker"]
    serve = subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    api_url = f"http://127.0.0.1:{port}/api/v1"
    cli = None
    try:
        assert wait_until(lambda: answers(api_url), timeout=60)
        agency = riskapi(env, "agency", "create", "--name", "Stop")["uuid"]
        token = riskapi(env, "token", "create", "--agency", agency)["token"]
        cli = Cli(api_url, token, "listen", "--forward-to", local_receiver.url)
        assert wait_until(lambda: cli.line("Ready!"), timeout=60), cli.lines
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0  # the stream's own end is minutes away
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        if cli is not None and cli.process.poll() is None:
            cli.process.kill()
            cli.process.wait()
