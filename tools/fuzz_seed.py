"""Give a fuzzer real ids to reach every operation with: `eval "$(python3 -m tools.fuzz_seed)"`.

A fuzzer makes up a path's ids, and an id nobody made is a 404: without real ones, every operation on
a risk profile, a webhook, a delivery, an event or a listen session is fuzzed only as "not found".
This makes, over the API with the tenant's token (RISKAPI_API_URL and RISKAPI_TOKEN, or API and TOKEN,
as `riskapi quickstart` exports them; RISK, the tenant's risk profile), a few drivers, vehicles,
premises and buildings in the profile, a webhook and a ping delivery to it, and a listen session
with a delivery of its own, then prints their ids as the `export FUZZ_...` lines schemathesis.toml
reads. The standard library only: it runs with any `python3`.
"""

import json
import os
import shlex
import sys
import urllib.request
import uuid

WEBHOOK = {"type": "custom", "url": "https://hooks.example.com/riskapi", "events": ["driver.created"]}


class Api:
    """The API under fuzzing, called with the tenant's token."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: object = None) -> dict:
        """Send one request (a fresh Idempotency-Key on writes) and return its JSON answer."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers |= {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())}
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read() or b"{}")


def items(kind: str, *datas: dict) -> dict:
    """Return a bulk create body of `kind` objects."""
    return {"data": [{"object": kind, "data": data} for data in datas]}


def seed(api: Api, risk: str) -> dict[str, str]:
    """Make what the fuzzed operations act on and return the FUZZ_* variables naming it."""
    data = f"/risks/{risk}/data"
    api.call("POST", data + "/vehicles", items("vehicle", {"make": "Ford"}, {}))
    premise = api.call("POST", data + "/premises", items("premise", {"city": "Austin"}))["data"][0]["uuid"]
    api.call("POST", data + "/buildings", items("building", {"premise": premise}))
    api.call("POST", data + "/drivers", items("driver", {"first_name": "Ann"}, {"last_name": "Lee"}))
    webhook = api.call("POST", "/webhooks", items("webhook", WEBHOOK))["data"][0]["uuid"]
    ping = api.call("POST", f"/webhooks/{webhook}/ping")
    session = api.call("POST", "/listen-sessions", {"events": ["driver.created"]})["data"]["uuid"]
    triggered = api.call("POST", "/event-types/driver.created/trigger")
    (listened,) = [made["delivery"] for made in triggered["deliveries"] if made["webhook"] == session]
    return {
        "FUZZ_TOKEN": api.token,
        "FUZZ_RISK": risk,
        "FUZZ_WEBHOOK": webhook,
        "FUZZ_DELIVERY": ping["delivery"],
        "FUZZ_EVENT": ping["id"],
        "FUZZ_SESSION": session,
        "FUZZ_SESSION_DELIVERY": listened,
    }


def main() -> int:
    """Seed the API the environment names and print the export lines."""
    env = os.environ
    base, token, risk = (
        env.get("RISKAPI_API_URL") or env.get("API"),
        env.get("RISKAPI_TOKEN") or env.get("TOKEN"),
        env.get("RISK"),
    )
    if not (base and token and risk):
        sys.stderr.write(
            'fuzz_seed: set RISKAPI_API_URL, RISKAPI_TOKEN and RISK first: eval "$(python3 dev.py riskapi quickstart)"\n'
        )
        return 2
    exports = seed(Api(base, token), risk)
    sys.stdout.write("".join(f"export {name}={shlex.quote(value)}\n" for name, value in exports.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
