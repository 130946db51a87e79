"""Receivers that push back: a 429 or 503 with Retry-After sets when the retry goes, within bounds."""

import datetime
import email.utils
import time

from jobs.outcomes import RETRY_AFTER_CAP
from tests.support import make_webhook
from tests.webhook_support import add_driver, settled
from toolkit.receiver import Reply
from toolkit.serving import wait_until


def test_retry_after_in_seconds_sets_the_next_attempt_and_is_logged(client, tenant, receiver, start_worker):
    receiver.responses.extend([Reply(429, headers={"Retry-After": "2"}), Reply(200)])
    start_worker(retry_delays="600")  # without Retry-After the retry would wait ten minutes
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    # Coming within a minute, the retry kept to Retry-After, not to the delays (a minute is room for a busy machine).
    assert receiver.wait_for(2, timeout=60)
    first, second = receiver.requests
    assert second.at - first.at >= 1.5, second.at - first.at  # not before it either (lower bound only)
    [log] = settled(client, tenant, hook)
    attempts = log["data"]["attempts"]
    assert [(a["status"], a["error"]) for a in attempts] == [(429, "Retry-After 2 s"), (200, None)]


def test_retry_after_as_a_date_far_away_is_capped(client, tenant, receiver, start_worker):
    later = email.utils.formatdate(time.time() + 10 * 86400, usegmt=True)
    receiver.responses.append(Reply(503, headers={"Retry-After": later}))
    start_worker(retry_delays="1")
    hook = make_webhook(client, tenant, url=receiver.url)
    before = time.time()
    add_driver(client, tenant)
    assert receiver.wait_for(1)

    def pending():
        log = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers).json()["data"]
        return log if log and log[0]["data"]["attempts"] else None

    [log] = wait_until(pending)
    after = time.time()
    [attempt] = log["data"]["attempts"]
    assert attempt["status"] == 503 and attempt["error"].endswith(f"(waiting {RETRY_AFTER_CAP:g} s)")
    # The cap counts from the attempt's outcome, written between these readings (however long that took).
    next_attempt = datetime.datetime.fromisoformat(log["data"]["next_attempt"]).timestamp()
    assert before + RETRY_AFTER_CAP <= next_attempt <= after + RETRY_AFTER_CAP
