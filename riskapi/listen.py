"""`riskapi listen` and `riskapi trigger`: a developer's own machine receives the agency's events, signed.

`listen` opens a listen session (POST /listen-sessions), then holds its stream (server-sent events, a
connection out to the API: no inbound port, no tunnel, no certificate), POSTs each delivery to the
local URL with the exact body and headers a webhook gets, and reports the local answer, which the
service records as the delivery's attempt. Standard library only: the command needs no more than the
runtime installs. `trigger` sends an event type's example (POST /event-types/{event}/trigger).
"""

from __future__ import annotations

import datetime
import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import IO, Any

# The stream sends a comment every 15 s: a read that waits three times that long means the connection is dead.
READ_TIMEOUT = 45.0
# How long to keep trying to open the stream again: past the session's own end (60 s unheld), nothing would come.
RECONNECT_FOR = 50.0
# How long the local receiver may take, as a webhook's receiver may (RISKAPI_WEBHOOK_TIMEOUT's default).
FORWARD_TIMEOUT = 5.0


class ListenError(Exception):
    """The API refused a call, or could not be reached."""


class Unreachable(ListenError):
    """The API did not answer (restarting, or its process stopping): worth trying again."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # The API's 3xx is an answer, not followed (nor is the local receiver's: `forward` follows none either).
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# No proxy from the environment: the service is reached as given (and the local receiver, by `forward`, too).
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


class Api:
    """The riskapi API at a base URL (ending in /api/v1), called with an agency's token."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base.rstrip("/")
        self.token = token

    def request(self, method: str, path: str, body: Any = None, accept: str = "application/json") -> urllib.request.Request:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        return urllib.request.Request(self.base + path, data=data, headers=headers, method=method)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """Make one JSON call; return the answer's JSON, or raise ListenError with the API's message."""
        try:
            with _DIRECT.open(self.request(method, path, body), timeout=30) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise ListenError(f"{method} {path} answered {exc.code}: {_message(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ListenError(f"cannot reach {self.base}: {getattr(exc, 'reason', exc)}") from None

    def stream(self, session: str) -> Any:
        """Open a session's stream; raise ListenError (404: the session has ended)."""
        path = f"/listen-sessions/{session}/stream"
        try:
            return _DIRECT.open(self.request("GET", path, accept="text/event-stream"), timeout=READ_TIMEOUT)
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                raise Unreachable(f"GET {path} answered {exc.code}: {_message(exc)}") from None
            raise ListenError(f"GET {path} answered {exc.code}: {_message(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise Unreachable(f"cannot reach {self.base}: {getattr(exc, 'reason', exc)}") from None


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("message"))
    except (ValueError, AttributeError, OSError):
        return exc.reason


def events(stream: Any) -> Iterator[tuple[str, Any]]:
    """Yield each server-sent event of a stream as (name, parsed data); comments are skipped."""
    name, data = "message", list[str]()
    for raw in stream:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)


# What a webhook's attempt keeps of an answer's body (jobs.https.transport): nothing past it is read.
BODY_KEPT = 16 * 1024


def forward(url: str, delivery: dict) -> dict[str, Any]:
    """POST a delivery to the local URL as a webhook gets it; return the attempt to report: status, error,
    duration_ms, the request's headers as sent and the answer (null when none came).

    Sent as a worker sends a webhook's (jobs.https.transport): Host, the delivery's headers with their names as
    they are (urllib would have recased them, `Content-type`, `Webhook-Id`, and added its own), then
    Content-Length; nothing else. So the headers reported are every one the receiver got, as it got them."""
    body = delivery["body"].encode()
    parts = urllib.parse.urlsplit(url)
    sent = {"Host": parts.netloc.rpartition("@")[2], **delivery["headers"], "Content-Length": str(len(body))}
    started = time.monotonic()
    status, error, response = None, None, None
    try:
        status, response = _post(parts, body, sent)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        error = (str(exc) or type(exc).__name__)[:1000]
    ms = int((time.monotonic() - started) * 1000)
    return {"status": status, "error": error, "duration_ms": ms, "request_headers": sent, "response": response}


def _post(parts: urllib.parse.SplitResult, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """POST body with exactly these headers (no proxy, no redirect followed); return the status and the answer."""
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http:// or https:// URL: {parts.geturl()}")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=FORWARD_TIMEOUT)
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection.putrequest("POST", target, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, _answer(answer.status, answer.headers, answer)
    finally:
        connection.close()


def _answer(status: int, headers: Any, stream: Any) -> dict[str, Any]:
    """Return the local answer as a webhook's attempt keeps it: headers, and the body's first 16 KiB as text."""
    kept = stream.read(BODY_KEPT + 1)
    joined: dict[str, str] = {}
    for name, value in headers.items():
        joined[name] = f"{joined[name]}, {value}" if name in joined else value
    text = kept[:BODY_KEPT].decode("utf-8", "replace")
    return {"status": status, "headers": joined, "body": text, "body_truncated": len(kept) > BODY_KEPT}


def listen(api: Api, forward_to: str, names: list[str] | None, out: IO[str], channels: list[str] | None = None) -> int:
    """Forward the agency's events (of these channels, if named) to a local URL until Ctrl-C; return the exit code."""
    body: dict[str, Any] = {"forward_to": forward_to}
    if names:
        body["events"] = names
    if channels:
        body["channels"] = channels
    session = api.call("POST", "/listen-sessions", body)["data"]
    which = ", ".join(session["data"]["events"]) if names else "every event"
    if channels:
        which += " of channels " + ", ".join(session["data"]["channels"])
    secret = session["meta"]["signing_secret"]
    ready = f"Ready! Forwarding {which} to {forward_to}. Your webhook signing secret is {secret}"
    _say(out, f"{ready} (session {session['uuid']}; ^C to quit)")
    stream = None
    try:
        while True:
            # The API ends a stream now and then (and a dead connection times out): the session goes on in a new one.
            stream = _reopen(api, session["uuid"], out)
            try:
                for name, data in events(stream):
                    if name == "delivery":
                        _deliver(api, session["uuid"], forward_to, data, out)
            except (OSError, ValueError) as exc:
                _say(out, f"riskapi: the stream broke ({exc}); opening it again")
            stream.close()
    except KeyboardInterrupt:
        if stream is not None:
            stream.close()  # the API ends the session when its stream goes
        _say(out, f"Stopped listening (session {session['uuid']} ended).")
        return 0


def _reopen(api: Api, session: str, out: IO[str]) -> Any:
    """Open the session's stream, trying again for a while when the API does not answer (a process stopping)."""
    give_up = time.monotonic() + RECONNECT_FOR
    said = False
    while True:
        try:
            return api.stream(session)
        except Unreachable as exc:
            if time.monotonic() >= give_up:
                raise
            if not said:  # once, not every second
                _say(out, f"riskapi: {exc}; trying again for {RECONNECT_FOR:.0f} s")
                said = True
            time.sleep(1.0)


def _deliver(api: Api, session: str, forward_to: str, delivery: dict, out: IO[str]) -> None:
    attempt = forward(forward_to, delivery)
    status, error, ms = attempt["status"], attempt["error"], attempt["duration_ms"]
    path = f"/listen-sessions/{session}/deliveries/{delivery['delivery']}/attempts"
    try:
        api.call("POST", path, attempt)
    except ListenError as exc:
        _say(out, f"riskapi: the answer was not recorded: {exc}")
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    answer = f"[{status}]" if status is not None else f"[error: {error}]"
    _say(out, f"{when}  {delivery['event']}  {delivery['delivery']}  POST {forward_to} {answer} {ms} ms")


def trigger(api: Api, event: str, out: IO[str]) -> int:
    """Send an event type's example to the agency's listen sessions and subscribed webhooks; return the exit code."""
    accepted = api.call("POST", f"/event-types/{urllib.parse.quote(event, safe='')}/trigger")
    _say(out, json.dumps(accepted))
    return 0


def _say(out: IO[str], line: str) -> None:
    out.write(line + "\n")
    out.flush()


__all__ = ["Api", "ListenError", "Unreachable", "events", "forward", "listen", "trigger"]
