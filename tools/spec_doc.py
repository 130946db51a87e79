"""Read an OpenAPI document as Connexion does and walk its parts: operations, schema objects, event payloads.

The spec tools (tools.spec_check and the modules it runs) read the YAML with PyYAML alone, so
that `tox -e spec` needs neither the service nor Connexion installed.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator
from typing import Any

import yaml

# A list's filter is a query parameter named `filter[<name>]` (spatie's form; spec/__init__.py reads it so too).
FILTER = re.compile(r"^filter\[([^\[\]]+)\]$")
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Where a schema object holds other schema objects (OpenAPI 3.0's subset, then JSON Schema 2020-12's own).
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SCHEMA_LISTS = ("allOf", "oneOf", "anyOf", "prefixItems")
SCHEMA_ONES = ("not", "additionalProperties", "contains", "propertyNames", "if", "then", "else")
SCHEMA_ONES_31 = ("unevaluatedItems", "unevaluatedProperties", "contentSchema")


class _Loader(yaml.SafeLoader):
    """Connexion's loader (connexion.json_schema.ExtendedSafeLoader): every mapping key becomes a string."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:  # type: ignore[override]
        return {str(key): value for key, value in super().construct_mapping(node, deep).items()}


def load(source: str | pathlib.Path) -> dict:
    """Return the document of a YAML file (a path) or of YAML text."""
    text = pathlib.Path(source).read_text(encoding="utf-8") if isinstance(source, pathlib.Path) else source
    return yaml.load(text, _Loader)


def escape(key: str) -> str:
    """Escape a key for a JSON pointer (RFC 6901)."""
    return str(key).replace("~", "~0").replace("/", "~1")


def get(doc: dict, pointer: str) -> Any:
    """Return the value at a local JSON pointer (`#/components/schemas/X`)."""
    value: Any = doc
    for part in pointer.lstrip("#").split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def deref(doc: dict, node: Any, pointer: str) -> tuple[Any, str]:
    """Follow a chain of local `$ref`s; return the target and its pointer."""
    seen = set()
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#"):
        pointer = node["$ref"]
        if pointer in seen:
            raise ValueError(f"$ref cycle at {pointer}")
        seen.add(pointer)
        node = get(doc, pointer)
    return node, pointer


def version(doc: dict) -> tuple[int, ...]:
    """Return `info.version` as a tuple of integers (`1.2.0` -> (1, 2, 0))."""
    return tuple(int(part) for part in str(doc["info"]["version"]).split("-")[0].split("."))


def operations(doc: dict) -> Iterator[tuple[str, str, dict, list]]:
    """Yield (path, method, operation, path-level parameters) of every operation under `paths`."""
    for path, item in (doc.get("paths") or {}).items():
        item, _ = deref(doc, item, f"#/paths/{escape(path)}")
        for method in METHODS:
            if isinstance(item.get(method), dict):
                yield path, method, item[method], item.get("parameters") or []


def event_types(doc: dict) -> Iterator[tuple[str, dict]]:
    """Yield (pointer, the mapping) of every `x-event-types` extension of the document."""
    stack: list[tuple[str, Any]] = [("#", doc)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "x-event-types" and isinstance(value, dict):
                    yield f"{pointer}/{key}", value
                stack.append((f"{pointer}/{escape(key)}", value))
        elif isinstance(node, list):
            stack.extend((f"{pointer}/{index}", value) for index, value in enumerate(node))


def _media(pointer: str, media: dict) -> Iterator[tuple[str, dict]]:
    if isinstance(media.get("schema"), dict):
        yield from schemas_in(f"{pointer}/schema", media["schema"])
    for name, encoding in (media.get("encoding") or {}).items():
        for header, value in (encoding.get("headers") or {}).items():
            yield from _parameter(f"{pointer}/encoding/{escape(name)}/headers/{escape(header)}", value)


def _parameter(pointer: str, param: dict) -> Iterator[tuple[str, dict]]:
    """A parameter or a header: a schema, or content."""
    if isinstance(param.get("schema"), dict):
        yield from schemas_in(f"{pointer}/schema", param["schema"])
    for mime, media in (param.get("content") or {}).items():
        yield from _media(f"{pointer}/content/{escape(mime)}", media)


def _response(pointer: str, response: dict) -> Iterator[tuple[str, dict]]:
    for name, header in (response.get("headers") or {}).items():
        yield from _parameter(f"{pointer}/headers/{escape(name)}", header)
    for mime, media in (response.get("content") or {}).items():
        yield from _media(f"{pointer}/content/{escape(mime)}", media)


def _path_item(pointer: str, item: dict) -> Iterator[tuple[str, dict]]:
    for index, param in enumerate(item.get("parameters") or []):
        yield from _parameter(f"{pointer}/parameters/{index}", param)
    for method in METHODS:
        op = item.get(method)
        if not isinstance(op, dict):
            continue
        here = f"{pointer}/{method}"
        for index, param in enumerate(op.get("parameters") or []):
            yield from _parameter(f"{here}/parameters/{index}", param)
        for mime, media in ((op.get("requestBody") or {}).get("content") or {}).items():
            yield from _media(f"{here}/requestBody/content/{escape(mime)}", media)
        for status, response in (op.get("responses") or {}).items():
            yield from _response(f"{here}/responses/{escape(status)}", response)
        for name, callback in (op.get("callbacks") or {}).items():
            for expression, cb_item in callback.items():
                if not expression.startswith("x-"):
                    yield from _path_item(f"{here}/callbacks/{escape(name)}/{escape(expression)}", cb_item)


def schemas_in(pointer: str, schema: Any) -> Iterator[tuple[str, dict]]:
    """Yield (pointer, schema) of a schema object and of every schema object inside it (`x-event-types` payloads too)."""
    if not isinstance(schema, dict):
        return
    yield pointer, schema
    for key in SCHEMA_MAPS:
        for name, sub in (schema.get(key) or {}).items() if isinstance(schema.get(key), dict) else ():
            yield from schemas_in(f"{pointer}/{key}/{escape(name)}", sub)
    for key in SCHEMA_LISTS:
        for index, sub in enumerate(schema.get(key) or []) if isinstance(schema.get(key), list) else ():
            yield from schemas_in(f"{pointer}/{key}/{index}", sub)
    for key in (*SCHEMA_ONES, *SCHEMA_ONES_31):
        yield from schemas_in(f"{pointer}/{key}", schema.get(key))
    items = schema.get("items")
    if isinstance(items, list):  # draft 4's tuple form (not OpenAPI's, which the keyword check reports)
        for index, sub in enumerate(items):
            yield from schemas_in(f"{pointer}/items/{index}", sub)
    else:
        yield from schemas_in(f"{pointer}/items", items)
    # An extension holding schemas: the event catalogue's payloads (served by GET /event-types).
    for name, event in (schema.get("x-event-types") or {}).items() if isinstance(schema.get("x-event-types"), dict) else ():
        if isinstance(event, dict):
            yield from schemas_in(f"{pointer}/x-event-types/{escape(name)}/payload", event.get("payload"))


def all_schemas(doc: dict) -> Iterator[tuple[str, dict]]:
    """Yield (pointer, schema) of every schema object written in the document, each at its own place."""
    components = doc.get("components") or {}
    for name, schema in (components.get("schemas") or {}).items():
        yield from schemas_in(f"#/components/schemas/{escape(name)}", schema)
    for kind in ("parameters", "headers"):
        for name, param in (components.get(kind) or {}).items():
            yield from _parameter(f"#/components/{kind}/{escape(name)}", param)
    for name, response in (components.get("responses") or {}).items():
        yield from _response(f"#/components/responses/{escape(name)}", response)
    for name, body in (components.get("requestBodies") or {}).items():
        for mime, media in (body.get("content") or {}).items():
            yield from _media(f"#/components/requestBodies/{escape(name)}/content/{escape(mime)}", media)
    for name, callback in (components.get("callbacks") or {}).items():
        for expression, item in callback.items():
            yield from _path_item(f"#/components/callbacks/{escape(name)}/{escape(expression)}", item)
    for kind in ("paths", "webhooks"):
        for path, item in (doc.get(kind) or {}).items():
            yield from _path_item(f"#/{kind}/{escape(path)}", item)
    for name, item in (components.get("pathItems") or {}).items():
        yield from _path_item(f"#/components/pathItems/{escape(name)}", item)
