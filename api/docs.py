"""The spec as written, served at openapi.json and .yaml under the API's base path, for the docs page and for generators.

Its changelog (spec/CHANGELOG.md) is served beside it, at changelog.md, where the docs page links it.

Connexion's own copy has every `$ref` inlined (component names and their descriptions lost, a
client generated from it gets no named models) and shows `x-bearerInfoFunc`. This serves the file
itself, with implementation hints removed, before Connexion's Swagger UI middleware sees the path.
"""

import functools
from typing import Any

import orjson
import yaml
from connexion.middleware.swagger_ui import SwaggerUIMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

import spec

_INTERNAL = {"x-bearerInfoFunc", "x-openapi-router-controller"}
# Where Swagger UI serves its page and its files (api.app's swagger_ui_path).
DOCS = f"{spec.base_path()}/docs"
_PATHS = {f"{spec.base_path()}/openapi.json": "application/json", f"{spec.base_path()}/openapi.yaml": "application/yaml"}
_CHANGELOG = f"{spec.base_path()}/changelog.md"
_MARKDOWN = "text/markdown; charset=utf-8"


def _public(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _public(item) for key, item in value.items() if key not in _INTERNAL}
    if isinstance(value, list):
        return [_public(item) for item in value]
    return value


@functools.lru_cache(maxsize=3)
def document(media_type: str) -> bytes:
    """Return the public spec in JSON or YAML, or its changelog in Markdown."""
    if media_type == _MARKDOWN:
        return spec.CHANGELOG_PATH.read_bytes()
    public = _public(spec.raw())
    if media_type == "application/json":
        return orjson.dumps(public)
    return yaml.safe_dump(public, sort_keys=False, allow_unicode=True).encode()


class SpecMiddleware:
    """Answer GET of the spec documents with the spec as written; send only the docs pages on to Swagger UI."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # Connexion's Swagger UI middleware matches every request against its routes; only DOCS are its.
        self.past_docs = app.app if isinstance(app, SwaggerUIMiddleware) else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        media_type = _MARKDOWN if path == _CHANGELOG else _PATHS.get(path)
        if media_type is None or scope["method"] not in {"GET", "HEAD"}:
            if self.past_docs is not None and media_type is None and not path.startswith(DOCS):
                await self.past_docs(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        body = document(media_type)
        headers = [(b"content-type", media_type.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})
