"""The texts of 422 errors, in one table: Laravel's words (its lang/en/validation.php) and ours beside them.

`:attribute` is the field's path as the client sent it (`data.0.data.first_name`); other `:names` are
filled from the keyword arguments. Every module that reports an invalid value takes its text from here.
"""

import re
from collections.abc import Iterable

MESSAGES = {
    # Laravel's, as its validation rules word them.
    "integer": "The :attribute field must be an integer.",
    "numeric": "The :attribute field must be a number.",
    "string": "The :attribute field must be a string.",
    "boolean": "The :attribute field must be true or false.",
    "array": "The :attribute field must be an array.",
    "object": "The :attribute field must be an object.",
    "invalid": "The :attribute field is invalid.",
    "in": "The selected :attribute is invalid.",
    "date": "The :attribute field must be a valid date. Allowed formats are :formats.",
    "uuid": "The :attribute field must be a valid UUID.",
    "url": "The :attribute field must be a valid URL.",
    "regex": "The :attribute field format is invalid.",
    "between.numeric": "The :attribute field must be between :min and :max.",
    "min.numeric": "The :attribute field must be at least :min.",
    "max.numeric": "The :attribute field must not be greater than :max.",
    "min.string": "The :attribute field must be at least :min characters.",
    "max.string": "The :attribute field must not be greater than :max characters.",
    "min.array": "The :attribute field must have at least :min items.",
    "max.array": "The :attribute field must not have more than :max items.",
    "unique": "The :attribute has already been taken.",
    "distinct": "The :attribute field has a duplicate value.",
    "required": "The :attribute field is required.",
    "prohibited": "The :attribute field is prohibited.",
    "after": "The :attribute field must be a date after :date.",
    # This service's own, in the same voice. A fixed choice keeps Laravel's sentence and says what it takes,
    # worded as spatie's errors of include, sort and filter names ("Allowed include(s) are `a, b`.").
    "in.allowed": "The selected :attribute is invalid. Allowed values are :values.",
    "profile_type": "The selected :attribute is invalid. Allowed values are `:type` (the risk profile's type).",
    "json_object": "The request body must be a JSON object.",
    "regex.form": "The :attribute field format is invalid. Allowed form: :form.",
    "date_range": (
        "The :attribute field must be a valid date range. Allowed formats are `FROM,TO`, each empty or one of :formats."
    ),
    "nesting": "The :attribute field must not be nested more than :max levels deep.",
    "not_found": "The :attribute could not be found in the risk profile.",
    "no_number_left": "The :attribute could not be assigned: the risk profile's numbers reach :max; give a free number.",
    "has_buildings": "The :attribute cannot be deleted while the premise has buildings.",
    "immutable": "The :attribute field cannot be changed; delete the webhook and create another.",
    "url_refused": "The :attribute field :problem.",
    "header_name": "The :attribute header's name must be an HTTP token (letters, digits and !#$%&'*+.^_`|~-).",
    "header_owned": "The :attribute header is set by every delivery itself; choose another name.",
    "header_repeated": "The :attribute header is given twice (header names are case-insensitive).",
    "method_mismatch": "The :attribute field must match the X-HTTP-Method-Override header.",
    "bad_cursor": "The :attribute is invalid.",
}

_PLACEHOLDER = re.compile(r":([a-z]+)")

# The most values an error lists; the rest are counted (62 state codes would drown the sentence).
MAX_LISTED = 20


def listing(values: Iterable[object]) -> str:
    """Quote values as spatie lists them, the first MAX_LISTED only, then how many more: "`a, b` and 3 more"."""
    shown = [_text(value) for value in values]
    more = len(shown) - MAX_LISTED
    quoted = f"`{', '.join(shown[:MAX_LISTED])}`"
    return f"{quoted} and {more} more" if more > 0 else quoted


def _text(value: object) -> str:
    """Write a value as JSON names it (null, true), a string as it is."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return str(value)


def message(rule: str, attribute: str, **values: object) -> str:
    """Return the text of `rule` for a field, its placeholders filled in."""
    values["attribute"] = attribute
    return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), MESSAGES[rule])


__all__ = ["MAX_LISTED", "MESSAGES", "listing", "message"]
