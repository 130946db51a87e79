"""The README's examples, run as a new user would run them: every curl and CLI line, and the verification snippets.

Each `sh` block with a curl or `riskapi` line is cut into commands and run by bash, in order, against
the served app: curl as written (only `-w` appended, for the status), the command line as
`python -m riskapi` (what `python3 dev.py riskapi` runs, minus tox), the quick start's
`eval "$(... quickstart ...)"` read as the names it exports. A name in capitals
(`RISK`, `DRIVER_UUID`...) is replaced by the uuid an earlier answer gave. Each answer must be the
documented success status of its operation, in JSON, and match the answer the README shows under it.
"""

import glob
import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid

import pytest

import models
import spec
from foundation import signing
from models.tenancy import Agency
from riskapi.serve import EXPORTS, greeting, quickstart_command
from riskapi.tenancy import DEFAULT_API_URL
from tests.support import CREATED_AGENCIES
from tests.test_examples import OPERATIONS, success_status

README = "README.md"
CLI = "python3 dev.py riskapi"
HOST = "http://127.0.0.1:8000"
# curl as written, plus its status on a last line of its own.
PRELUDE = "curl() { command curl -w '\\n%{http_code}' \"$@\"; }\n"
QUICKSTART = re.compile(r'eval "\$\((' + re.escape(CLI) + r' quickstart[^|)]*?)(?: \| tee \S+)?\)"')
# What a new risk profile's story names afresh: its first driver, address, vehicle...
RISK_DATA = ("DRIVER_UUID", "ADDRESS_UUID", "VEHICLE_UUID", "PREMISE_UUID", "BUILDING_UUID", "UUID1", "UUID2")
PLACEHOLDER = re.compile(r"(?<![$\w])([A-Z][A-Z0-9]*(?:_UUID)?|UUID\d|rk_\.\.\.)(?![\w])")


def blocks(text: str, language: str) -> list[str]:
    """Return the fenced blocks of one language."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def commands(block: str) -> list[tuple[str, str | None]]:
    """Cut a shell block into (command, the answer the README shows on the `#  ` line under it)."""
    found: list[tuple[str, str | None]] = []
    pending = ""
    for line in block.splitlines():
        if not pending and line.startswith("#  ") and found:
            found[-1] = (found[-1][0], line[3:].strip())
            continue
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line + "\n"
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        if not pending.rstrip().endswith("\\"):
            found.append((pending.strip(), None))
            pending = ""
    assert not pending, f"unterminated command: {pending!r}"
    return found


def readme_commands() -> list[tuple[str, str | None]]:
    with open(README, encoding="utf-8") as handle:
        text = handle.read()
    found = []
    for block in blocks(text, "sh"):
        runnable = [
            c
            for c in commands(block)
            if c[0].startswith(("curl ", CLI + " agency", CLI + " token", CLI + " risk")) or QUICKSTART.match(c[0])
        ]
        found.extend(runnable)
    return found


def operation_of(method: str, url: str) -> str:
    """Return the operationId that answers METHOD URL."""
    path = url.split("/api/v1", 1)[1].split("?", 1)[0]
    for op_id, (_template, op_method, _op, _params) in OPERATIONS.items():
        if op_method.upper() == method and spec.path_pattern(op_id).fullmatch(spec.base_path() + path):
            return op_id
    raise AssertionError(f"no operation answers {method} {path}")


def lenient_json(text: str):
    """Parse an answer as the README abbreviates it (`...` for the rest)."""
    return json.loads(re.sub(r",\s*\.\.\.\s*}", "}", text))


def matches(shown, actual, values: dict) -> None:
    """Assert the answer has what the README shows, placeholders read as the values they stand for."""
    if isinstance(shown, dict):
        assert isinstance(actual, dict), actual
        for key, value in shown.items():
            if key != "...":
                assert key in actual, f"{key} not in {actual}"
                matches(value, actual[key], values)
    elif isinstance(shown, str) and shown != "..." and not shown.endswith("..."):
        assert actual == values.get(shown, shown), f"{actual!r} vs {shown!r}"
    elif not isinstance(shown, str):
        assert actual == shown, f"{actual!r} vs {shown!r}"


def learn(op_id: str | None, answer, values: dict) -> None:
    """Remember the uuids an answer gives, under the names later commands use."""
    if op_id is None:  # the command line: agency, token, risk
        if "token" in answer:
            values["rk_..."] = answer["token"]
        elif "type" in answer:
            values["RISK"] = answer["uuid"]
            for name in RISK_DATA:  # the examples after it start again on this risk profile
                values.pop(name, None)
        else:
            values["AGENCY"] = answer["uuid"]
        return
    if op_id == "pingWebhook":
        values["DELIVERY_UUID"] = answer["delivery"]
        values["EVENT_UUID"] = answer["id"]
    if not op_id.startswith("create"):
        return
    item = answer["data"][0]
    # The first object of a kind is the one the README's later commands name.
    values.setdefault(f"{item['object'].upper()}_UUID", item["uuid"])
    if item["object"] == "driver" and item["relations"]["address"]:
        values.setdefault("ADDRESS_UUID", item["relations"]["address"]["uuid"])
        values.setdefault("UUID1", item["uuid"])
        values.setdefault("UUID2", str(uuid.uuid4()))


def run(command: str, values: dict, env: dict) -> str:
    """Run one command with bash, its placeholders replaced; return its output."""

    def value(match: re.Match) -> str:
        return values.get(match.group(1), match.group(1))

    line = PLACEHOLDER.sub(value, command.replace(CLI, "$RISKAPI_CLI"))
    done = subprocess.run(["bash", "-c", PRELUDE + line], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{command}\nexit {done.returncode}: {done.stderr}{done.stdout}"
    assert done.stdout.strip(), f"{command}\nprinted nothing"
    return done.stdout


def method_of(command: str) -> str:
    words = shlex.split(command, comments=True)
    if "-X" in words:
        return words[words.index("-X") + 1]
    return "POST" if "-d" in words else "GET"


def test_the_readme_commands_run_and_answer_as_shown(server, settings):
    found = readme_commands()
    assert len(found) >= 30 and sum(c.startswith("curl ") for c, _ in found) >= 28
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "RISKAPI_CLI": f"{sys.executable} -m riskapi",
        "API": server.url + "/api/v1",
    }
    values: dict[str, str] = {}
    keys: set[str] = set()  # the Idempotency-Keys already sent
    for command, shown in found:
        quickstart = QUICKSTART.match(command)
        if quickstart:  # the export lines it prints, as eval would set them
            exported = dict(
                shlex.split(line.removeprefix("export "))[0].split("=", 1)
                for line in run(quickstart.group(1), values, env).splitlines()
                if line.startswith("export ")
            )
            assert set(exported) == {"API", "AGENCY", "TOKEN", "RISK", "H", "RISKAPI_API_URL", "RISKAPI_TOKEN"}, exported
            assert exported["H"] == f"Authorization: Bearer {exported['TOKEN']}"
            # What `riskapi listen` and `trigger` read, so that no example passes the token in argv.
            assert (exported["RISKAPI_API_URL"], exported["RISKAPI_TOKEN"]) == (exported["API"], exported["TOKEN"])
            values.update({"AGENCY": exported["AGENCY"], "rk_...": exported["TOKEN"], "RISK": exported["RISK"]})
            with models.db.connection_context():
                CREATED_AGENCIES.append(Agency.get(Agency.uuid == exported["AGENCY"]).id)
            continue
        if command.startswith(CLI):
            answers = [json.loads(line) for line in run(command, values, env).splitlines()]
            answer = answers[-1]
            if " list" in command:  # a list (one JSON line each) finds what the README made
                assert {values["AGENCY"], values["RISK"]} & {found["uuid"] for found in answers}, command
                continue
            learn(None, answer, values)
            if "name" in answer and "type" not in answer:  # the agency: its pending deliveries are settled after the test
                with models.db.connection_context():
                    CREATED_AGENCIES.append(Agency.get(Agency.uuid == answer["uuid"]).id)
        else:
            env["H"] = f"Authorization: Bearer {values['rk_...']}"
            env["RISK"] = values["RISK"]
            command = command.replace(HOST, server.url)
            output = run(command, values, env)
            body, _, status = output.rpartition("\n")
            expanded = command.replace("$API", env["API"]).replace("$RISK", env["RISK"])
            url = next(w for w in shlex.split(expanded, comments=True) if "/api/v1/" in w)
            op_id = operation_of(method_of(command), PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(1)), url))
            op = OPERATIONS[op_id][2]
            expected = "204" if "Precognition: true" in command else success_status(op)
            assert status == expected, f"{command}\n{status} {body}"
            if "-si" in command.split():  # the answer's headers are what the README shows
                headers = body.lower()
                if "Precognition: true" in command:
                    assert "precognition-success: true" in headers, body
                key = re.search(r"Idempotency-Key: ([^']+)'", command)
                if key and key.group(1) in keys:
                    assert "idempotent-replayed: true" in headers, body
                continue
            answer = json.loads(body)
            learn(op_id, answer, values)
            keys.update(re.findall(r"Idempotency-Key: ([^']+)'", command))
        if shown:
            matches(lenient_json(shown), answer, values)
    assert {"DRIVER_UUID", "VEHICLE_UUID", "PREMISE_UUID", "WEBHOOK_UUID", "DELIVERY_UUID"} <= set(values)


def test_serve_greets_with_the_readme_quickstart_command_word_for_word():
    """The command `serve` shows on an empty database is the quick start's line (tee tenant.env included)."""
    with open(README, encoding="utf-8") as handle:
        text = handle.read()
    lines = {line for block in blocks(text, "sh") for line in block.splitlines()}
    shown = [line.strip() for line in greeting(DEFAULT_API_URL, empty=True).splitlines() if "quickstart" in line]
    assert shown == [quickstart_command(DEFAULT_API_URL) + "   " + EXPORTS]
    assert shown[0] in lines
    # On another port it passes the URL on, as the README says: `quickstart --api-url http://127.0.0.1:9000/api/v1`.
    other = quickstart_command("http://127.0.0.1:9000/api/v1")
    assert other == 'eval "$(python3 dev.py riskapi quickstart --api-url http://127.0.0.1:9000/api/v1 | tee tenant.env)"'
    assert QUICKSTART.match(other) and "`quickstart --api-url http://127.0.0.1:9000/api/v1`" in text
    assert "no agency yet" not in greeting(DEFAULT_API_URL, empty=False)


# A token in a command's arguments shows in `ps` (and in the logs of tools that echo commands): the examples rely on
# RISKAPI_TOKEN and RISKAPI_API_URL, which quickstart exports.
TOKEN_IN_ARGV = re.compile(r"--token[= ]")
DOCUMENTS = [README, "clients/README.md", *sorted(glob.glob("docs/*.md"))]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_no_example_passes_a_token_on_the_command_line(document):
    with open(document, encoding="utf-8") as handle:
        text = handle.read()
    code = [line for language in ("sh", "ini", "python", "ts") for block in blocks(text, language) for line in block.splitlines()]
    assert [line for line in code if TOKEN_IN_ARGV.search(line)] == []
    cli = [line for line in code if re.search(r"riskapi (listen|trigger)\b", line)]
    assert all("--api-url" not in line for line in cli), cli
    if document == README:
        assert len(cli) == 2  # listen and trigger, reading RISKAPI_API_URL and RISKAPI_TOKEN


@pytest.fixture
def signed():
    """A body signed both ways with a fresh secret, as a worker sends it."""
    secret = signing.generate_secret()
    body = b'{"id": "e1", "event": "webhook.ping"}'
    msg_id, timestamp = str(uuid.uuid4()), int(time.time())
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signing.standard_signatures([secret], msg_id, timestamp, body),
        "Service-Signature": signing.sign(secret, body),
    }
    return secret, body, headers


@pytest.mark.parametrize("index", [0, 1])
def test_the_readme_verification_snippets_accept_a_signed_body_and_refuse_a_forged_one(signed, index):
    with open(README, encoding="utf-8") as handle:
        snippets = [b for b in blocks(handle.read(), "python") if "def handle" in b]
    assert len(snippets) == 2
    scope: dict = {}
    exec(snippets[index], scope)  # noqa: S102 (the README's own example code)
    secret, body, headers = signed
    assert scope["handle"](body, headers, secret) is None  # verified: it goes on to `...`
    assert scope["handle"](body + b" ", headers, secret) == 401
