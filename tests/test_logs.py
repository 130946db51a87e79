"""One line per request with its request id, route template, status, duration and agency; no secret ever."""

import json
import logging
import re
import warnings

import pytest

from api import access_log as logs
from foundation import formats
from toolkit.serving import wait_until
from toolkit.tenants import items


@pytest.fixture
def lines(caplog):
    """The request lines logged during the test, as dicts of their fields."""
    caplog.set_level(logging.INFO, logger="riskapi.access")
    logs.access.propagate = True  # let caplog see them

    def read():
        return [r.fields for r in caplog.records if r.name == "riskapi.access"]

    yield read
    logs.access.propagate = False


def test_every_request_is_logged_once_with_its_route_status_and_agency(client, tenant, lines):
    response = client.get(tenant.url("/drivers"), headers={**tenant.headers, "X-Request-Id": "req-42.a"})
    assert response.headers["X-Request-Id"] == "req-42.a"
    generated = client.get("/webhooks", headers=tenant.headers).headers["X-Request-Id"]
    assert len(generated) == 32
    replaced = client.get(tenant.url("/drivers"), headers={**tenant.headers, "X-Request-Id": "bad id;" * 30})
    assert replaced.headers["X-Request-Id"] != "bad id;" * 30 and len(replaced.headers["X-Request-Id"]) == 32
    assert client.get("/nowhere", headers={"X-Request-Id": "r-404"}).status_code == 404
    # A line is written once its response is sent: lines may lag the client, and come in any order.
    found = wait_until(lambda: lines() if len(lines()) == 4 else None)
    by_id = {line["request_id"]: line for line in found}
    assert set(by_id) == {"req-42.a", generated, replaced.headers["X-Request-Id"], "r-404"}
    first = by_id["req-42.a"]
    assert first["route"] == "/risks/{risk}/data/drivers" and first["method"] == "GET"
    assert first["status"] == 200 and first["agency"] == tenant.agency.id and first["duration_ms"] >= 0
    assert by_id[generated]["route"] == "/webhooks"
    assert by_id["r-404"]["route"] == "-" and by_id["r-404"]["status"] == 404 and by_id["r-404"]["agency"] == "-"


def test_no_token_secret_signature_or_body_reaches_a_log_line(client, tenant, lines, caplog):
    hook = {"type": "custom", "url": "https://hooks.example.com/secret-path", "events": ["driver.created"]}
    made = client.post("/webhooks", json=items("webhook", hook), headers=tenant.headers).json()["data"][0]
    rotated = client.post(f"/webhooks/{made['uuid']}/rotate-secret", headers=tenant.headers).json()["data"][0]
    client.post(tenant.url("/drivers"), json=items("driver", {"first_name": "Zelda-unique-name"}), headers=tenant.headers)
    client.get("/webhooks", headers={"Authorization": "Bearer rk_not-a-real-token-xyz"})
    assert wait_until(lambda: len(lines()) == 4)
    text = "\n".join(caplog.messages) + "\n".join(json.dumps(line) for line in lines())
    for secret in (tenant.token, "rk_not-a-real-token-xyz", made["meta"]["signing_secret"], rotated["meta"]["signing_secret"]):
        assert secret not in text
    assert "Zelda-unique-name" not in text and "secret-path" not in text


def test_json_format_is_one_object_per_line(capsys):
    logs.configure("json")
    try:
        logs.access.info("request", extra={"fields": {"request_id": "r1", "status": 200}})
        line = capsys.readouterr().err.strip()
        parsed = json.loads(line)
        assert parsed["request_id"] == "r1" and parsed["status"] == 200 and parsed["time"].endswith("Z")
        logs.configure("text")
        logs.access.info("request", extra={"fields": {"request_id": "r2", "status": 201}})
        assert capsys.readouterr().err.strip().endswith("riskapi.access request_id=r2 status=201")
    finally:
        logs.access.handlers.clear()


def test_every_logger_of_a_process_has_the_request_lines_format(capsys):
    """Warnings of the worker, the relay or the API's error handler: time, logger, key=value (or one JSON object)."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        formats.setup("text")
        logging.getLogger("riskapi.worker").warning("database unreachable (%s); retrying", "OperationalError: x")
        line = capsys.readouterr().err.strip()
        message = r"message=\"database unreachable \(OperationalError: x\); retrying\""
        pattern = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ riskapi\.worker level=WARNING " + message
        assert re.fullmatch(pattern, line), line
        formats.setup("json")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("api").exception("failed")
        [line] = capsys.readouterr().err.strip().splitlines()  # the traceback too is on the one line
        parsed = json.loads(line)
        assert (parsed["logger"], parsed["level"], parsed["message"]) == ("api", "ERROR", "failed")
        assert "ValueError: boom" in parsed["traceback"] and parsed["time"].endswith("Z")
        # A library's warnings.warn (RQ's, in a worker) is a line of the same format, not two bare ones.
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("CLIENT LIST command not supported", Warning, stacklevel=1)
        [line] = capsys.readouterr().err.strip().splitlines()
        parsed = json.loads(line)
        assert (parsed["logger"], parsed["level"]) == ("py.warnings", "WARNING") and "CLIENT LIST" in parsed["message"]
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
        logging.captureWarnings(False)
