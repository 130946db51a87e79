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
- a webhook url's host is public: a host under a name the spec lists as never public
  (WebhookUrl's `x-not-public-names`) gets `.com` added;
- a webhook's own header names are HTTP tokens, unique regardless of case, and none the delivery
  sets itself (WebhookHeaders' `x-name-pattern`, `x-refused-names`, `x-refused-prefixes`): a name
  that breaks one becomes `X-Fuzz-<n>`, its value kept;
- an update's `type` is the webhook's own (it cannot be changed);
- a risk-data write follows InvalidWrite's rules: an update's or delete's `uuid` names an object of
  its kind in the profile, once in the request (one made for it, unless it names one the run made:
  a premise made for a delete has no buildings; a driver whose address is updated has one), a
  `vehicle` or `premise` names one that exists, a `number` is one no object of its kind has,
  `profile_type` is the profile's;
- a recover's `until`, when given, is after its `since` (WebhookRecover's `x-after`);
- a request target fits the HTTP server's 65,535 bytes (the spec's conventions), which answers a longer
  one in plain text before the API sees it: a query value over 8,000 characters (every value a query
  parameter takes is under 4,000) is cut to one character over its `maxLength` (or to 200, a bounded
  pattern's values being shorter), still one the schema refuses.

The fuzzer's token is FUZZ_TOKEN and its webhook FUZZ_WEBHOOK (README, "Fuzzing the API"), never
named by a bulk update or delete, so the operations on it keep reaching it; lookups go to the API
under test.
"""

import os
import re
import uuid
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

import requests
import schemathesis

HEADER = "Idempotency-Key"
# The parameter's schema: 1 to 255 printable ASCII characters, no space at either end.
VALID = re.compile(r"[!-~]([ -~]*[!-~])?")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# What a webhook made for a bulk update or delete to name looks like.
SPARE_WEBHOOK = {
    "object": "webhook",
    "data": {"type": "custom", "url": "https://fuzz.riskapi.dev/hook", "events": ["driver.created"]},
}


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    """Make the request one a client following the spec's rules would send."""
    own_idempotency_key(case)
    public_urls(case)
    header_names(case)
    if case.operation.path == "/webhooks" and case.operation.method.lower() in {"patch", "delete"}:
        existing_webhooks(case)
    if case.operation.path.startswith("/risks/{risk}/data"):
        risk_data_rules(case)
    if case.operation.path.endswith("/recover"):
        until_after_since(case)
    fitting_url(case)
    if isinstance(case.query, dict) and _valid_cursor(case, case.query.get("cursor")):
        signed_cursor(case)


def own_idempotency_key(case) -> None:
    """Give each request with a schema-valid Idempotency-Key a key of its own."""
    headers = case.headers or {}
    for name, value in list(headers.items()):
        if name.lower() == HEADER.lower() and isinstance(value, str) and len(value) <= 255 and VALID.fullmatch(value):
            headers[name] = str(uuid.uuid4())


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


def _items(case) -> list[dict]:
    """Return the objects of a bulk body's `data` list; none when the body or its `data` is of another shape."""
    items = case.body.get("data") if isinstance(case.body, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def existing_webhooks(case) -> None:
    """Have each schema-valid uuid of a bulk update or delete name a distinct webhook of the agency (made if need be)."""
    named = [item for item in _items(case) if isinstance(item.get("uuid"), str)]
    named = [item for item in named if UUID.fullmatch(item["uuid"])]
    if not named:
        return
    listed = _api(case, "GET", "/webhooks", params={"per_page": 100}).json().get("data", [])
    listed = [hook for hook in listed if hook["uuid"] != os.environ.get("FUZZ_WEBHOOK")]
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


def until_after_since(case) -> None:
    """Swap a recover's `until` and the field its `x-after` names when it is not after it (drop it when equal)."""
    body = case.body if isinstance(case.body, dict) else {}
    after = case.operation.schema.raw_schema["components"]["schemas"]["WebhookRecover"]["properties"]["until"]["x-after"]
    since, until = _moment(body.get(after)), _moment(body.get("until"))
    if since is None or until is None or until > since:
        return
    if until == since:
        del body["until"]
    else:
        body[after], body["until"] = body["until"], body[after]


def _moment(value) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00")) if isinstance(value, str) else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


def risk_data_rules(case) -> None:
    """Make each schema-valid item of a risk-data write name what exists in the profile, as a client would."""
    kinds = case.operation.schema.raw_schema["components"]["schemas"]["ObjectKind"]["enum"]
    items = [item for item in _items(case) if isinstance(item.get("object"), str) and item["object"] in kinds]
    if not items:
        return
    risk = (case.path_parameters or {}).get("risk")
    profile = _profile_type(case, risk)
    if profile is None:  # not one of the agency's profiles: a 404 whatever the body says
        return
    named: set[tuple[str, str]] = set()
    for item in items:
        kind = item["object"]
        if isinstance(item.get("profile_type"), str) and item["profile_type"] in PROFILE_TYPES:
            item["profile_type"] = profile
        uuid_ = item.get("uuid")
        data = item.get("data") if isinstance(item.get("data"), dict) else {}
        # One the run made (a link of the stateful phase) stays; one that names nothing becomes one made for it.
        # A driver's address update names a driver with an address (one without gets it made: a create's rules).
        needs = {"include": "address"} if kind == "driver" and isinstance(data.get("address"), dict) else {}
        if isinstance(uuid_, str) and UUID.fullmatch(uuid_):
            if (kind, uuid_) in named or not _exists(case, risk, kind, uuid_, **needs):
                item["uuid"] = _made(case, risk, kind, {})["uuid"]
            named.add((kind, item["uuid"]))  # each once in a request
        for field in REFERENCES:
            if isinstance(data.get(field), str) and UUID.fullmatch(data[field]):
                data[field] = _existing(case, risk, field)["uuid"]
            elif _is_number(data.get(field)):  # a reference by number
                data[field] = _existing(case, risk, field)["data"]["number"]
    # Numbers last: what was made above took numbers of its own.
    numbers: dict[str, int] = {}
    for item in items:
        data = item.get("data")
        if isinstance(data, dict) and _is_number(data.get("number")):
            kind = item["object"]
            numbers[kind] = numbers.get(kind) or _highest(case, risk, kind)
            numbers[kind] += 1
            data["number"] = numbers[kind]


def _is_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


ADDRESS = {"address": "1 Fuzz Street", "city": "Austin", "state": "TX", "zip": "78701"}
PROFILE_TYPES = {"commercial", "personal"}
# The reference fields, each naming an object of its own name's kind (InvalidWrite's description).
REFERENCES = ("vehicle", "premise")
_profiles: dict[str, str] = {}


def _profile_type(case, risk) -> str | None:
    if not isinstance(risk, str):
        return None
    if risk not in _profiles:
        listed = _api(case, "GET", "/risks", params={"per_page": 100}).json()["data"]
        _profiles.update({profile["uuid"]: profile["data"]["type"] for profile in listed})
    return _profiles.get(risk)


def _listing(case, risk: str, kind: str, **params) -> list[dict]:
    answer = _api(case, "GET", f"/risks/{risk}/data/{kind}s", params={"per_page": 10, **params})
    answer.raise_for_status()
    return answer.json()["data"]


def _exists(case, risk: str, kind: str, uuid_: str, **params) -> bool:
    if kind == "address":
        return False
    listed = _listing(case, risk, kind, **{"filter[uuid]": uuid_}, **params)
    return bool(listed) and all(listed[0]["relations"].get(name) for name in params.get("include", "").split(",") if name)


def _highest(case, risk: str, kind: str) -> int:
    listed = _listing(case, risk, kind, sort="-number")
    return listed[0]["data"]["number"] if listed else 0


def _existing(case, risk: str, kind: str) -> dict:
    listed = _listing(case, risk, kind)
    return listed[0] if listed else _made(case, risk, kind, {})


def _made(case, risk: str, kind: str, data: dict) -> dict:
    if kind == "address":  # a driver's: made with one
        _made(case, risk, "driver", {})
        return _listing(case, risk, "driver", sort="-number", include="address")[0]["relations"]["address"]
    if kind == "driver":
        data = {"address": {"data": ADDRESS}, **data}
    if kind == "building":
        data = {**data, "premise": _existing(case, risk, "premise")["uuid"]}
    answer = _api(case, "POST", f"/risks/{risk}/data/{kind}s", json={"data": [{"object": kind, "data": data}]})
    answer.raise_for_status()
    return answer.json()["data"][0]


# Every value a query parameter accepts is shorter (maxLength 3,700 at most, or a bounded pattern's).
URL_CUT = 8000


def fitting_url(case) -> None:
    """Cut an over-long query value to one still refused, so that the request target fits the HTTP server's limit."""
    for name, value in (case.query or {}).items() if isinstance(case.query, dict) else ():
        if isinstance(value, str) and len(value) > URL_CUT:
            limit = _query_schema(case, name).get("maxLength")
            case.query[name] = value[: limit + 1 if isinstance(limit, int) else 200]


def _query_schema(case, name: str) -> dict:
    raw = case.operation.schema.raw_schema
    path_item = raw["paths"][case.operation.path]
    for parameter in [*path_item.get("parameters", []), *case.operation.definition.raw.get("parameters", [])]:
        parameter = _resolved(raw, parameter)
        if parameter.get("in") == "query" and parameter.get("name") == name:
            return _resolved(raw, parameter.get("schema", {}))
    return {}


def _resolved(raw: dict, node: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        target = raw
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node
