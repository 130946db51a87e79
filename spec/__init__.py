"""spec/openapi.yaml, the single source of truth, and the functions that read it (loaded once; Python never re-lists it)."""

import functools
import pathlib
import re
import urllib.parse
import warnings

import yaml

# Connexion imports Starlette's test client at import time, which warns about httpx on every start, and
# `import models` reaches Connexion here first (riskapi/__init__.py says the same for the riskapi package).
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")

from connexion.json_schema import ExtendedSafeLoader, resolve_refs  # noqa: E402 (after the filter above)

SPEC_PATH = pathlib.Path(__file__).with_name("openapi.yaml")
# What changed between versions (written by tools.spec_changelog), served beside the spec.
CHANGELOG_PATH = SPEC_PATH.with_name("CHANGELOG.md")

# A list's filters are query parameters named `filter[<name>]` (spatie's form, sent as is by generated clients).
FILTER_PARAMETER = re.compile(r"^filter\[([^\[\]]+)\]$")


@functools.lru_cache(maxsize=1)
def raw() -> dict:
    """Return the spec as written (with $refs)."""
    with open(SPEC_PATH, encoding="utf-8") as handle:
        return yaml.load(handle, ExtendedSafeLoader)


@functools.lru_cache(maxsize=1)
def resolved() -> dict:
    """Return the spec with every $ref replaced by its target."""
    return resolve_refs(raw())


def schema(name: str) -> dict:
    """Return a resolved component schema."""
    return resolved()["components"]["schemas"][name]


@functools.lru_cache(maxsize=1024)  # the spec's operationIds: a few dozen, each asked on every request
def snake_case(name: str) -> str:
    """Turn a camelCase operationId into the snake_case name of its handler function (`listDrivers` -> `list_drivers`)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def function_name(resolved_id: str) -> str:
    """Return the function `<x-openapi-router-controller>.<operationId>` names (`handlers.risk_data.list_drivers`)."""
    module, _, name = resolved_id.rpartition(".")
    return f"{module}.{snake_case(name)}" if module else snake_case(name)


def handler_name(op: dict) -> str:
    """Return the dotted name of the function an operation resolves to (`handlers.risk_data.list_drivers`)."""
    controller = op.get("x-openapi-router-controller")
    name = op["operationId"]
    return function_name(f"{controller}.{name}") if controller else name


def operation(operation_id: str) -> tuple[str, str, dict]:
    """Return (path, method, resolved operation) of an operationId, or of its handler's dotted name."""
    for path, item in resolved()["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and operation_id in (op.get("operationId"), op.get("operationId") and handler_name(op)):
                return path, method, op
    raise KeyError(operation_id)


def parameters(operation_id: str) -> list[dict]:
    """Return the resolved parameters of an operation: its own, then its path's (each name once)."""
    path, _, op = operation(operation_id)
    shared = resolved()["paths"][path].get("parameters", [])
    seen, found = set(), []
    for param in list(op.get("parameters", [])) + list(shared):
        key = (param["in"], param["name"])
        if key not in seen:
            seen.add(key)
            found.append(param)
    return found


def parameter(operation_id: str, name: str) -> dict:
    """Return the resolved parameter of an operation."""
    for param in parameters(operation_id):
        if param["name"] == name:
            return param
    raise KeyError(name)


def filters(operation_id: str) -> dict:
    """Return {filter name: schema} of a list operation, in the spec's order; `x-search` and `x-field` read from the parameter."""
    found = {}
    for param in parameters(operation_id):
        match = FILTER_PARAMETER.match(param["name"])
        if param["in"] == "query" and match:
            definition = dict(param["schema"])
            for extension in ("x-search", "x-field"):  # a text search's columns; the column a filter reads, when not its name
                if extension in param:
                    definition[extension] = param[extension]
            found[match.group(1)] = definition
    return found


def data_fields(name: str) -> tuple[str, ...]:
    """Return the property names of an object's `data` in its response schema."""
    return tuple(schema(name)["properties"]["data"]["properties"])


_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def base_path() -> str:
    """Return the path every route of the API starts under: the path of the spec's first server URL."""
    return urllib.parse.urlsplit(raw()["servers"][0]["url"]).path.rstrip("/")


def _path_pattern(path: str) -> re.Pattern:
    """Match the request paths of a spec path (server base included, any value per parameter, a trailing slash allowed)."""
    pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(base_path() + path))
    return re.compile(f"^{pattern}/?$")


def path_pattern(operation_id: str) -> re.Pattern:
    """Return the pattern of the request paths an operation answers."""
    return _path_pattern(operation(operation_id)[0])


@functools.lru_cache(maxsize=1)
def _routes() -> list:
    routes = []
    for path, item in resolved()["paths"].items():
        routes.append((_path_pattern(path), sorted(m.upper() for m in item if m in _METHODS)))
    routes.append((re.compile(f"^{re.escape(base_path())}/openapi\\.json$"), ["GET"]))
    return routes


def allowed_methods(path: str) -> list[str]:
    """Return the methods the spec declares for a request path (for the Allow header)."""
    for pattern, methods in _routes():
        if pattern.match(path):
            return methods
    return []
