"""tools.spec_check: unknown schema keywords anywhere (event payloads and examples' schemas too) and invalid examples."""

import copy
import pathlib

import pytest

from tools import spec_check, spec_doc, spec_examples, spec_keywords

SPEC = spec_doc.load(pathlib.Path(spec_check.SPEC))


@pytest.fixture
def doc():
    return copy.deepcopy(SPEC)


WHERE = "#/paths/~1a/get/responses/200/content/application~1json/schema"


def small(schema: dict, example=None) -> dict:
    """A one-operation document answering `schema` (with `example`)."""
    media = {"schema": schema, **({"example": example} if example is not None else {})}
    ok = {"200": {"description": "ok", "content": {"application/json": media}}}
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1.0.0"}, "paths": {"/a": {"get": {"responses": ok}}}}


def test_the_spec_has_no_problem():
    assert spec_check.problems(SPEC) == []


def test_the_unquoted_comma_slip_is_named_with_its_path(doc):
    payload = doc["components"]["schemas"]["EventName"]["x-event-types"]["form.completed"]["payload"]
    payload["delivered as given."] = None
    # Both published events share the payload (a YAML anchor), as they did when the slip landed.
    assert spec_keywords.check(doc) == [
        f"#/components/schemas/EventName/x-event-types/{event}/payload: unknown schema keyword 'delivered as given.'"
        for event in ("form.completed", "signature_packet.completed")
    ]


def test_an_unknown_keyword_inside_an_event_payload_is_named(doc):
    ping = doc["components"]["schemas"]["EventName"]["x-event-types"]["webhook.ping"]["payload"]
    ping["properties"]["uuid"]["requierd"] = True
    (problem,) = spec_keywords.check(doc)
    assert problem.endswith("webhook.ping/payload/properties/uuid: unknown schema keyword 'requierd'")


def test_a_schema_shown_in_an_example_is_checked(doc):
    example = doc["paths"]["/event-types"]["get"]["responses"]["200"]["content"]["application/json"]["example"]
    example["data"][1]["schema"]["properties"]["uuid"]["nulable"] = True
    (problem,) = spec_keywords.check(doc)
    assert "/example/data/1/schema/properties/uuid: unknown schema keyword 'nulable'" in problem


def test_extensions_and_the_openapi_keywords_of_the_version_pass():
    schema = {"type": "string", "nullable": True, "example": "a", "deprecated": True, "x-anything": 1, "readOnly": True}
    assert spec_keywords.check(small(schema)) == []
    in_31 = {**small({"type": ["string", "null"], "examples": ["a"], "const": "a"}), "openapi": "3.1.0"}
    assert spec_keywords.check(in_31) == []
    assert spec_keywords.check(small({"type": "string", "const": "a"})) == [f"{WHERE}: unknown schema keyword 'const'"]


def test_a_sibling_of_ref_is_reported_in_30():
    document = small({"$ref": "#/components/schemas/X", "nullable": True})
    document["components"] = {"schemas": {"X": {"type": "string"}}}
    assert spec_keywords.check(document) == [f"{WHERE}: nullable beside $ref (ignored by OpenAPI 3.0: wrap the $ref in allOf)"]


def test_an_invalid_example_is_named(doc):
    media = doc["paths"]["/risks/{risk}/data/drivers"]["post"]["requestBody"]["content"]["application/json"]
    media["example"]["data"][0]["data"]["percent_use"] = 101
    (problem,) = spec_examples.check(doc)
    where = "#/paths/~1risks~1{risk}~1data~1drivers/post/requestBody/content/application~1json/example"
    assert problem.startswith(f"{where}: data/0/data/percent_use")


def test_nullable_and_formats_are_read_as_the_service_reads_them():
    schema = {"type": "object", "properties": {"d": {"type": "string", "format": "date", "nullable": True}}}
    assert spec_examples.errors({}, schema, {"d": None}) == []
    assert spec_examples.errors({}, schema, {"d": "04/12/1990"}) == []
    assert spec_examples.errors({}, schema, {"d": "1990-13-01"}) == ["d: '1990-13-01' is not a 'date'"]


def test_a_callback_example_whose_data_breaks_its_event_payload_is_named(doc):
    callback = doc["paths"]["/webhooks"]["post"]["callbacks"]["event"]
    (item,) = callback.values()
    examples = item["post"]["requestBody"]["content"]["application/json"]["examples"]
    ping = next(e["value"] for e in examples.values() if e["value"]["event"] == "webhook.ping")
    ping["data"]["uuid"] = "not-a-uuid"
    problems = spec_examples.check(doc)
    assert len(problems) == 1 and "data of webhook.ping: uuid: 'not-a-uuid' is not a 'uuid'" in problems[0]
