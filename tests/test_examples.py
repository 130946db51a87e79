"""Every operation documents its examples; every example is valid and every one replays.

Each operation has a request example (when it takes a body), an example of its
success response and one of its 422. All are checked with the validator the app
itself uses (`services.schema_validation.SchemaValidator`) against the spec's resolved
schemas. Then the examples are replayed in the order of a story (create, list,
update, delete; subscribe, ping, redeliver) against the running app for a fresh
tenant: every request example must get exactly its documented response, up to
timestamps, secrets and the UUIDs the server picks. Example UUIDs stand for the
server's, one to one, so an update example refers to what the create example made.
"""

import json
import re

import pytest

import spec
from services.schema_validation import SchemaValidator

METHODS = ("get", "put", "post", "patch", "delete")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
SECRET = re.compile(r"^whsec_[A-Za-z0-9+/]+=*$")
BASE = "https://riskapi.example.com/api/v1"

# The story, in order; a list example was taken with this query string.
STORY = {
    "healthz": "",
    "readyz": "",
    "listRisks": "",
    "createPremises": "",
    "createBuildings": "",
    "createVehicles": "",
    "createDrivers": "",
    "listDrivers": "per_page=10&include=address&sort=last_name",
    "listVehicles": "per_page=10",
    "listPremises": "per_page=10",
    "listBuildings": "per_page=10",
    "updateRiskData": "",
    "overrideRiskData": "",
    "deleteRiskData": "",
    "createWebhooks": "",
    "listWebhooks": "",
    "updateWebhooks": "",
    "rotateSecret": "",
    "pingWebhook": "",
    "listDeliveries": "",
    "getDelivery": "",
    "listEvents": "",
    "getEvent": "",
    "redeliver": "",
    "recoverDeliveries": "",
    "listEventTypes": "filter[name]=form.completed,webhook.ping",
    "publishEvent": "",
    "deleteWebhooks": "",
    "createListenSession": "",
    "streamListenSession": "timeout=0",  # what waits now, then the end of the stream
    "triggerEvent": "",
    "recordListenAttempt": "",
}


def operations():
    """Yield (path, method, operation, path parameters) for every operation of the resolved spec."""
    for path, item in spec.resolved()["paths"].items():
        for method in METHODS:
            if method in item:
                op = item[method]
                params = [p for p in item.get("parameters", []) + op.get("parameters", []) if p["in"] == "path"]
                yield path, method, op, params


OPERATIONS = {op["operationId"]: (path, method, op, params) for path, method, op, params in operations()}


def one_example(media: dict):
    """Return the example of a media type object (`example`, or the first of `examples`), or None."""
    if "example" in media:
        return media["example"]
    for example in (media.get("examples") or {}).values():
        return example.get("value")
    return None


def success_status(op: dict) -> str:
    """Return the documented success status (204 is only the dry-run answer when there is another 2xx)."""
    statuses = [s for s in op["responses"] if s.startswith("2")]
    return min([s for s in statuses if s != "204"] or statuses)


def all_examples():
    """Yield (id, schema, value) for every request and response example."""
    for op_id, (_path, _method, op, _params) in OPERATIONS.items():
        for _mime, media in (op.get("requestBody") or {}).get("content", {}).items():
            if one_example(media) is not None:
                yield f"{op_id}:request", media["schema"], one_example(media)
        for status, response in op.get("responses", {}).items():
            for _mime, media in (response.get("content") or {}).items():
                if one_example(media) is not None:
                    yield f"{op_id}:{status}", media["schema"], one_example(media)


EXAMPLES = list(all_examples())


@pytest.mark.parametrize("op_id", sorted(OPERATIONS))
def test_operation_has_examples(op_id):
    _path, _method, op, params = OPERATIONS[op_id]
    names = {name for name, _schema, _value in EXAMPLES}
    if "requestBody" in op:
        assert f"{op_id}:request" in names
    assert f"{op_id}:{success_status(op)}" in names
    assert f"{op_id}:422" in names
    for param in params:
        assert "example" in param, f"path parameter {param['name']} has no example"
    assert op_id in STORY, "every operation is replayed in the story"


@pytest.mark.parametrize("name,schema,value", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_is_valid(name, schema, value):
    assert SchemaValidator(schema).errors(value) == {}


class Uuids:
    """A one-to-one map from the examples' UUIDs to the server's."""

    def __init__(self):
        self.real = {}

    def bind(self, example: str, real: str, where: str) -> None:
        if example in self.real:
            assert self.real[example] == real, f"{where}: {example} stands for {self.real[example]}, got {real}"
        else:
            assert real not in self.real.values(), f"{where}: {real} already stands for another example UUID"
            self.real[example] = real

    def apply(self, value):
        """Return the value with every example UUID that is bound replaced by the server's."""
        if isinstance(value, dict):
            return {key: self.apply(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.apply(item) for item in value]
        if isinstance(value, str):
            return UUID.sub(lambda m: self.real.get(m.group(0), m.group(0)), value)
        return value


def compare(expected, actual, uuids: Uuids, where: str) -> None:
    """Assert that a response matches its example, binding UUIDs and ignoring timestamps and secrets."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), f"{where}: keys {actual!r} vs {list(expected)}"
        for key in expected:
            compare(expected[key], actual[key], uuids, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: {actual!r} vs {expected!r}"
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            compare(want, got, uuids, f"{where}.{index}")
    elif isinstance(expected, str) and UUID.fullmatch(expected):
        assert isinstance(actual, str) and UUID.fullmatch(actual), f"{where}: {actual!r} is not a UUID"
        uuids.bind(expected, actual, where)
    elif isinstance(expected, str) and (MOMENT.match(expected) or SECRET.match(expected)):
        pattern = MOMENT if MOMENT.match(expected) else SECRET
        assert isinstance(actual, str) and pattern.match(actual), f"{where}: {actual!r} vs {expected!r}"
    elif isinstance(expected, str) and expected.startswith("{"):
        # A JSON document as a string (a delivery's body): compared as the document it is.
        assert isinstance(actual, str), f"{where}: {actual!r} vs {expected!r}"
        compare(json.loads(expected), json.loads(actual), uuids, where)
    elif isinstance(expected, str):
        assert actual == uuids.apply(expected), f"{where}: {actual!r} vs {expected!r}"
    else:
        assert actual == expected and type(actual) is type(expected), f"{where}: {actual!r} vs {expected!r}"


def test_story_replays_every_example(server, client, tenant, settings):
    uuids = Uuids()
    uuids.bind(OPERATIONS["listDrivers"][3][0]["example"], tenant.risk, "the risk profile")
    for op_id, query in STORY.items():
        path, method, op, params = OPERATIONS[op_id]
        for param in params:
            path = path.replace(f"{{{param['name']}}}", uuids.apply(param["example"]))
        unbound = [u for u in UUID.findall(path) if u not in uuids.real.values()]
        assert not unbound, f"{op_id}: path parameter examples {unbound} stand for nothing made earlier in the story"
        media = (op.get("requestBody") or {}).get("content", {}).get("application/json")
        body = uuids.apply(one_example(media)) if media else None
        response = client.request(method.upper(), path + ("?" + query if query else ""), json=body, headers=tenant.headers)
        status = success_status(op)
        assert str(response.status_code) == status, f"{op_id}: {response.status_code} {response.text}"
        content = op["responses"][status]["content"]
        if "text/event-stream" in content:  # compared event by event, each event's data as JSON
            # The example is the stream's first event (the schema describes each event): compare it with the first sent.
            example = one_example(content["text/event-stream"])
            compare([[example["event"], json.loads(example["data"])]], events(response.text)[:1], uuids, op_id)
            continue
        expected = one_example(content["application/json"])
        if op_id == "readyz" and not settings.redis_url:
            # The example shows a host with REDIS_URL; this test server may run without one.
            expected = {**expected, "checks": {**expected["checks"], "redis": "unconfigured"}}
        actual = spec_json(response.text, server.url)
        compare(expected, actual, uuids, op_id)


def events(text: str) -> list:
    """Parse server-sent events into [event name, data as JSON] pairs; comment lines are left out."""
    found = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if fields:
            found.append([fields["event"], json.loads(fields["data"])])
    return found


def spec_json(text: str, url: str):
    """Parse a response as the examples show it: on the documented host."""
    return json.loads(text.replace(url + "/api/v1", BASE))
