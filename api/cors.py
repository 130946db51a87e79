"""CORS (RISKAPI_CORS_ORIGINS): Starlette's middleware, its refused preflights answered in the API's JSON error format."""

import orjson
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

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
