"""Listen sessions over HTTP: opened, streamed (server-sent events), reported, logged; and triggered events."""

import json

from tests.support import make_webhook


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


def test_a_session_is_not_a_webhook_of_the_plan_nor_of_the_list(client, tenant):
    hook = make_webhook(client, tenant, events=["form.completed"])
    session = open_session(client, tenant)
    listed = client.get("/webhooks", headers=tenant.headers).json()["data"]
    assert [w["uuid"] for w in listed] == [hook["uuid"]]
    assert client.post(f"/webhooks/{session['uuid']}/ping", headers=tenant.headers).status_code == 404
    triggered = client.post("/event-types/form.completed/trigger", headers=tenant.headers).json()
    assert sorted(d["webhook"] for d in triggered["deliveries"]) == sorted([hook["uuid"], session["uuid"]])


def test_an_unknown_session_answers_404_at_once(client, tenant, other_tenant):
    session = open_session(client, tenant)
    for who, sid in ((tenant, "0d0c4a52-8a4c-4a43-9c43-6f0d2a0f3b61"), (other_tenant, session["uuid"]), (tenant, "nope")):
        answer = client.get(f"/listen-sessions/{sid}/stream", headers=who.headers)
        assert (answer.status_code, answer.json()) == (404, {"message": "Listen session not found.", "status": 404})
