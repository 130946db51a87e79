"""A delivery's log shows what went and what came back: the body sent, each attempt's headers and the receiver's answer."""

from __future__ import annotations

from riskapi.webhooks.signing import verify
from tests.support import make_webhook
from tests.webhook_support import add_driver, settled
from toolkit.receiver import Reply


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
