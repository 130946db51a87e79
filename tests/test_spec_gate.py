"""Each rule of the breaking-change gate on a pair of small specs: the break is named, benign edits pass."""

import copy

import pytest

from tools import spec_changelog, spec_diff, spec_gate


def base() -> dict:
    """A small spec: a list with a filter, sort and include; a create; an event catalogue and a callback."""
    item = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "maxLength": 50},
            "age": {"type": "integer", "minimum": 0, "nullable": True},
            "kind": {"type": "string", "enum": ["a", "b"]},
        },
    }
    thing = {
        "type": "object",
        "required": ["id", "name", "kind"],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "name": {"type": "string"},
            "kind": {"$ref": "#/components/schemas/Kind"},
        },
    }
    ok = lambda schema: {"description": "ok", "content": {"application/json": {"schema": schema}}}  # noqa: E731
    params = [
        {"name": "filter[name]", "in": "query", "schema": {"type": "string"}},
        {"name": "sort", "in": "query", "schema": {"type": "array", "items": {"type": "string", "enum": ["name", "-name"]}}},
        {"name": "include", "in": "query", "schema": {"type": "array", "items": {"type": "string", "enum": ["owner"]}}},
    ]
    callback = {
        "{$request.body#/url}": {
            "post": {
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
                "responses": {"200": {"description": "ok"}},
            }
        }
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1.0.0"},
        "paths": {
            "/things": {
                "get": {
                    "operationId": "listThings",
                    "parameters": params,
                    "responses": {"200": ok({"type": "array", "items": {"$ref": "#/components/schemas/Thing"}})},
                },
                "post": {
                    "operationId": "createThings",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ThingCreate"}}},
                    },
                    "responses": {"201": ok({"$ref": "#/components/schemas/Thing"})},
                    "callbacks": {"event": callback},
                },
            }
        },
        "components": {
            "schemas": {
                "ThingCreate": item,
                "Thing": thing,
                "Kind": {"type": "string", "enum": ["a", "b"]},
                "Event": {
                    "type": "string",
                    "enum": ["thing.created"],
                    "x-event-types": {
                        "thing.created": {
                            "description": "d",
                            "payload": {
                                "allOf": [
                                    {"$ref": "#/components/schemas/Thing"},
                                    {"type": "object", "properties": {"risk": {"type": "string"}}},
                                ]
                            },
                        }
                    },
                },
            }
        },
    }


SCHEMAS = ("components", "schemas")


def edit(path: tuple, value=None, delete: bool = False) -> dict:
    """Return a copy of the base spec with the value at `path` set (or deleted)."""
    doc = copy.deepcopy(base())
    node = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def breaks(new: dict) -> list[str]:
    return spec_diff.compare(base(), new).breaking()


CREATE = (*SCHEMAS, "ThingCreate", "properties")
THING = (*SCHEMAS, "Thing", "properties")
LIST_PARAMS = ("paths", "/things", "get", "parameters")


def without_param(name: str) -> dict:
    doc = base()
    doc["paths"]["/things"]["get"]["parameters"] = [p for p in doc["paths"]["/things"]["get"]["parameters"] if p["name"] != name]
    return doc


def with_sort(values: list) -> dict:
    doc = base()
    doc["paths"]["/things"]["get"]["parameters"][1]["schema"]["items"]["enum"] = values
    return doc


PAYLOAD_RISK = (*SCHEMAS, "Event", "x-event-types", "thing.created", "payload", "allOf", 1, "properties", "risk")
CASES = {
    "operation removed": (edit(("paths", "/things", "post"), delete=True), "operation removed: createThings (POST /things)"),
    "parameter removed": (without_param("include"), "parameter removed from a request: `include` (query)"),
    "filter removed": (without_param("filter[name]"), "filter removed from a request: `name` (query)"),
    "sort removed": (with_sort(["name"]), "sort removed from a request: '-name'"),
    "request property removed": (edit((*CREATE, "age"), delete=True), "request property removed: `age`"),
    "request enum value removed": (edit((*CREATE, "kind", "enum"), ["a"]), "enum value removed from a request: 'b'"),
    "request property newly required": (
        edit((*SCHEMAS, "ThingCreate", "required"), ["name", "age"]),
        "request property newly required: `age`",
    ),
    "new required request property": (
        edit(
            (*SCHEMAS, "ThingCreate"),
            {
                **base()["components"]["schemas"]["ThingCreate"],
                "required": ["name", "x"],
                "properties": {**base()["components"]["schemas"]["ThingCreate"]["properties"], "x": {"type": "string"}},
            },
        ),
        "new required request property: `x`",
    ),
    "request type narrowed": (edit((*CREATE, "age", "type"), "string"), "request type narrowed: integer → string"),
    "request format narrowed": (edit((*CREATE, "name", "format"), "email"), "request format narrowed: None → 'email'"),
    "request pattern narrowed": (edit((*CREATE, "name", "pattern"), "^[a-z]+$"), "request pattern narrowed"),
    "request length narrowed": (edit((*CREATE, "name", "maxLength"), 10), "request maxLength narrowed: 50 → 10"),
    "request range narrowed": (edit((*CREATE, "age", "minimum"), 18), "request minimum narrowed: 0 → 18"),
    "request null refused": (edit((*CREATE, "age", "nullable"), False), "request no longer accepts null: `age`"),
    "response property removed": (edit((*THING, "name"), delete=True), "response property removed: `name`"),
    "response property made optional": (
        edit((*SCHEMAS, "Thing", "required"), ["id", "kind"]),
        "response property made optional: `name`",
    ),
    "response property made nullable": (edit((*THING, "name", "nullable"), True), "response made nullable: `name`"),
    "response retyped": (edit((*THING, "name", "type"), "integer"), "response retyped: string → integer"),
    "response format changed": (edit((*THING, "id", "format"), "uri"), "response retyped (format): uuid → uri"),
    "response enum widened": (edit((*SCHEMAS, "Kind", "enum"), ["a", "b", "c"]), "response enum widened: 'c'"),
    "success status changed": (
        edit(("paths", "/things", "post", "responses"), {"200": base()["paths"]["/things"]["post"]["responses"]["201"]}),
        "success status changed: createThings: 201 → 200",
    ),
    "event removed": (edit((*SCHEMAS, "Event", "x-event-types", "thing.created"), delete=True), "event removed: `thing.created`"),
    "event payload retyped": (edit((*PAYLOAD_RISK, "type"), "integer"), "response retyped: string → integer"),
    "callback removed": (edit(("paths", "/things", "post", "callbacks"), delete=True), "callback removed: createThings event"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_break_is_named(name):
    new, expected = CASES[name]
    found = breaks(new)
    assert any(line.startswith(expected) for line in found), found


def test_a_break_names_its_place_and_where_it_shows():
    (line,) = breaks(edit((*THING, "name"), delete=True))
    assert "at `#/components/schemas/Thing/properties/name`" in line
    assert (
        "listThings 200 `[].name`" in line
        and "createThings 201 `name`" in line
        and "createThings callback event body `name`" in line
    )
    assert line.endswith("; and 1 more)")  # the event's payload, the fifth place


def test_event_payload_change_inside_allof_is_named_at_the_payload():
    (line,) = breaks(edit((*PAYLOAD_RISK, "type"), "integer"))
    assert "x-event-types/thing.created/payload/allOf/1/properties/risk" in line and "event thing.created" in line


OPEN = edit((*SCHEMAS, "Kind"), {"type": "string", "enum": ["a", "b", "c"], "x-open-enum": True})
BENIGN = {
    "optional request property added": edit((*CREATE, "nickname"), {"type": "string"}),
    "description reworded": edit((*CREATE, "name", "description"), "Another wording."),
    "new operation": edit(("paths", "/other"), {"get": {"operationId": "other", "responses": {"200": {"description": "ok"}}}}),
    "new event": edit((*SCHEMAS, "Event", "x-event-types", "thing.gone"), {"description": "d", "payload": {"type": "object"}}),
    "response property added": edit((*THING, "extra"), {"type": "string"}),
    "request enum widened": edit((*CREATE, "kind", "enum"), ["a", "b", "c"]),
    "request bound loosened": edit((*CREATE, "name", "maxLength"), 100),
    "response enum widened where clients accept unknown values": OPEN,
    "filter added": edit(
        LIST_PARAMS,
        [*base()["paths"]["/things"]["get"]["parameters"], {"name": "filter[kind]", "in": "query", "schema": {"type": "string"}}],
    ),
    "pattern alternative added": None,
    "request format widened (uri to iri)": None,
}


def with_patterns(old: str, new: str) -> tuple[dict, dict]:
    before, after = edit((*CREATE, "name", "pattern"), old), edit((*CREATE, "name", "pattern"), new)
    return before, after


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_benign_edits_break_nothing(name):
    if name == "pattern alternative added":
        before, after = with_patterns("^(a|b)(,(a|b))*$", "^(a|b|c)(,(a|b|c))*$")
        assert spec_diff.compare(before, after).breaking() == []
        assert spec_diff.compare(after, before).breaking() != []
        return
    if name == "request format widened (uri to iri)":
        before, after = edit((*CREATE, "name", "format"), "uri"), edit((*CREATE, "name", "format"), "iri")
        assert spec_diff.compare(before, after).breaking() == []
        assert spec_diff.compare(after, before).breaking() != []  # iri to uri narrows
        return
    changes = spec_diff.compare(base(), BENIGN[name])
    assert changes.breaking() == []


def test_benign_additions_are_listed_as_added():
    changes = spec_diff.compare(base(), BENIGN["new event"])
    assert [line.split(" at ")[0] for line in changes.of_kind("added")] == ["event added: `thing.gone`"]


RELEASED = [("1.0.0", base())]


def changelog_for(doc: dict) -> str:
    return spec_changelog.render(doc, RELEASED)


def test_a_break_fails_the_gate_until_major_is_raised_and_the_changelog_records_it():
    broken = edit((*THING, "name"), delete=True)
    problems = spec_gate.check(broken, RELEASED, changelog_for(base()))
    assert problems[0].startswith("breaking change (against 1.0.0): response property removed: `name`")
    assert "raise info.version to 2.0.0" in problems[1]
    broken["info"]["version"] = "1.1.0"
    assert any("response property removed" in p for p in spec_gate.check(broken, RELEASED, changelog_for(broken)))
    broken["info"]["version"] = "2.0.0"
    # The policy is met; the changelog is what must still name the break.
    problems = spec_gate.check(broken, RELEASED, changelog_for(base()))
    assert problems[0].startswith("breaking change not in spec/CHANGELOG.md (against 1.0.0): response property removed: `name`")
    assert problems[1:] == ["spec/CHANGELOG.md is not current: run `python -m tools.spec_changelog`"]
    text = changelog_for(broken)
    assert "## 2.0.0 (not released yet)\n\n### Breaking\n\n- response property removed: `name`" in text
    assert spec_gate.check(broken, RELEASED, text) == []


def test_benign_edits_pass_with_the_version_as_it_is():
    for doc in (d for d in BENIGN.values() if d is not None):
        assert spec_gate.check(doc, RELEASED, changelog_for(doc)) == []


def test_additions_raise_at_least_minor_once_the_version_moves():
    doc = copy.deepcopy(BENIGN["new operation"])
    doc["info"]["version"] = "1.0.1"
    assert spec_gate.check(doc, RELEASED, changelog_for(doc)) == [
        "info.version 1.0.1: additions and deprecations raise at least MINOR"
    ]
    doc["info"]["version"] = "1.1.0"
    assert spec_gate.check(doc, RELEASED, changelog_for(doc)) == []
    assert "## 1.1.0 (not released yet)\n\n### Added\n\n- operation added: other (GET /other)" in changelog_for(doc)


def test_the_version_never_goes_down():
    doc = base()
    doc["info"]["version"] = "0.9.0"
    assert spec_gate.check(doc, RELEASED, changelog_for(doc)) == ["info.version 0.9.0 is below the last release, 1.0.0"]
