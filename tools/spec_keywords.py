"""Find keywords no reader knows in the document's schema objects, wherever they are written.

JSON Schema ignores a keyword it does not know, so a slip (`"delivered as given.": null` from an
unquoted comma, `requierd`, `nulable`) changes nothing any validator, linter or generator reports,
yet every client reads it as part of the contract. The schema objects checked are those
tools.spec_doc finds: components, parameters, headers, bodies, responses, callbacks, the payloads of
`x-event-types`, and the values an example shows where its schema marks them `x-json-schema`
(GET /event-types answers schemas).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tools import spec_doc, spec_examples

# OpenAPI 3.0.x's Schema Object: the JSON Schema subset it takes, and its own additions.
KEYWORDS_30 = frozenset(
    """title multipleOf maximum exclusiveMaximum minimum exclusiveMinimum maxLength minLength pattern
    maxItems minItems uniqueItems maxProperties minProperties required enum type allOf oneOf anyOf not
    items properties additionalProperties description format default nullable discriminator readOnly
    writeOnly xml externalDocs example deprecated $ref""".split()
)
# OpenAPI 3.1.x: JSON Schema 2020-12 (core, applicator, validation, meta-data, format, content, unevaluated)
# plus the OpenAPI vocabulary (discriminator, xml, externalDocs, example).
KEYWORDS_31 = frozenset(
    """$schema $id $anchor $dynamicAnchor $dynamicRef $ref $defs $comment $vocabulary allOf anyOf oneOf not
    if then else dependentSchemas prefixItems items contains properties patternProperties additionalProperties
    propertyNames unevaluatedItems unevaluatedProperties type enum const multipleOf maximum exclusiveMaximum
    minimum exclusiveMinimum maxLength minLength pattern maxItems minItems uniqueItems maxContains minContains
    maxProperties minProperties required dependentRequired title description default deprecated readOnly
    writeOnly examples format contentEncoding contentMediaType contentSchema discriminator xml externalDocs
    example""".split()
)


def keywords(doc: dict) -> frozenset[str]:
    """Return the schema keywords of the document's OpenAPI version."""
    return KEYWORDS_31 if str(doc.get("openapi", "3.0")).startswith("3.1") else KEYWORDS_30


def unknown_in(pointer: str, schema: dict, known: frozenset[str], openapi_30: bool) -> Iterator[str]:
    """Yield a problem per unknown keyword of one schema object (not of the schemas inside it)."""
    for key in schema:
        if key.startswith("x-"):
            continue
        if key not in known:
            yield f"{pointer}: unknown schema keyword {key!r}"
        elif key == "$ref" and openapi_30:
            # OpenAPI 3.0 ignores every sibling of $ref: a `nullable` or `description` there says nothing.
            ignored = sorted(k for k in schema if k != "$ref" and not k.startswith("x-"))
            if ignored:
                yield f"{pointer}: {', '.join(ignored)} beside $ref (ignored by OpenAPI 3.0: wrap the $ref in allOf)"
    if openapi_30 and isinstance(schema.get("items"), list):
        yield f"{pointer}/items: a list (OpenAPI 3.0 takes one schema)"


def marked_values(schema: Any, value: Any, doc: dict, pointer: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Yield (pointer, value) of the parts of an example that its schema marks `x-json-schema: true`."""
    schema, _ = spec_doc.deref(doc, schema, "#")
    if not isinstance(schema, dict) or depth > 64:
        return
    if schema.get("x-json-schema") is True:
        yield pointer, value
        return
    for key in spec_doc.SCHEMA_LISTS:
        for branch in schema.get(key) or []:
            yield from marked_values(branch, value, doc, pointer, depth + 1)
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in value:
                yield from marked_values(sub, value[name], doc, f"{pointer}/{spec_doc.escape(name)}", depth + 1)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from marked_values(schema["items"], item, doc, f"{pointer}/{index}", depth + 1)


def example_schemas(doc: dict) -> Iterator[tuple[str, dict]]:
    """Yield (pointer, schema) of every schema an example shows (a value its schema marks `x-json-schema`)."""
    seen = set()
    for where, schema, value in spec_examples.examples(doc):
        for pointer, shown in marked_values(schema, value, doc, where):
            if pointer not in seen and isinstance(shown, dict):
                seen.add(pointer)
                yield from spec_doc.schemas_in(pointer, shown)


def check(doc: dict) -> list[str]:
    """Return a problem per unknown keyword, each naming its JSON pointer."""
    known, openapi_30 = keywords(doc), not str(doc.get("openapi", "3.0")).startswith("3.1")
    problems: list[str] = []
    for pointer, schema in [*spec_doc.all_schemas(doc), *example_schemas(doc)]:
        problems.extend(unknown_in(pointer, schema, known, openapi_30))
    return problems
