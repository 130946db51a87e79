"""services.schema_validation: JSON Schema errors become Laravel's messages, keyed by dotted path."""

import datetime

import pytest

import spec
from foundation.exceptions import ValidationFailed
from services.schema_validation import SchemaValidator, attribute, check, parse_date

PERSON = {
    "type": "object",
    "required": ["first_name", "age"],
    "additionalProperties": False,
    "properties": {
        "first_name": {"type": "string", "minLength": 2, "maxLength": 5},
        "age": {"type": "integer", "minimum": 10, "maximum": 100},
        "weight": {"type": "number", "minimum": 1},
        "height": {"type": "number", "maximum": 3},
        "active": {"type": "boolean"},
        "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "state": {"type": "string", "enum": ["TX", "CA"]},
        "born": {"type": "string", "format": "date"},
        "seen": {"type": "string", "format": "date-time"},
        "id": {"type": "string", "format": "uuid"},
        "site": {"type": "string", "format": "uri"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "notes": {"type": "string", "nullable": True},
        "meta": {"type": "object"},
    },
}
VALID = {"first_name": "Ada", "age": 30}


def errors(instance, schema=PERSON, prefix="") -> dict:
    """Return the validator's errors of an instance."""
    return SchemaValidator(schema).errors(instance, prefix)


def test_a_valid_instance_has_no_errors():
    """A valid instance yields {} and check() passes it."""
    assert errors({**VALID, "notes": None, "born": "04/12/1990", "tags": ["a"]}) == {}
    check(SchemaValidator(PERSON), VALID)


def test_missing_and_unknown_fields_are_named_each():
    """Each missing required field is required, each unknown one prohibited, with underscores read as spaces."""
    assert errors({"age": 30, "nick_name": "x", "extra": 1}) == {
        "first_name": ["The first name field is required."],
        "nick_name": ["The nick name field is prohibited."],
        "extra": ["The extra field is prohibited."],
    }


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("age", 30.5, "The age field must be an integer."),
        ("age", "30", "The age field must be a number."),
        ("weight", "x", "The weight field must be a number."),
        ("first_name", 7, "The first name field must be a string."),
        ("active", "yes", "The active field must be true or false."),
        ("tags", "a", "The tags field must be an array."),
        ("meta", [], "The meta field must be an object."),
        ("notes", 1, "The notes field must be a string."),
    ],
)
def test_type_errors(field, value, message):
    """A value of the wrong type gets the message of the expected type."""
    assert errors({**VALID, field: value}) == {field: [message]}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("age", 9, "The age field must be between 10 and 100."),
        ("age", 101, "The age field must be between 10 and 100."),
        ("weight", 0.5, "The weight field must be at least 1."),
        ("height", 3.5, "The height field must not be greater than 3."),
        ("first_name", "A", "The first name field must be at least 2 characters."),
        ("first_name", "Adelaide", "The first name field must not be greater than 5 characters."),
        ("tags", [], "The tags field must have at least 1 items."),
        ("tags", ["a", "b", "c"], "The tags field must not have more than 2 items."),
        ("state", "NY", "The selected state is invalid. Allowed values are `TX, CA`."),
        ("zip", "7870", "The zip field format is invalid."),
    ],
)
def test_bound_enum_and_pattern_errors(field, value, message):
    """Sizes, bounds, enums and patterns each have Laravel's sentence."""
    assert errors({**VALID, field: value}) == {field: [message]}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("born", "2023-02-29", "The born field must be a valid date. Allowed formats are `YYYY-MM-DD, MM/DD/YYYY`."),
        ("born", "13/01/2024", "The born field must be a valid date. Allowed formats are `YYYY-MM-DD, MM/DD/YYYY`."),
        ("born", "2024/01/01", "The born field must be a valid date. Allowed formats are `YYYY-MM-DD, MM/DD/YYYY`."),
        (
            "seen",
            "yesterday",
            "The seen field must be a valid date. Allowed formats are "
            "`YYYY-MM-DDTHH:MM:SS+HH:MM, YYYY-MM-DDTHH:MM:SSZ, YYYY-MM-DD`.",
        ),
        ("id", "{12345678-1234-1234-1234-123456789012}", "The id field must be a valid UUID."),
        ("id", "12345678123412341234123456789012", "The id field must be a valid UUID."),
        ("site", "ftp://example.com/", "The site field must be a valid URL."),
        ("site", "https://exa mple.com/", "The site field must be a valid URL."),
        ("site", "https:///path", "The site field must be a valid URL."),
    ],
)
def test_format_errors(field, value, message):
    """Dates, timestamps, canonical UUIDs and http(s) URLs are checked by format."""
    assert errors({**VALID, field: value}) == {field: [message]}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("born", "2024-02-29"),
        ("born", "02/29/2024"),
        ("seen", "2024-02-29T10:00:00+02:00"),
        ("id", "12345678-1234-1234-1234-123456789012"),
        ("site", "http://localhost:8080/x?y=1"),
    ],
)
def test_valid_formats_pass(field, value):
    """The accepted forms of each format are valid."""
    assert errors({**VALID, field: value}) == {}


def test_errors_under_a_prefix_keep_the_dotted_path_raw():
    """With a prefix, paths are dotted and messages name them as they are (no spaces for underscores)."""
    assert errors({"age": 5}, prefix="data.0.data") == {
        "data.0.data.first_name": ["The data.0.data.first_name field is required."],
        "data.0.data.age": ["The data.0.data.age field must be between 10 and 100."],
    }


def test_a_body_that_is_not_an_object_is_one_error():
    """A body of the wrong type at the root is reported once, on `body`."""
    assert errors(["x"]) == {"body": ["The request body must be a JSON object."]}


def test_a_discriminated_one_of_reports_the_errors_of_the_branch_its_tag_names():
    """A tagged oneOf validates against the tagged branch; a missing or unknown tag is named as such."""
    schema = {
        "type": "object",
        "discriminator": {"propertyName": "object"},
        "oneOf": [
            {"required": ["object", "a"], "properties": {"object": {"enum": ["one"]}, "a": {"type": "integer"}}},
            {"required": ["object", "b"], "properties": {"object": {"enum": ["two"]}, "b": {"type": "string"}}},
        ],
    }
    assert errors({"object": "two", "b": 1}, schema) == {"b": ["The b field must be a string."]}
    assert errors({"object": "one"}, schema) == {"a": ["The a field is required."]}
    assert errors({"b": "x"}, schema) == {"object": ["The object field is required."]}
    assert errors({"object": "three"}, schema) == {"object": ["The selected object is invalid. Allowed values are `one, two`."]}
    assert errors({"object": "one", "a": 1}, schema) == {}


def test_a_spec_schema_gives_messages_at_every_depth():
    """The spec's own create body: errors of items deep in the array carry their full path."""
    validator = SchemaValidator(spec.schema("DriverCreate"))
    body = {"data": [{"object": "driver", "data": {}}, {"object": "driver", "data": {"date_of_birth": "1990-02-30"}}]}
    assert validator.errors(body) == {
        "data.1.data.date_of_birth": [
            "The data.1.data.date_of_birth field must be a valid date. Allowed formats are `YYYY-MM-DD, MM/DD/YYYY`."
        ],
    }


def test_check_raises_every_error_at_once():
    """check() raises ValidationFailed with all errors of the instance."""
    with pytest.raises(ValidationFailed) as failed:
        check(SchemaValidator(PERSON), {"first_name": 1})
    assert failed.value.errors == {
        "first_name": ["The first name field must be a string."],
        "age": ["The age field is required."],
    }


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("per_page", "per page"),
        ("data.0.first_name", "data.0.first_name"),
        ("_method", "_method"),
        ("filter[a_b]", "filter[a_b]"),
    ],
)
def test_attribute_names_fields_as_laravel_does(path, name):
    """Plain names read with spaces; dotted, bracketed and underscore-led ones stay raw."""
    assert attribute(path) == name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-02-29", datetime.date(2024, 2, 29)),
        ("02/29/2024", datetime.date(2024, 2, 29)),
        ("2023-02-29", None),
        ("02/30/2024", None),
        ("2024-1-01", None),
        ("29/02/2024", None),
        ("2024-02-29T00:00:00", None),
    ],
)
def test_parse_date_reads_iso_and_us_dates_only(text, expected):
    """parse_date takes YYYY-MM-DD and MM/DD/YYYY real dates and nothing else."""
    assert parse_date(text) == expected


def test_one_parameter_validator_per_operation():
    from api.request_validation import ParamValidator, URIParser

    make = ParamValidator.once_per_operation()
    one = [{"in": "query", "name": "page", "schema": {"type": "integer"}}]
    other = [{"in": "query", "name": "page", "schema": {"type": "integer"}}]  # equal, but another operation's
    first = make(one, uri_parser=URIParser(one, {}))
    assert make(one, uri_parser=URIParser(one, {})) is first
    assert make(other, uri_parser=URIParser(other, {})) is not first
