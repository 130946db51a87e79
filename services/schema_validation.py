"""Schema validation of bodies and parameters, with every error in Laravel's wording."""

import datetime
import re
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast
from urllib.parse import urlsplit

import jsonschema_rs
from jsonschema import Draft4Validator, FormatChecker, ValidationError
from jsonschema.validators import extend

import spec
from foundation.exceptions import ValidationFailed
from foundation.messages import listing, message

_US_DATE = re.compile(r"^(\d{2})/(\d{2})/(\d{4})$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# What a 422 names as accepted, by format: the forms parse_date and _is_datetime take.
DATE_FORMATS = {
    "date": ("YYYY-MM-DD", "MM/DD/YYYY"),
    "date-time": ("YYYY-MM-DDTHH:MM:SS+HH:MM", "YYYY-MM-DDTHH:MM:SSZ", "YYYY-MM-DD"),
}


def parse_date(value: str) -> datetime.date | None:
    """Parse `YYYY-MM-DD` or `MM/DD/YYYY`; None when it is no real date."""
    try:
        if _ISO_DATE.match(value):
            return datetime.date.fromisoformat(value)
        match = _US_DATE.match(value)
        if match:
            month, day, year = (int(part) for part in match.groups())
            return datetime.date(year, month, day)
    except ValueError:
        return None
    return None


def _is_date(value: object) -> bool:
    return not isinstance(value, str) or parse_date(value) is not None


def _is_uuid(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    # uuid.UUID also takes braces, URNs and missing hyphens: only the canonical form is a UUID here.
    return len(value) == 36 and value.count("-") == 4


def _is_iri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        parts = urlsplit(value)
        return parts.scheme in {"http", "https"} and bool(parts.hostname) and not any(c.isspace() for c in value)
    except ValueError:
        return False


def _is_uri(value: object) -> bool:
    # RFC 3986: ASCII only (an IRI's other characters are percent-encoded, an IDN host is punycode).
    return _is_iri(value) and (not isinstance(value, str) or (value.isascii() and value.isprintable()))


def _is_datetime(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        datetime.datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


FORMATS = {"date": _is_date, "uuid": _is_uuid, "uri": _is_uri, "iri": _is_iri, "date-time": _is_datetime}
FORMAT_CHECKER = FormatChecker()
for _name, _check in FORMATS.items():
    FORMAT_CHECKER.checks(_name)(_check)


# A jsonschema keyword: (validator, the keyword's value, instance, schema) -> its errors.
Keyword = Callable[[Any, Any, Any, dict], Iterator[ValidationError]]


def _nullable(fn: Keyword) -> Keyword:
    def check(validator: Any, value: Any, instance: Any, schema: dict) -> Iterator[ValidationError]:
        if instance is None and schema.get("nullable"):
            return
        yield from fn(validator, value, instance, schema)

    return check


def _only_null(branch: dict) -> bool:
    return branch.get("enum") == [None]


def _one_of(validator: Any, branches: list[dict], instance: Any, schema: dict) -> Iterator[ValidationError]:
    """Validate a discriminated oneOf against the branch its tag names, for precise errors."""
    others = [branch for branch in branches if not _only_null(branch)]
    if instance is not None and len(others) == 1 < len(branches):
        # A nullable reference, `oneOf: [X, NullValue]`: a value that is not null is an X, with X's own errors.
        yield from validator.descend(instance, others[0])
        return
    discriminator = schema.get("discriminator")
    if not discriminator or not isinstance(instance, dict):
        yield from Draft4Validator.VALIDATORS["oneOf"](validator, branches, instance, schema)
        return
    prop = discriminator["propertyName"]
    tag = instance.get(prop)
    for branch in branches:
        if tag in branch.get("properties", {}).get(prop, {}).get("enum", ()):
            yield from validator.descend(instance, branch)
            return
    if prop not in instance:
        yield ValidationError(f"'{prop}' is a required property", validator="required", validator_value=[prop])
    else:
        # The tags of every branch are what the error lists as allowed.
        known = [name for branch in branches for name in branch.get("properties", {}).get(prop, {}).get("enum", ())]
        yield ValidationError("invalid tag", validator="enum", validator_value=known, path=deque([prop]), instance=tag)


_KEYWORDS = {name: _nullable(fn) for name, fn in Draft4Validator.VALIDATORS.items()}
_KEYWORDS["oneOf"] = _nullable(_one_of)
RequestValidator = extend(Draft4Validator, _KEYWORDS)


def _rs_schema(node: Any) -> Any:
    """Translate OpenAPI 3.0 (nullable, discriminator) into plain JSON Schema for jsonschema-rs."""
    if isinstance(node, list):
        return [_rs_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: _rs_schema(v) for k, v in node.items() if not k.startswith("x-") and k not in {"nullable", "discriminator", "example"}
    }
    if node.get("nullable"):
        return {"anyOf": [{"type": "null"}, out]}
    return out


class SchemaValidator:
    """Validate instances of one schema: a compiled fast path, then precise errors on failure."""

    def __init__(self, schema: dict) -> None:
        self.schema = schema
        self._slow = RequestValidator(schema, format_checker=FORMAT_CHECKER)
        self._fast = jsonschema_rs.Draft4Validator(_rs_schema(schema), validate_formats=True, formats=FORMATS)

    def errors(self, instance: Any, prefix: str = "") -> dict[str, list[str]]:
        """Return {dotted path: [messages]} for an instance; empty when valid."""
        if self._fast.is_valid(instance):
            return {}
        found: dict[str, list[str]] = {}
        for error in self._slow.iter_errors(instance):
            for path, text in _messages(error, prefix):
                found.setdefault(path, [])
                if text not in found[path]:
                    found[path].append(text)
        return found


def attribute(path: str) -> str:
    """Return how Laravel names an attribute: dotted paths and `_method`-like keys raw, plain names with spaces."""
    return path if "." in path or "[" in path or path.startswith("_") else path.replace("_", " ")


def _join(prefix: str, parts: Iterable[object]) -> str:
    return ".".join([p for p in [prefix, *[str(x) for x in parts]] if p != ""])


def _size(value: Any) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _messages(error: ValidationError, prefix: str) -> Iterator[tuple[str, str]]:
    """Yield (path, message) pairs for one jsonschema error."""
    # A validator's errors always carry these; jsonschema's types allow them unset (for errors made by hand).
    kind = cast(str, error.validator)
    instance: Any = error.instance
    value: Any = error.validator_value
    path = _join(prefix, error.absolute_path)
    attr = attribute(path) if path else "body"
    schema = error.schema if isinstance(error.schema, dict) else {}
    if kind == "required":
        present = instance if isinstance(instance, dict) else {}
        for name in value:
            if name not in present:
                field = _join(path, [name])
                yield field, message("required", attribute(field))
        return
    if kind == "additionalProperties":
        allowed = set(schema.get("properties", {}))
        for name in instance:
            if name not in allowed:
                field = _join(path, [name])
                yield field, message("prohibited", attribute(field))
        return
    if not path:
        yield "body", message("json_object", "body")
        return
    yield path, _message(kind, error, schema, attr)


_TYPES = {"number": "numeric", "string": "string", "boolean": "boolean", "array": "array", "object": "object"}
_FORMATS = {"date": "date", "uuid": "uuid", "uri": "url", "iri": "url", "date-time": "date"}


def _message(kind: str, error: ValidationError, schema: dict, attr: str) -> str:
    value: Any = error.validator_value  # set on a validator's errors, as in _messages
    if kind == "type":
        types = value if isinstance(value, list) else [value]
        if "integer" in types:
            return message("integer" if isinstance(error.instance, float) else "numeric", attr)
        return message(_TYPES.get(types[0], "invalid"), attr)
    if kind == "enum":
        return message("in.allowed", attr, values=listing(value))
    if kind in {"oneOf", "anyOf"}:
        return message("in", attr)
    if kind == "format":
        if value not in _FORMATS:
            return message("regex", attr)
        return message(_FORMATS[value], attr, formats=listing(DATE_FORMATS.get(value, ())))
    if kind in {"minimum", "maximum"}:
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            return message("between.numeric", attr, min=_size(low), max=_size(high))
        if kind == "minimum":
            return message("min.numeric", attr, min=_size(low))
        return message("max.numeric", attr, max=_size(high))
    rules = {
        "minLength": "min.string", "maxLength": "max.string", "minItems": "min.array", "minProperties": "min.array",
        "maxItems": "max.array", "maxProperties": "max.array",
    }  # fmt: skip
    if kind in rules:
        return message(rules[kind], attr, min=value, max=value)
    if kind == "pattern":
        # A comma list of a fixed choice names the schema whose enum it takes (`x-choices`), to list it.
        if "x-choices" in schema:
            return message("in.allowed", attr, values=listing(spec.schema(schema["x-choices"])["enum"]))
        # Another list filter names its form in words (`x-form`): integers, UUIDs, status codes or classes.
        if "x-form" in schema:
            return message("regex.form", attr, form=schema["x-form"])
        # A schema may name its own words (`x-message`), e.g. a cursor: malformed or forged, it is "invalid";
        # and the forms it takes (`x-formats`), e.g. a date range.
        return message(schema.get("x-message", "regex"), attr, formats=listing(schema.get("x-formats", ())))
    return message("invalid", attr)


def check(validator: SchemaValidator, instance: Any, prefix: str = "") -> None:
    """Raise ValidationFailed with every error of an instance."""
    errors = validator.errors(instance, prefix)
    if errors:
        raise ValidationFailed(errors)


_compiled: dict[int, tuple[dict, SchemaValidator]] = {}


def compiled(schema: dict) -> SchemaValidator:
    """Return the cached validator of a schema object."""
    hit = _compiled.get(id(schema))
    if hit is None or hit[0] is not schema:
        hit = (schema, SchemaValidator(schema))
        _compiled[id(schema)] = hit
    return hit[1]
