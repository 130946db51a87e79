"""The OpenAPI document: loaded once, read by Python instead of re-listing it."""

import functools
import pathlib
import re

import yaml
from connexion.json_schema import ExtendedSafeLoader, resolve_refs

SPEC_PATH = pathlib.Path(__file__).resolve().parent.parent / "spec" / "openapi.yaml"


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


def operation(operation_id: str) -> tuple[str, str, dict]:
    """Return (path, method, resolved operation) of an operationId."""
    for path, item in resolved()["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and op.get("operationId") == operation_id:
                return path, method, op
    raise KeyError(operation_id)


def parameter(operation_id: str, name: str) -> dict:
    """Return the resolved parameter of an operation."""
    path, _, op = operation(operation_id)
    shared = resolved()["paths"][path].get("parameters", [])
    for param in list(op.get("parameters", [])) + list(shared):
        if param["name"] == name:
            return param
    raise KeyError(name)


def data_fields(name: str) -> tuple[str, ...]:
    """Return the property names of an object's `data` in its response schema."""
    return tuple(schema(name)["properties"]["data"]["properties"])


_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@functools.lru_cache(maxsize=1)
def _routes() -> list:
    base = resolved()["servers"][0]["url"].rstrip("/")
    routes = []
    for path, item in resolved()["paths"].items():
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(base + path))
        routes.append((re.compile(f"^{pattern}/?$"), sorted(m.upper() for m in item if m in _METHODS)))
    routes.append((re.compile(f"^{re.escape(base)}/openapi\\.json$"), ["GET"]))
    return routes


def allowed_methods(path: str) -> list[str]:
    """Return the methods the spec declares for a request path (for the Allow header)."""
    for pattern, methods in _routes():
        if pattern.match(path):
            return methods
    return []
