"""ASGI middleware: body size limit, media type and coding, method override, Precognition headers, CORS's refusals in JSON."""

import re
from urllib.parse import parse_qsl, urlencode

import orjson
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import spec
from foundation import messages
from foundation.exceptions import ApiError, ValidationFailed

# What a POST may stand for, and where: the spec's overrideRiskData.
# What a POST to /risks/{risk}/data may stand for: the methods its body's `_method` maps.
_METHODS = list(
    spec.operation("overrideRiskData")[2]["requestBody"]["content"]["application/json"]["schema"]["discriminator"]["mapping"]
)
_OVERRIDABLE = spec.path_pattern("overrideRiskData")


_VARY = ((b"vary", b"Precognition"),)
_PRECOGNITIVE = (*_VARY, (b"precognition", b"true"))


class HeadersMiddleware:
    """Add `Vary: Precognition` to every response, and `Precognition: true` to precognitive ones."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        precognitive = any(name == b"precognition" and value.lower() == b"true" for name, value in scope["headers"])
        added = _PRECOGNITIVE if precognitive else _VARY

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Appended as raw pairs: no response header of these names is set anywhere else.
                message["headers"] = [*message.get("headers", ()), *added]
            await send(message)

        await self.app(scope, receive, send_with_headers)


_FILTER_ARRAY = re.compile(r"^(filter\[[^\[\]]+\])(\[[^\[\]]*\])+$")


def _flatten_filter_arrays(scope: Scope) -> Scope:
    """Turn `filter[x][]=a&filter[x][]=b` (or `[0]`, `[1]`) into `filter[x]=a,b`: Connexion fails on nested keys."""
    raw = scope.get("query_string", b"")
    if b"%5D%5B" not in raw.upper() and b"][" not in raw:
        return scope
    merged: dict[str, list[str]] = {}
    out: list[tuple[str, str | list[str]]] = []
    for key, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
        match = _FILTER_ARRAY.match(key)
        if match:
            name = match.group(1)
            if name not in merged:
                merged[name] = []
                out.append((name, merged[name]))
            merged[name].append(value)
        else:
            out.append((key, value))
    flat = [(key, ",".join(value) if isinstance(value, list) else value) for key, value in out]
    return dict(scope, query_string=urlencode(flat).encode("latin-1"))


# The content codings a body may be sent in (the spec's `x-content-encodings`): nothing decodes another.
_ENCODINGS = tuple(spec.raw()["x-content-encodings"])


def _check_encoding(headers: Headers) -> None:
    """Refuse a body in a coding the service does not decode: read as JSON it would be mojibake or a 400."""
    named = [part.strip().lower() for value in headers.getlist("content-encoding") for part in value.split(",")]
    offending = [name for name in named if name and name not in _ENCODINGS]
    if offending:
        text = f"The request body's Content-Encoding `{', '.join(offending)}` is not supported. Allowed encodings are "
        # RFC 7694: a 415 for a content coding names the accepted ones in Accept-Encoding.
        raise ApiError(415, text + messages.listing(_ENCODINGS) + ".", {"Accept-Encoding": ", ".join(_ENCODINGS)})


class BodyMiddleware:
    """Refuse bodies over the size limit, undeclared or encoded; let POST /risks/{risk}/data stand for PATCH or DELETE."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = 10 * 1024 * 1024) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise ApiError(400, "The Content-Length header is invalid.")
            if int(length) > self.max_body_bytes:
                raise ApiError(413, f"The request body is larger than {self.max_body_bytes} bytes.")
        has_body = (length is not None and length != "0") or "transfer-encoding" in headers
        if has_body and not headers.get("content-type"):
            # Guessing JSON would accept what a client never declared; the spec says 415.
            raise ApiError(415, "The request body must be JSON (Content-Type: application/json).")
        if has_body:
            _check_encoding(headers)
        receive = self._limited(receive)
        scope = _flatten_filter_arrays(scope)
        if scope["method"] == "POST" and _OVERRIDABLE.match(scope["path"]):
            scope, receive = await self._override(scope, receive, headers)
        await self.app(scope, receive, send)

    def _limited(self, receive: Receive) -> Receive:
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_body_bytes:
                raise ApiError(413, f"The request body is larger than {self.max_body_bytes} bytes.")
            return message

        return limited

    async def _override(self, scope: Scope, receive: Receive, headers: Headers) -> tuple[Scope, Receive]:
        header = headers.get("x-http-method-override")
        if header is not None and header.upper() not in _METHODS:
            # Read before routing (the spec's overrideRiskData), so refused here, naming what it may say.
            allowed = messages.message("in.allowed", "X-HTTP-Method-Override", values=messages.listing(_METHODS))
            raise ValidationFailed({"X-HTTP-Method-Override": [allowed]})
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            parsed = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            parsed = None
        named = parsed.get("_method") if isinstance(parsed, dict) else None
        method = header.upper() if header is not None else named.upper() if isinstance(named, str) else None
        if header is not None and named is not None and (not isinstance(named, str) or named.upper() != method):
            raise ValidationFailed({"_method": [messages.message("method_mismatch", "_method")]})
        if method in _METHODS:
            if named is not None and isinstance(parsed, dict):  # named is only set from a dict
                del parsed["_method"]
                body = orjson.dumps(parsed)
            scope = dict(scope, method=method, headers=list(scope["headers"]))
            MutableHeaders(scope=scope)["content-length"] = str(len(body))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return scope, replay


class RoutedOnlyMiddleware:
    """Answer 404/405 for requests the spec does not route, instead of letting Flask guess."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        routing = scope.get("extensions", {}).get("connexion_routing", {})
        if scope["type"] == "http" and not routing.get("operation_id"):
            methods = spec.allowed_methods(scope["path"])
            if methods and scope["method"] not in methods:
                raise ApiError(405, "The method is not allowed for this URL.")
            raise ApiError(404, "Not found.")
        await self.app(scope, receive, send)


# What Starlette names a refused part of a preflight, in the words of the API's errors.
_REFUSED = {
    "origin": "the origin is not allowed",
    "method": "the method is not allowed",
    "headers": "a request header is not allowed",
    "private-network": "private network access is not allowed",
}


class JsonCorsMiddleware(CORSMiddleware):
    """Answer preflights as Starlette does, but a refusal as `{"message", "status"}` JSON like every other error."""

    def preflight_response(self, request_headers: Headers) -> Response:
        """Return Starlette's preflight answer, its plain-text 400 turned into the API's JSON error."""
        answer = super().preflight_response(request_headers)
        if answer.status_code != 400:
            return answer
        # Starlette's text is "Disallowed CORS origin, method": the refused parts, in its order.
        text = bytes(answer.body).decode().removeprefix("Disallowed CORS ")
        parts = [_REFUSED.get(part.strip(), part.strip()) for part in text.split(",") if part.strip()]
        message = "CORS preflight refused: " + "; ".join(parts) + "."
        headers = {k: v for k, v in answer.headers.items() if k.lower() not in {"content-length", "content-type"}}
        return Response(orjson.dumps({"message": message, "status": 400}), 400, headers, media_type="application/json")
