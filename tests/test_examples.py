"""Every example of the spec is valid against its schema, and every request example runs.

Request and response examples are checked with the validator the app itself uses
(`riskapi.validation.SchemaValidator`) against the spec's resolved schemas; each
request example is then replayed against the running app for a fresh tenant, and
must get the operation's documented success status.
"""

import re

import pytest

from riskapi import spec
from riskapi.validation import SchemaValidator
from tests.conftest import items

METHODS = ("get", "put", "post", "patch", "delete")


def operations():
    """Yield (path, method, operation) for every operation of the resolved spec."""
    for path, item in spec.resolved()["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def media_examples(media: dict):
    """Yield (name, value) for the example(s) of one media type object."""
    if "example" in media:
        yield "example", media["example"]
    for name, example in (media.get("examples") or {}).items():
        if "value" in example:
            yield name, example["value"]


def all_examples():
    """Yield (id, schema, value) for every request and response example."""
    for _path, _method, op in operations():
        body = (op.get("requestBody") or {}).get("content", {})
        for _mime, media in body.items():
            for name, value in media_examples(media):
                yield f"{op['operationId']}:request:{name}", media["schema"], value
        for status, response in op.get("responses", {}).items():
            for _mime, media in (response.get("content") or {}).items():
                for name, value in media_examples(media):
                    yield f"{op['operationId']}:{status}:{name}", media["schema"], value


def request_examples():
    """Yield (id, path, method, value, success status) for every request example."""
    for path, method, op in operations():
        body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {})
        # 204 is the Precognition dry-run answer when the operation documents another 2xx.
        statuses = [int(s) for s in op["responses"] if s.startswith("2")]
        success = min([s for s in statuses if s != 204] or statuses)
        for name, value in media_examples(body):
            yield f"{op['operationId']}:{name}", path, method, value, success


EXAMPLES = list(all_examples())
REQUESTS = list(request_examples())


def test_there_are_examples():
    assert len(EXAMPLES) >= len(REQUESTS) > 0


@pytest.mark.parametrize("name,schema,value", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_is_valid(name, schema, value):
    assert SchemaValidator(schema).errors(value) == {}


@pytest.fixture
def objects(client, tenant):
    """Path parameters that exist for the tenant: its risk profile, a webhook and a delivery."""
    hook = {"type": "custom", "url": "https://hooks.example.com/riskapi", "events": ["driver.created"]}
    response = client.post("/webhooks", json=items("webhook", hook), headers=tenant.headers)
    assert response.status_code == 201, response.text
    webhook = response.json()["data"][0]["uuid"]
    delivery = client.post(f"/webhooks/{webhook}/ping", headers=tenant.headers).json()["delivery"]
    return {"risk": tenant.risk, "webhook": webhook, "delivery": delivery}


@pytest.mark.parametrize("name,path,method,value,success", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_request_example_runs(client, tenant, objects, name, path, method, value, success):
    url = re.sub(r"\{(\w+)\}", lambda m: objects[m.group(1)], path)
    response = client.request(method.upper(), url, json=value, headers=tenant.headers)
    assert response.status_code == success, response.text
