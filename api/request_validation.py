"""Connexion validators that report every error at once, keyed as Laravel keys them."""

import functools
import re
from collections.abc import Callable
from typing import Any

import orjson
from connexion.lifecycle import ConnexionRequest
from connexion.uri_parsing import OpenAPIURIParser
from connexion.validators import AbstractRequestBodyValidator
from connexion.validators.parameter import ParameterValidator
from starlette.datastructures import URL, Headers, QueryParams
from starlette.types import Message, Receive, Scope

import spec
from foundation.exceptions import ApiError, ValidationFailed
from foundation.messages import message
from services.list_query import ListRequest
from services.schema_validation import attribute, compiled
from spec import FILTER_PARAMETER

# Any `filter[...]` key of a query string, the empty name included (to name it as not allowed).
_ANY_FILTER = re.compile(r"^filter\[([^\[\]]*)\]$")


def stash(scope: Scope, **values: Any) -> None:
    """Hand values to the handler through Connexion's per-request context."""
    scope.setdefault("extensions", {}).setdefault("connexion_context", {}).update(values)


def _too_deep(body: Any, limit: int) -> dict[str, list[str]]:
    """Name the first value nested deeper than limit: what is stored must be echoed and delivered back.

    orjson reads 1,024 levels but writes only 254, and deep values cost every later reader.
    """
    level: list[tuple[str, Any]] = [("", body)]
    for _depth in range(limit + 1):
        deeper: list[tuple[str, Any]] = []
        for path, value in level:
            children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
            for key, child in children:
                if isinstance(child, (dict, list)):
                    deeper.append((f"{path}.{key}" if path else str(key), child))
        if not deeper:
            return {}
        level = deeper
    path = level[0][0]
    return {path: [message("nesting", path, max=limit)]}


def _replay(receive: Receive, messages: list[Message]) -> Receive:
    """Return a receive channel that hands out messages first, then what receive gives."""
    pending = iter(messages)

    async def replaying() -> Message:
        try:
            return next(pending)
        except StopIteration:
            return await receive()

    return replaying


class URIParser(OpenAPIURIParser):
    """Connexion's parser of OpenAPI 3 parameters, which also tells whether the operation takes a body."""

    def __init__(self, param_defns: dict, body_defn: dict) -> None:
        super().__init__(param_defns, body_defn)
        self.has_body = bool(body_defn.get("schema"))

    # Made when first asked: Connexion builds a parser for every request and asks only the one it keeps.
    @functools.cached_property
    def param_schemas(self) -> dict:
        """Return each parameter's schema by name (Connexion's parser builds this anew for each query key)."""
        return {name: defn.get("schema", {}) for name, defn in self.param_defns.items()}


class BodyValidator(AbstractRequestBodyValidator):
    """Parse a JSON body and collect its schema errors for the handler to merge with its own."""

    def __init__(self, *, schema: dict, **kwargs: Any) -> None:
        super().__init__(schema=schema, **kwargs)
        self.schema = schema

    async def wrap_receive(self, receive: Receive, *, scope: Scope) -> tuple[Receive, Scope]:
        messages: list[Message] = []
        more = True
        while more:
            received = await receive()
            messages.append(received)
            more = received.get("more_body", False)
        raw = b"".join(m.get("body", b"") for m in messages)
        body: Any = None
        if not raw.strip():
            errors = {"data": [message("required", "data")]}
        else:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ApiError(400, f"The request body is not valid JSON: {exc}.") from None
            errors = _too_deep(body, spec.raw()["x-max-depth"]) or compiled(self.schema).errors(body)
        deferred = scope.get("extensions", {}).get("connexion_context", {}).get("parameter_errors")
        if deferred:
            raise ValidationFailed({**deferred, **errors})
        stash(scope, body=body, body_errors=errors)
        return _replay(receive, messages), scope


def _names_error(kind: str, offending: list, allowed: list) -> str:
    plural = "is" if kind == "sort" else "are"
    return f"Requested {kind}(s) `{', '.join(offending)}` {plural} not allowed. Allowed {kind}(s) are `{', '.join(allowed)}`."


class ParamValidator(ParameterValidator):
    """Validate every parameter, collecting all errors; unknown filter/sort/include names in spatie's words."""

    def __init__(
        self,
        parameters: list[dict],
        uri_parser: URIParser,
        strict_validation: bool = False,
        security_query_params: list[str] | None = None,
    ) -> None:
        seen: set[tuple[str, str]] = set()
        unique: list[dict] = []
        # Connexion 3.3 can list path-level parameters more than once.
        for param in parameters:
            key = (param["in"], param["name"])
            if key not in seen:
                seen.add(key)
                unique.append(param)
        super().__init__(unique, uri_parser, strict_validation, security_query_params)
        # What every request of the operation is checked against, read from its definitions once.
        self.filters = [m.group(1) for p in self.parameters.get("query", []) if (m := FILTER_PARAMETER.match(p["name"]))]
        self.declared = {param["name"] for param in self.parameters.get("query", [])}
        self.lists = bool(self.filters) or "per_page" in self.declared

    @classmethod
    def once_per_operation(cls) -> Callable[..., "ParamValidator"]:
        """Return a maker of validators that builds one per operation, for Connexion's validator_map.

        Connexion builds a parameter validator (and its URI parser) on every request; one holds only
        its operation's definitions, so each operation's first is kept.
        """
        made: dict[int, tuple[list, ParamValidator]] = {}

        def make(parameters: list[dict], *args: Any, **kwargs: Any) -> ParamValidator:
            hit = made.get(id(parameters))
            if hit is None or hit[0] is not parameters:
                hit = made[id(parameters)] = (parameters, cls(parameters, *args, **kwargs))
            return hit[1]

        return make

    def validate(self, scope: Scope) -> None:
        """Validate the parameters; when a JSON body follows, leave their errors to be reported with its errors."""
        try:
            super().validate(scope)
        except ValidationFailed as exc:
            content_type = Headers(scope=scope).get("content-type", "application/json")
            if not (self.uri_parser.has_body and "json" in content_type.lower()):
                raise
            stash(scope, parameter_errors=exc.errors)
        if self.lists:
            stash(scope, list_request=self.list_request(scope))

    def list_request(self, scope: Scope) -> ListRequest:
        """Return what a list request asks beyond its named parameters (services.list_query.ListRequest)."""
        query = QueryParams(scope.get("query_string", b"")).multi_items()
        given = dict(query)  # of repeats the last, as validated
        filters = {name: given[key] for name in self.filters if (key := f"filter[{name}]") in given}
        operation = spec.function_name(scope["extensions"]["connexion_routing"]["operation_id"])
        return ListRequest(operation, filters, query, str(URL(scope=scope).replace(query="")))

    def validate_request(self, request: ConnexionRequest) -> None:
        errors: dict[str, list[str]] = {}
        for param in self.parameters.get("path", []):
            value = request.path_params.get(param["name"])
            if value is not None and compiled(param["schema"]).errors(value):
                raise ApiError(404, "Not found.")
        filters = self.filters
        for param in self.parameters.get("query", []):
            if filters and param["name"] == f"filter[{filters[0]}]":
                self._check_filter_names(request, filters, errors)
            value = request.query_params.get(param["name"])
            if value is not None:
                self._check_query(param, value, errors)
        self._check_undeclared(request, bool(filters), errors)
        for param in self.parameters.get("header", []):
            value = request.headers.get(param["name"])
            if value is not None:
                errors.update(compiled(param["schema"]).errors(value, param["name"]))
        if errors:
            raise ValidationFailed(errors, selectable=False)

    def _check_undeclared(self, request: ConnexionRequest, has_filters: bool, errors: dict) -> None:
        """Refuse query parameters the operation does not declare: a misspelt one must never be ignored silently."""
        for key, value in request.query_params.items():
            if key in self.declared or (has_filters and (key == "filter" or _ANY_FILTER.match(key))):
                continue
            if key in {"sort", "include"}:
                values = value if isinstance(value, list) else [value]
                names = [v for item in values for v in str(item).split(",") if v != ""]
                if names:  # `include=` names nothing: nothing to refuse
                    errors[key] = [_names_error(key, names, [])]
            else:
                errors[key] = [message("prohibited", attribute(key))]

    @staticmethod
    def _check_filter_names(request: ConnexionRequest, allowed: list, errors: dict) -> None:
        """Name the `filter[<name>]` parameters a list does not declare, in spatie's words."""
        if "filter" in request.query_params:
            errors["filter"] = [message("object", "filter")]
            return
        names = [m.group(1) for key in request.query_params if (m := _ANY_FILTER.match(key))]
        offending = [name for name in names if name not in allowed]
        if offending:
            errors["filter"] = [_names_error("filter", offending, allowed)]

    @staticmethod
    def _check_query(param: dict, value: Any, errors: dict) -> None:
        name, schema = param["name"], param["schema"]
        if schema.get("type") == "array" and "enum" in schema.get("items", {}):
            allowed = schema["items"]["enum"]
            # `include=` names nothing, as spatie reads it: no error, no relation.
            values = value if isinstance(value, list) else [value]
            if name == "include":  # the spec lets `include=` be empty; `sort=` must name a sort
                values = [v for v in values if v != ""]
            offending = [v for v in values if v not in allowed]
            if offending:
                shown = [a for a in allowed if not str(a).startswith("-")]
                errors[name] = [_names_error(name, [str(v) for v in offending], shown)]
            else:  # the names known: the rest of its schema (how many it may name)
                errors.update(compiled(schema).errors(values, name))
            return
        if schema.get("type") == "object" and isinstance(value, dict):
            allowed = list(schema.get("properties", {}))
            offending = [k for k in value if k not in allowed]
            if offending:
                errors[name] = [_names_error(name, offending, allowed)]
            for key, item in value.items():
                if key in allowed:
                    errors.update(compiled(schema["properties"][key]).errors(item, f"{name}[{key}]"))
            return
        errors.update(compiled(schema).errors(value, name))
