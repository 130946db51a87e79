"""Check every example of the document against its schema: requests, responses, parameters, headers, events.

OpenAPI 3.0 schemas become JSON Schema draft 4 (their base) with `nullable` read as the service
reads it (services.schema_validation: null passes any schema marked nullable), and the
formats the service checks. A callback example that names an event of `x-event-types` must also
carry a `data` valid against that event's payload, and every event has such an example.
"""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from jsonschema import Draft4Validator, FormatChecker

from tools import spec_doc

_US_DATE = re.compile(r"^\d{2}/\d{2}/\d{4}$")
FORMATS = FormatChecker(formats=())


@FORMATS.checks("date")
def _date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        if _US_DATE.match(value):
            return bool(datetime.datetime.strptime(value, "%m/%d/%Y"))
        return len(value) == 10 and bool(datetime.date.fromisoformat(value))
    except ValueError:
        return False


@FORMATS.checks("date-time")
def _date_time(value: object) -> bool:
    try:
        return not isinstance(value, str) or bool(datetime.datetime.fromisoformat(value))
    except ValueError:
        return False


@FORMATS.checks("uuid")
def _uuid(value: object) -> bool:
    try:
        return not isinstance(value, str) or (len(value) == 36 and bool(uuid.UUID(value)))
    except ValueError:
        return False


@FORMATS.checks("uri")
def _uri(value: object) -> bool:
    return not isinstance(value, str) or (urlsplit(value).scheme in {"http", "https"} and bool(urlsplit(value).hostname))


def json_schema(doc: dict, schema: Any, depth: int = 0) -> Any:
    """Return an OpenAPI 3.0 schema as plain JSON Schema: references inlined, `nullable` as a null alternative."""
    schema, _ = spec_doc.deref(doc, schema, "#")
    if depth > 64:
        raise ValueError("schema nested deeper than 64 levels (a $ref cycle?)")
    if isinstance(schema, list):
        return [json_schema(doc, item, depth + 1) for item in schema]
    if not isinstance(schema, dict):
        return schema
    plain = {}
    for key, value in schema.items():
        if key in spec_doc.SCHEMA_MAPS and isinstance(value, dict):
            plain[key] = {name: json_schema(doc, sub, depth + 1) for name, sub in value.items()}
        elif key in (*spec_doc.SCHEMA_LISTS, *spec_doc.SCHEMA_ONES, "items"):
            plain[key] = json_schema(doc, value, depth + 1)
        elif key not in {"nullable", "example", "discriminator", "xml", "externalDocs"} and not key.startswith("x-"):
            plain[key] = value
    if schema.get("nullable") is not True:
        return plain
    if isinstance(plain.get("type"), str):
        # Beside `type`, null joins the types (and the enum), so errors about the value stay precise.
        plain["type"] = [plain["type"], "null"]
        if isinstance(plain.get("enum"), list) and None not in plain["enum"]:
            plain["enum"] = [*plain["enum"], None]
        return plain
    return {"anyOf": [{"type": "null"}, plain]}


def errors(doc: dict, schema: Any, value: Any) -> list[str]:
    """Return the validation errors of a value against an OpenAPI schema of the document."""
    validator = Draft4Validator(json_schema(doc, schema), format_checker=FORMATS)
    found = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in found]


def _named(doc: dict, owner: dict) -> Iterator[tuple[str, Any]]:
    """Yield (name, value) of an owner's `example` and each of its `examples` (Example Objects, $refs followed)."""
    if "example" in owner:
        yield "example", owner["example"]
    for name, example in (owner.get("examples") or {}).items():
        example, _ = spec_doc.deref(doc, example, "#")
        if isinstance(example, dict) and "value" in example:
            yield f"examples/{spec_doc.escape(name)}", example["value"]


def examples(doc: dict) -> Iterator[tuple[str, Any, Any]]:
    """Yield (pointer, schema, value) of every example of a media type, parameter, header or schema object."""
    stack: list[tuple[str, Any]] = [("#", doc)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, list):
            stack.extend((f"{pointer}/{index}", value) for index, value in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        # A media type, parameter or header carries `schema` beside its examples; a schema carries its own.
        owner = "schema" in node and isinstance(node["schema"], dict)
        is_schema = not owner and ("type" in node or "properties" in node) and "example" in node
        if owner or is_schema:
            for name, value in _named(doc, node):
                yield f"{pointer}/{name}", node["schema"] if owner else node, value
        for key, value in node.items():
            if key not in {"example", "examples"}:
                stack.append((f"{pointer}/{spec_doc.escape(key)}", value))


def event_examples(doc: dict) -> Iterator[str]:
    """Yield a problem per event payload example that is invalid, and per event with no example."""
    catalogues = list(spec_doc.event_types(doc))
    shown: set[str] = set()
    for path, method, op, _shared in spec_doc.operations(doc):
        for name, callback in (op.get("callbacks") or {}).items():
            for expression, item in callback.items():
                for cb_method, cb_op in item.items() if isinstance(item, dict) else ():
                    body = (cb_op.get("requestBody") or {}) if isinstance(cb_op, dict) else {}
                    for mime, media in (body.get("content") or {}).items():
                        where = f"{method.upper()} {path} callback {name} {expression} {cb_method} {mime}"
                        for example, value in _named(doc, media):
                            yield from _event_payload(doc, catalogues, value, f"{where} {example}", shown)
    for pointer, catalogue in catalogues:
        for event in sorted(set(catalogue) - shown):
            yield f"{pointer}/{spec_doc.escape(event)}: no callback example delivers this event"


def _event_payload(doc: dict, catalogues: list, value: Any, where: str, shown: set[str]) -> Iterator[str]:
    if not isinstance(value, dict):
        return
    for _pointer, catalogue in catalogues:
        event = catalogue.get(value.get("event"))
        if isinstance(event, dict) and "payload" in event:
            shown.add(value["event"])
            for error in errors(doc, event["payload"], value.get("data")):
                yield f"{where}: data of {value['event']}: {error}"


def check(doc: dict) -> list[str]:
    """Return a problem per example invalid against its schema."""
    problems = []
    for pointer, schema, value in examples(doc):
        problems.extend(f"{pointer}: {error}" for error in errors(doc, schema, value))
    problems.extend(event_examples(doc))
    return problems
