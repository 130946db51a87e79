"""The README's fuzz run and `tox -e fuzz` are one run: its settings name only what the seed makes, and it reaches them."""

import re
import tomllib
from pathlib import Path

from tools.fuzz_seed import Api, seed

ROOT = Path(__file__).resolve().parents[1]


def placeholders() -> set[str]:
    """Return the environment variables schemathesis.toml reads."""
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", (ROOT / "schemathesis.toml").read_text()))


def test_the_seed_gives_every_id_schemathesis_toml_reads_and_each_exists(client, server, tenant):
    made = seed(Api(server.url + "/api/v1", tenant.token), tenant.risk)
    assert placeholders() == set(made)
    h = tenant.headers
    webhook, delivery, event = made["FUZZ_WEBHOOK"], made["FUZZ_DELIVERY"], made["FUZZ_EVENT"]
    assert client.get(f"/webhooks/{webhook}/deliveries/{delivery}", headers=h).status_code == 200
    assert client.get(f"/events/{event}", headers=h).status_code == 200
    for kind in ("drivers", "vehicles", "premises", "buildings"):
        assert client.get(tenant.url(f"/{kind}"), headers=h).json()["data"], kind
    # The session's own delivery is the one its attempts are recorded for.
    session, listened = made["FUZZ_SESSION"], made["FUZZ_SESSION_DELIVERY"]
    attempt = {"status": 200, "duration_ms": 3}
    answer = client.post(f"/listen-sessions/{session}/deliveries/{listened}/attempts", json=attempt, headers=h)
    assert answer.status_code == 201, answer.text


def test_tox_fuzz_runs_the_readme_run_with_the_root_settings():
    config = tomllib.loads((ROOT / "schemathesis.toml").read_text())
    assert config["hooks"] == "tools/schemathesis_hooks.py"
    assert config["warnings"]["fail-on"] == ["missing_test_data"]
    # No check accepts more than its default: no expected status is widened anywhere.
    assert "expected-statuses" not in (ROOT / "schemathesis.toml").read_text()
    runner = (ROOT / "tests" / "fuzz.py").read_text()
    assert "--config-file" not in runner and "expected-statuses" not in runner and "cwd=ROOT" in runner
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Fuzzing the API") : readme.index("## Command line")]
    assert "python3 -m tools.fuzz_seed" in section and "--checks all" in section
    assert ":8000" not in section  # its own port, beside the quick start's


def test_the_hooks_take_a_body_of_any_shape_without_raising(monkeypatch):
    """A refused case's body may be anything: the hooks leave what is not theirs alone (a crash fails the fuzz run)."""
    import importlib.util
    import sys
    import types

    import yaml

    monkeypatch.setitem(sys.modules, "schemathesis", types.SimpleNamespace(hook=lambda function: function))
    loaded = importlib.util.spec_from_file_location("fuzz_hooks", ROOT / "tools" / "schemathesis_hooks.py")
    hooks = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(hooks)
    raw = yaml.safe_load((ROOT / "spec" / "openapi.yaml").read_text())
    odd = [None, 1, "x", [], {}, {"data": 1}, {"data": "x"}, {"data": [1, "x", None, [], {"object": 5}, {"uuid": 7}]}]
    for path, method in [
        ("/webhooks", "delete"),
        ("/webhooks", "patch"),
        ("/risks/{risk}/data", "delete"),
        ("/webhooks/{webhook}/recover", "post"),
    ]:
        operation = types.SimpleNamespace(
            path=path,
            method=method,
            schema=types.SimpleNamespace(raw_schema=raw),
            definition=types.SimpleNamespace(raw=raw["paths"][path][method]),
        )
        for body in odd:
            case = types.SimpleNamespace(operation=operation, body=body, headers={}, query={}, path_parameters={"risk": 5})
            hooks.before_call(None, case)
