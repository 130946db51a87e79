"""Standard Webhooks headers on real deliveries, verified with the official `standardwebhooks` library
(PyPI, pinned in the test extra), and secret rotation with a grace period.

Deliveries go API write → outbox → `riskapi worker` → the HTTPS receiver, as in test_deliveries.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import hashlib
import hmac
import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import pytest
import standardwebhooks.webhooks
from standardwebhooks import Webhook, WebhookVerificationError

import models
from foundation.config import Settings
from foundation.signing import SECRET_PREFIX, sign_standard, standard_secret, verify
from models.webhooks import Webhook as WebhookRow
from tests.support import make_webhook
from tests.webhook_support import add_driver, deliveries
from toolkit import ROOT
from toolkit.receiver import Reply
from toolkit.serving import wait_until

V1 = r"v1,[A-Za-z0-9+/]{43}="


def listed(client, tenant, hook) -> dict:
    page = client.get("/webhooks", params={"filter[uuid]": hook["uuid"]}, headers=tenant.headers).json()
    return page["data"][0]


def rotate(client, tenant, hook) -> dict:
    response = client.post(f"/webhooks/{hook['uuid']}/rotate-secret", headers=tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"][0]


def parse_time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value)


def next_request(receiver, count: int, timeout: float = 30):
    """Wait for the receiver's `count`-th request and return it."""
    assert receiver.wait_for(count, timeout=timeout), len(receiver.requests)
    return receiver.requests[count - 1]


@pytest.fixture
def grace(server, monkeypatch):
    """Set RISKAPI_WEBHOOK_ROTATION_GRACE of the running API for this test (rotate-secret fixes the expiry)."""
    flask_config = server.server.config.app.app.config

    def set_grace(seconds: float) -> None:
        monkeypatch.setitem(flask_config, "RISKAPI", dataclasses.replace(flask_config["RISKAPI"], webhook_rotation_grace=seconds))

    return set_grace


class _Clock:
    """Moves the clock the standardwebhooks library checks webhook-timestamp against."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch

    def shift(self, seconds: float) -> None:
        offset = datetime.timedelta(seconds=seconds)

        class Shifted(datetime.datetime):
            @classmethod
            def now(cls, tz=None):
                return datetime.datetime.now(tz) + offset

        self.monkeypatch.setattr(standardwebhooks.webhooks, "datetime", Shifted)

    def reset(self) -> None:
        self.monkeypatch.setattr(standardwebhooks.webhooks, "datetime", datetime.datetime)


@pytest.fixture
def clock(monkeypatch):
    return _Clock(monkeypatch)


# ---- the headers of a real delivery --------------------------------------------------------------------


def test_a_real_delivery_verifies_with_the_official_library_using_the_secret_as_shown(client, tenant, receiver, start_worker):
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url, events=["driver.created"])
    secret = hook["meta"]["signing_secret"]
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret)
    assert hook["meta"]["previous_secret_valid_until"] is None
    before = int(time.time())
    driver = add_driver(client, tenant, first_name="Ada")
    request = next_request(receiver, 1)
    headers, body = request.headers, request.body

    event = Webhook(secret).verify(body, headers)
    assert event == json.loads(body)
    assert event["data"]["uuid"] == driver["uuid"]
    assert headers["webhook-id"] == headers["service-delivery"]
    assert before <= int(headers["webhook-timestamp"]) <= time.time()
    assert re.fullmatch(V1, headers["webhook-signature"])
    # The interface's own headers are exactly as before: hex HMAC of the body keyed by the secret string.
    assert headers["service-event"] == "driver.created" and headers["service-webhook"] == hook["uuid"]
    assert verify(secret, body, headers["service-signature"])
    assert headers["service-signature"] == hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    [log] = wait_until(lambda: [d for d in deliveries(client, tenant, hook) if d["data"]["status"] == "succeeded"])
    assert log["uuid"] == headers["webhook-id"]


def test_a_receiver_that_verifies_with_the_library_accepts_every_delivery(client, tenant, receiver, start_worker):
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url, events=["driver.created"])
    checker = Webhook(hook["meta"]["signing_secret"])

    def answer(request):
        try:
            checker.verify(request.body, request.headers)
        except WebhookVerificationError:
            return 401
        return 204

    receiver.responses = answer
    for i in range(3):
        add_driver(client, tenant, first_name=f"v{i}")

    def settled():
        log = deliveries(client, tenant, hook)
        return log if len(log) == 3 and all(d["data"]["status"] not in ("pending", "failing") for d in log) else None

    log = wait_until(settled)
    assert log and [[a["status"] for a in d["data"]["attempts"]] for d in log] == [[204]] * 3


def test_retries_keep_webhook_id_and_sign_a_fresh_timestamp(client, tenant, receiver, start_worker):
    receiver.responses.extend([Reply(500)])
    start_worker(retry_delays="1")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    first, second = next_request(receiver, 1), next_request(receiver, 2)
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == first.headers["service-delivery"]
    assert first.body == second.body
    assert int(second.headers["webhook-timestamp"]) >= int(first.headers["webhook-timestamp"]) + 1
    assert first.headers["webhook-signature"] != second.headers["webhook-signature"]
    checker = Webhook(hook["meta"]["signing_secret"])
    for request in (first, second):
        checker.verify(request.body, request.headers)


def test_a_stale_or_future_timestamp_is_rejected(client, tenant, receiver, start_worker, clock):
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    request = next_request(receiver, 1)
    checker = Webhook(hook["meta"]["signing_secret"])
    checker.verify(request.body, request.headers)

    clock.shift(4 * 60 + 50)  # still within the library's 5 minutes
    checker.verify(request.body, request.headers)
    clock.shift(6 * 60)  # the captured delivery replayed 6 minutes later
    with pytest.raises(WebhookVerificationError, match="too old"):
        checker.verify(request.body, request.headers)
    clock.shift(-6 * 60)  # a receiver whose clock is 6 minutes behind
    with pytest.raises(WebhookVerificationError, match="too new"):
        checker.verify(request.body, request.headers)
    clock.reset()
    # Re-stamping the replay does not help: the timestamp is part of what is signed.
    restamped = {**request.headers, "webhook-timestamp": str(int(time.time()))}
    if restamped["webhook-timestamp"] != request.headers["webhook-timestamp"]:
        with pytest.raises(WebhookVerificationError, match="No matching signature"):
            checker.verify(request.body, restamped)
    shifted = {**request.headers, "webhook-timestamp": str(int(request.headers["webhook-timestamp"]) - 1)}
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        checker.verify(request.body, shifted)


def test_a_tampered_body_or_header_is_rejected(client, tenant, receiver, start_worker):
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant, first_name="Ada")
    add_driver(client, tenant, first_name="Bob")
    next_request(receiver, 2)
    # Deliveries are attempted side by side: Bob's may arrive first.
    one, two = sorted(receiver.requests[:2], key=lambda request: b'"Ada"' not in request.body)
    secret = hook["meta"]["signing_secret"]
    checker = Webhook(secret)
    checker.verify(one.body, one.headers)
    tampered = [
        (one.body.replace(b'"Ada"', b'"Eve"'), one.headers),
        (one.body + b" ", one.headers),
        (one.body[:-1], one.headers),
        (two.body, one.headers),  # another delivery's body under these headers
        (one.body, {**one.headers, "webhook-id": two.headers["webhook-id"]}),
        (one.body, {**one.headers, "webhook-signature": two.headers["webhook-signature"]}),
    ]
    for body, headers in tampered:
        with pytest.raises(WebhookVerificationError, match="No matching signature"):
            checker.verify(body, headers)
    assert not verify(secret, one.body.replace(b'"Ada"', b'"Eve"'), one.headers["service-signature"])
    with pytest.raises(WebhookVerificationError, match="Missing required headers"):
        checker.verify(one.body, {k: v for k, v in one.headers.items() if k != "webhook-signature"})
    other = make_webhook(client, tenant)  # another webhook's secret
    with pytest.raises(WebhookVerificationError):
        Webhook(other["meta"]["signing_secret"]).verify(one.body, one.headers)


def test_an_older_base64url_secret_keeps_service_signature_and_verifies_respelt(client, tenant, receiver, start_worker):
    """A base64url secret (as made before) keeps keying Service-Signature as shown; the library wants it re-spelt."""
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url)
    raw = b"\xfb\xff\xbf" + os.urandom(29)
    legacy = SECRET_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")
    with models.db.connection_context():
        WebhookRow.update(secret=legacy).where(WebhookRow.uuid == hook["uuid"]).execute()
    assert listed(client, tenant, hook)["meta"]["signing_secret"] == legacy
    add_driver(client, tenant)
    request = next_request(receiver, 1)
    assert verify(legacy, request.body, request.headers["service-signature"])
    respelt = standard_secret(legacy)
    assert respelt == SECRET_PREFIX + base64.b64encode(raw).decode()
    Webhook(respelt).verify(request.body, request.headers)
    with pytest.raises((WebhookVerificationError, binascii.Error)):
        Webhook(legacy).verify(request.body, request.headers)  # the library reads only standard base64


# ---- rotation without downtime -----------------------------------------------------------------------------


def test_during_the_grace_both_secrets_sign_webhook_signature_new_first(client, tenant, receiver, start_worker, grace):
    grace(86400)
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url)
    old = hook["meta"]["signing_secret"]
    add_driver(client, tenant)
    first = next_request(receiver, 1)
    assert len(first.headers["webhook-signature"].split(" ")) == 1

    started = datetime.datetime.now(datetime.UTC)
    rotated = rotate(client, tenant, hook)
    finished = datetime.datetime.now(datetime.UTC)
    new = rotated["meta"]["signing_secret"]
    assert new != old and re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", new)
    until = parse_time(rotated["meta"]["previous_secret_valid_until"])
    # The grace runs from the rotation, which happened between these two readings, however long it took.
    period = datetime.timedelta(seconds=86400)
    assert started + period <= until <= finished + period
    assert listed(client, tenant, hook)["meta"]["previous_secret_valid_until"] == rotated["meta"]["previous_secret_valid_until"]
    assert old not in json.dumps(rotated)  # the old secret is never shown again

    add_driver(client, tenant)
    second = next_request(receiver, 2)
    signatures = second.headers["webhook-signature"].split(" ")
    assert len(signatures) == 2 and all(re.fullmatch(V1, s) for s in signatures)
    msg_id, stamp = second.headers["webhook-id"], int(second.headers["webhook-timestamp"])
    assert signatures == [sign_standard(new, msg_id, stamp, second.body), sign_standard(old, msg_id, stamp, second.body)]
    # Receivers switch at their own pace: either secret verifies with the official library.
    Webhook(new).verify(second.body, second.headers)
    Webhook(old).verify(second.body, second.headers)
    # Service-Signature: the new secret only, as documented.
    assert verify(new, second.body, second.headers["service-signature"])
    assert not verify(old, second.body, second.headers["service-signature"])


def test_after_the_grace_only_the_new_secret_signs(client, tenant, receiver, start_worker, grace):
    # A grace long enough for a busy machine's delivery to come within it; its end is then brought about
    # in the database (as the time passing would), not waited for.
    grace(3600)
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url)
    old = hook["meta"]["signing_secret"]
    started = datetime.datetime.now(datetime.UTC)
    rotated = rotate(client, tenant, hook)
    finished = datetime.datetime.now(datetime.UTC)
    new = rotated["meta"]["signing_secret"]
    until = parse_time(rotated["meta"]["previous_secret_valid_until"])
    assert started + datetime.timedelta(seconds=3600) <= until <= finished + datetime.timedelta(seconds=3600)

    add_driver(client, tenant)
    during = next_request(receiver, 1)
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(during.body, during.headers)
    Webhook(new).verify(during.body, during.headers)

    # The grace ends at `until`: the listing stops naming the previous secret then.
    ended = models.utcnow() - datetime.timedelta(seconds=1)
    with models.db.connection_context():
        WebhookRow.update(previous_secret_expires=ended).where(WebhookRow.uuid == hook["uuid"]).execute()
    assert listed(client, tenant, hook)["meta"]["previous_secret_valid_until"] is None
    add_driver(client, tenant)
    after = next_request(receiver, 2)
    assert re.fullmatch(V1, after.headers["webhook-signature"])  # one signature
    Webhook(new).verify(after.body, after.headers)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(old).verify(after.body, after.headers)
    assert verify(new, after.body, after.headers["service-signature"])


def test_rotating_again_ends_the_older_secret_at_once(client, tenant, receiver, start_worker, grace):
    grace(86400)
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url)
    first = hook["meta"]["signing_secret"]
    second = rotate(client, tenant, hook)["meta"]["signing_secret"]
    third = rotate(client, tenant, hook)["meta"]["signing_secret"]
    add_driver(client, tenant)
    request = next_request(receiver, 1)
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    Webhook(third).verify(request.body, request.headers)
    Webhook(second).verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(first).verify(request.body, request.headers)


def test_no_grace_replaces_the_secret_at_once(client, tenant, receiver, start_worker, grace):
    grace(0)
    start_worker()
    hook = make_webhook(client, tenant, url=receiver.url)
    old = hook["meta"]["signing_secret"]
    rotated = rotate(client, tenant, hook)
    assert rotated["meta"]["previous_secret_valid_until"] is None
    add_driver(client, tenant)
    request = next_request(receiver, 1)
    assert re.fullmatch(V1, request.headers["webhook-signature"])
    Webhook(rotated["meta"]["signing_secret"]).verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(request.body, request.headers)


def test_a_dry_run_rotation_changes_nothing(client, tenant, grace):
    grace(86400)
    hook = make_webhook(client, tenant)
    headers = {**tenant.headers, "Precognition": "true"}
    response = client.post(f"/webhooks/{hook['uuid']}/rotate-secret", headers=headers)
    assert response.status_code == 204
    assert listed(client, tenant, hook)["meta"] == hook["meta"]


def test_the_grace_is_read_from_the_environment():
    assert Settings.from_env({}).webhook_rotation_grace == 86400
    assert Settings.from_env({"RISKAPI_WEBHOOK_ROTATION_GRACE": "2"}).webhook_rotation_grace == 2
    assert Settings.from_env({"RISKAPI_WEBHOOK_ROTATION_GRACE": "0"}).webhook_rotation_grace == 0


def test_upgrade_adds_the_rotation_columns_to_an_existing_database(tmp_path):
    """A database made before rotation had no previous_secret columns: `riskapi db upgrade` adds them, nullable."""
    path = tmp_path / "old.db"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{path}", "PYTHONPATH": str(ROOT)}

    def cli(*args) -> dict:
        done = subprocess.run([sys.executable, "-m", "riskapi", *args], env=env, capture_output=True, check=True, cwd=ROOT)
        return json.loads(done.stdout)

    cli("db", "upgrade")
    agency = cli("agency", "create", "--name", "Old")
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE webhook DROP COLUMN previous_secret")
        conn.execute("ALTER TABLE webhook DROP COLUMN previous_secret_expires")
        conn.execute("DROP TABLE schema_migration")  # such a database predates versioned migrations too
        (agency_id,) = conn.execute("SELECT id FROM agency WHERE uuid = ?", (agency["uuid"].replace("-", ""),)).fetchone()
        conn.execute(
            "INSERT INTO webhook (uuid, created, updated, agency_id, type, url, events, secret, failures)"
            " VALUES ('0123456789abcdef0123456789abcdef', '2024-01-01', '2024-01-01', ?, 'custom',"
            " 'https://hooks.example.com/in', ',driver.created,', 'whsec_old', 0)",
            (agency_id,),
        )
    cli("db", "upgrade")
    with sqlite3.connect(path) as conn:
        columns = {row[1]: row for row in conn.execute("PRAGMA table_info(webhook)")}
        row = conn.execute("SELECT secret, previous_secret, previous_secret_expires FROM webhook").fetchone()
    assert columns["previous_secret"][3] == 0 and columns["previous_secret_expires"][3] == 0  # nullable
    assert row == ("whsec_old", None, None)
    cli("db", "upgrade")  # idempotent
