"""Schemathesis hooks for fuzzing riskapi from outside (loaded by the repository's schemathesis.toml).

A JSON Schema says what a request looks like, not what exists or what belongs together; the spec
states five rules of that kind in words, each answered 422 naming the field. A generator knows none
of them, so it sends requests a real client never would and reads the 422 as "a valid request
rejected". These hooks make the fuzzer the client the spec describes, as Schemathesis advises
("extend generators to match runtime rules"), and only for values the schema accepts, so no case
turns from positive to negative or back, and what the service accepts is unchanged:

- an `Idempotency-Key` names one request: each request gets a key of its own (a UUID);
- a bulk update or delete names webhooks that exist: each uuid becomes one of the agency's own;
- a `cursor` is one the service signed for that list and sort: it becomes the one the first page
  gives, or is left out when there is no second page;
- `_method` and `X-HTTP-Method-Override`, when both are sent, name the same method;
- a webhook url's host is public: a host under a name the spec lists as never public
  (WebhookUrl's `x-not-public-names`) gets `.com` added;
- a webhook's own header names are HTTP tokens, unique regardless of case, and none the delivery
  sets itself (WebhookHeaders' `x-name-pattern`, `x-refused-names`, `x-refused-prefixes`): a name
  that breaks one becomes `X-Fuzz-<n>`, its value kept;
- an update's `type` is the webhook's own (it cannot be changed).

The fuzzer's token is FUZZ_TOKEN (README, "Fuzzing the API"); lookups go to the API under test.
"""

import os
import re
import uuid
from urllib.parse import urlsplit, urlunsplit

import requests
import schemathesis

HEADER = "Idempotency-Key"
# The parameter's schema: 1 to 255 printable ASCII characters, no space at either end.
VALID = re.compile(r"[!-~]([ -~]*[!-~])?")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
OVERRIDE = "X-HTTP-Method-Override"
# What a webhook made for a bulk update or delete to name looks like.
SPARE_WEBHOOK = {
    "object": "webhook",
    "data": {"type": "custom", "url": "https://fuzz.riskapi.dev/hook", "events": ["driver.created"]},
}


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    """Make the request one a client following the spec's rules would send."""
    own_idempotency_key(case)
    same_method(case)
    public_urls(case)
    header_names(case)
    if case.operation.path == "/webhooks" and case.operation.method.lower() in {"patch", "delete"}:
        existing_webhooks(case)
    if isinstance(case.query, dict) and _valid_cursor(case, case.query.get("cursor")):
        signed_cursor(case)


def own_idempotency_key(case) -> None:
    """Give each request with a schema-valid Idempotency-Key a key of its own."""
    headers = case.headers or {}
    for name, value in list(headers.items()):
        if name.lower() == HEADER.lower() and isinstance(value, str) and len(value) <= 255 and VALID.fullmatch(value):
            headers[name] = str(uuid.uuid4())


def same_method(case) -> None:
    """With both `_method` and the override header sent, have the header name the body's method."""
    headers = case.headers or {}
    methods = case.operation.schema.raw_schema["components"]["schemas"]["MethodOverride"]["enum"]
    method = case.body.get("_method") if isinstance(case.body, dict) else None
    for name in list(headers):
        if name.lower() == OVERRIDE.lower() and method in methods and headers[name] in methods:
            headers[name] = method


def public_urls(case) -> None:
    """Add `.com` to a webhook url's host under a name the spec lists as never public."""
    names = case.operation.schema.raw_schema["components"]["schemas"]["WebhookUrl"]["x-not-public-names"]
    for data in _webhook_items(case):
        if isinstance(data.get("url"), str):
            data["url"] = _public(data["url"], names)


def _webhook_items(case) -> list[dict]:
    """Return the `data` objects of a webhook create or update body's items."""
    if case.operation.path != "/webhooks" or not isinstance(case.body, dict) or not isinstance(case.body.get("data"), list):
        return []
    return [item["data"] for item in case.body["data"] if isinstance(item, dict) and isinstance(item.get("data"), dict)]


def header_names(case) -> None:
    """Rename a webhook's own header whose name breaks the spec's name rules to `X-Fuzz-<n>`, keeping its value."""
    rules = case.operation.schema.raw_schema["components"]["schemas"]["WebhookHeaders"]
    token = re.compile(rules["x-name-pattern"])
    refused = {name.lower() for name in rules["x-refused-names"]}
    prefixes = tuple(prefix.lower() for prefix in rules["x-refused-prefixes"])
    for data in _webhook_items(case):
        headers = data.get("headers")
        if not isinstance(headers, dict):
            continue
        kept: dict = {}
        for n, (name, value) in enumerate(headers.items()):
            lowered = name.lower()
            fine = token.match(name) and lowered not in refused and not lowered.startswith(prefixes)
            if not fine or lowered in {k.lower() for k in kept}:
                name = f"X-Fuzz-{n}"
            kept[name] = value
        data["headers"] = kept


def _public(url: str, names: list[str]) -> str:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return url
    name = host.rstrip(".").lower()
    if not any(name == suffix or name.endswith("." + suffix) for suffix in names):
        return url
    userinfo, at, hostport = parts.netloc.rpartition("@")
    port = hostport[len(host) :] if hostport.lower().startswith(host) else ""
    return urlunsplit((parts.scheme, f"{userinfo}{at}{name}.com{port}", parts.path, parts.query, parts.fragment))


def _api(case, method: str, path: str, **kwargs) -> requests.Response:
    headers = {"Authorization": f"Bearer {os.environ['FUZZ_TOKEN']}", HEADER: str(uuid.uuid4()), **kwargs.pop("headers", {})}
    return requests.request(method, case.operation.schema.get_base_url() + path, headers=headers, timeout=30, **kwargs)


def existing_webhooks(case) -> None:
    """Have each schema-valid uuid of a bulk update or delete name a distinct webhook of the agency (made if need be)."""
    items = case.body.get("data") if isinstance(case.body, dict) else None
    named = [item for item in items or [] if isinstance(item, dict) and isinstance(item.get("uuid"), str)]
    named = [item for item in named if UUID.fullmatch(item["uuid"])]
    if not named:
        return
    listed = _api(case, "GET", "/webhooks", params={"per_page": 100}).json().get("data", [])
    if len(listed) < len(named):
        made = _api(case, "POST", "/webhooks", json={"data": [SPARE_WEBHOOK] * (len(named) - len(listed))})
        listed += made.json().get("data", [])
    types = case.operation.schema.raw_schema["components"]["schemas"]["WebhookType"]["enum"]
    for item, existing in zip(named, listed, strict=False):
        item["uuid"] = existing["uuid"]
        data = item.get("data")
        if isinstance(data, dict) and data.get("type") in types:
            data["type"] = existing["data"]["type"]


def _valid_cursor(case, cursor) -> bool:
    schema = case.operation.schema.raw_schema["components"]["parameters"]["Cursor"]["schema"]
    return isinstance(cursor, str) and len(cursor) <= schema["maxLength"] and re.search(schema["pattern"], cursor) is not None


def signed_cursor(case) -> None:
    """Replace a cursor by the one the first page of the same query gives, or leave it out if that page is the last."""
    query = {name: value for name, value in case.query.items() if name != "cursor"}
    answer = _api(case, "GET", case.formatted_path, params=query)
    cursor = answer.json().get("next_cursor") if answer.status_code == 200 else None
    if cursor is None:
        del case.query["cursor"]
    else:
        case.query["cursor"] = cursor
