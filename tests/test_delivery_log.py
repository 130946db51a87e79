"""A delivery's log shows what went and what came back: the body sent, each attempt's headers and the receiver's answer."""

from __future__ import annotations

from foundation.signing import verify
from tests.support import make_webhook
from tests.webhook_support import add_driver, deliveries, settled
from toolkit.receiver import Reply
from toolkit.serving import wait_until


def test_each_attempt_shows_the_headers_sent_and_the_answer_and_the_body_verifies(client, tenant, receiver, start_worker):
    receiver.responses.extend([Reply(500, headers={"X-Trace": "req-42"}, body=b"KeyError: 'signature'"), Reply(200, body=b"ok")])
    start_worker(retry_delays="1")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)

    [log] = settled(client, tenant, hook, timeout=60)
    first, second = log["data"]["attempts"]
    assert [r.headers for r in receiver.requests] == [
        {name.lower(): value for name, value in attempt["request_headers"].items()} for attempt in (first, second)
    ]
    assert first["response"]["status"] == 500 and first["status"] == 500
    assert first["response"]["headers"]["X-Trace"] == "req-42"
    assert first["response"]["body"] == "KeyError: 'signature'" and first["response"]["body_truncated"] is False
    assert second["response"] == {**second["response"], "status": 200, "body": "ok", "body_truncated": False}
    # The body shown is the one sent, byte for byte: its signature checks against the header sent with it.
    sent = log["data"]["body"]
    assert sent.encode() == receiver.requests[0].body == receiver.requests[1].body
    assert verify(hook["meta"]["signing_secret"], sent.encode(), first["request_headers"]["Service-Signature"])


def test_a_large_answer_is_kept_to_16_kib_and_no_answer_shows_null(client, tenant, receiver, start_worker):
    receiver.responses.extend([Reply(200, delay=30), Reply(503, body=("é" * 50_000).encode())])
    start_worker(timeout="1", retry_delays="1,1")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)

    [log] = settled(client, tenant, hook, timeout=60)
    stalled, large, last = log["data"]["attempts"]
    assert stalled["status"] is None and stalled["response"] is None and stalled["error"]
    assert stalled["request_headers"]["Service-Delivery"] == log["uuid"]
    assert large["response"]["status"] == 503 and large["response"]["body_truncated"] is True
    assert len(large["response"]["body"].encode()) <= 16 * 1024 and large["response"]["body"].startswith("é" * 100)
    assert last["response"]["status"] == 200 and last["response"]["body"] == ""


def statuses(client, tenant, hook, **filters) -> list[str]:
    """Return the statuses of the webhook's deliveries that the filters select."""
    response = client.get(f"/webhooks/{hook['uuid']}/deliveries", headers=tenant.headers, params=filters)
    assert response.status_code == 200, response.text
    return [d["data"]["status"] for d in response.json()["data"]]


def test_a_delivery_is_pending_then_failing_while_a_retry_is_due_then_failed(client, tenant, receiver, start_worker):
    receiver.responses = lambda request: Reply(500, body=b"down")
    hook = make_webhook(client, tenant, url=receiver.url)
    add_driver(client, tenant)
    assert statuses(client, tenant, hook, **{"filter[status]": "pending"}) == ["pending"]
    assert statuses(client, tenant, hook, **{"filter[status]": "failing,failed"}) == []

    start_worker(retry_delays="5,5")  # two 5-s windows in which a look must see it failing: roomy on a busy machine
    seen = []

    def retried() -> bool:
        [delivery] = deliveries(client, tenant, hook)
        tried = len(delivery["data"]["attempts"])
        seen.append((tried, delivery["data"]["status"], delivery["data"]["next_attempt"] is not None))
        return tried == 3 and delivery["data"]["status"] == "failed"

    assert wait_until(retried, timeout=60, interval=0.05), seen
    # Every look between the first attempt and the last showed it failing, its retry due; never pending.
    between = {(status, due) for tried, status, due in seen if 0 < tried < 3}
    assert between == {("failing", True)}, seen
    assert {status for tried, status, _ in seen if tried == 0} <= {"pending"}
    assert statuses(client, tenant, hook, **{"filter[status]": "failed"}) == ["failed"]
    assert statuses(client, tenant, hook, **{"filter[status]": "pending,failing,succeeded"}) == []


def test_the_log_filters_by_the_last_response_status_and_status(client, tenant, receiver, start_worker):
    receiver.responses = lambda request: Reply(404) if request.path.endswith("gone") else Reply(503)
    start_worker(retry_delays="1")
    missing = make_webhook(client, tenant, url=receiver.url + "?gone")
    busy = make_webhook(client, tenant, url=receiver.url + "?busy")
    add_driver(client, tenant)
    settled(client, tenant, missing, timeout=60)
    settled(client, tenant, busy, timeout=60)

    def picked(hook, value: str) -> int:
        return len(statuses(client, tenant, hook, **{"filter[response_status]": value, "filter[status]": "failed"}))

    assert [picked(missing, v) for v in ("404", "4xx", "4XX,5xx", "5xx", "503", "200,2xx")] == [1, 1, 1, 0, 0, 0]
    assert [picked(busy, v) for v in ("404", "4xx", "4XX,5xx", "5xx", "503", "200,2xx")] == [0, 0, 1, 1, 1, 0]
    for bad in ({"filter[response_status]": "6xx"}, {"filter[response_status]": "50"}, {"filter[status]": "stuck"}):
        response = client.get(f"/webhooks/{busy['uuid']}/deliveries", headers=tenant.headers, params=bad)
        assert response.status_code == 422 and list(response.json()["errors"]) == list(bad), response.text
