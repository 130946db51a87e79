"""Settings: typed, with defaults; a malformed value stops the service with one line naming its variable.

Every variable the service reads is an operator's, documented in README.md or docs/: none exists only for
tests, whose faults come from outside the product (tests.dies_after_commit).
"""

import ast
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from foundation.config import Settings, SettingsError


def test_defaults_and_typed_values():
    assert Settings.from_env({}) == Settings()
    env = {"RISKAPI_THREADS": " 8 ", "RISKAPI_WEBHOOK_ALLOW_PRIVATE": "Yes", "RISKAPI_WEBHOOK_RETRY_DELAYS": "1, 2.5"}
    read = Settings.from_env(env)
    assert read.threads == 8 and read.webhook_allow_private is True and read.webhook_retry_delays == (1.0, 2.5)
    assert Settings.from_env({"RISKAPI_ACCESS_LOG": "off"}).access_log is False
    assert Settings().write_delay == 0.0 and Settings.from_env({"RISKAPI_WRITE_DELAY_MS": "500"}).write_delay == 0.5


@pytest.mark.parametrize(
    "name,value,message",
    [
        ("RISKAPI_THREADS", "two", "RISKAPI_THREADS='two' is not a whole number"),
        ("RISKAPI_THREADS", "0", "RISKAPI_THREADS='0' is below its minimum, 1"),
        ("RISKAPI_WRITE_DELAY_MS", "-1", "RISKAPI_WRITE_DELAY_MS='-1' is below its minimum, 0"),
        ("RISKAPI_MAX_BODY_BYTES", "1e6", "RISKAPI_MAX_BODY_BYTES='1e6' is not a whole number"),
        ("RISKAPI_WEBHOOK_TIMEOUT", "5s", "RISKAPI_WEBHOOK_TIMEOUT='5s' is not a number of seconds"),
        ("RISKAPI_WEBHOOK_TIMEOUT", "nan", "RISKAPI_WEBHOOK_TIMEOUT='nan' is not a number of seconds"),
        ("RISKAPI_WEBHOOK_ROTATION_GRACE", "-1", "RISKAPI_WEBHOOK_ROTATION_GRACE='-1' is below its minimum, 0.0"),
        ("RISKAPI_WEBHOOK_ALLOW_PRIVATE", "maybe", "RISKAPI_WEBHOOK_ALLOW_PRIVATE='maybe' is not a boolean"),
        ("RISKAPI_WEBHOOK_RETRY_DELAYS", "10,x", "RISKAPI_WEBHOOK_RETRY_DELAYS='10,x' is not comma-separated numbers"),
        ("RISKAPI_WEBHOOK_RETRY_DELAYS", "10,-5", "RISKAPI_WEBHOOK_RETRY_DELAYS='10,-5' has a negative delay"),
    ],
)
def test_a_malformed_value_names_its_variable(name, value, message):
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({name: value})
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    "command,name,value",
    [
        (["serve"], "RISKAPI_WEBHOOK_TIMEOUT", "soon"),
        (["worker"], "RISKAPI_WEBHOOK_TIMEOUT", "soon"),
        (["db", "upgrade"], "RISKAPI_WEBHOOK_TIMEOUT", "soon"),
        (["serve"], "RISKAPI_WORKERS", "many"),
    ],
)
def test_the_command_line_stops_with_one_line_not_a_traceback(tmp_path, command, name, value):
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/x.db", **{name: value})
    done = subprocess.run([sys.executable, "-m", "riskapi", *command], env=env, capture_output=True, timeout=60)
    assert done.returncode == 1
    [line] = done.stderr.decode().strip().splitlines()
    assert line.startswith(f"riskapi: {name}={value!r} is not a ")


ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = ("riskapi", "api", "handlers", "services", "webhooks", "jobs", "models", "foundation", "spec")
# The service's own variables, named as literals wherever they are read (riskapi.cli: RISKAPI_WORKERS).
OWN = re.compile(r"RISKAPI_[A-Z0-9_]+")


class _Asking(dict):
    """An empty environment that remembers every variable asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return default


def read_by_settings() -> set[str]:
    """Return the variables Settings.from_env reads."""
    env = _Asking()
    Settings.from_env(env)
    return env.asked


def named_in_production() -> set[str]:
    """Return the variables production modules name: RISKAPI_* literals, and what os.environ or os.getenv reads."""
    names = set()
    for root in PRODUCTION:
        for path in (ROOT / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and OWN.fullmatch(node.value):
                    names.add(node.value)
                elif (key := _environ_key(node)) is not None:
                    names.add(key)
    return names


def _environ_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
        key = node.slice
    elif isinstance(node, ast.Call) and ast.unparse(node.func) in {"os.environ.get", "os.getenv"} and node.args:
        key = node.args[0]
    else:
        return None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def test_every_variable_the_service_reads_is_documented_for_operators():
    names = read_by_settings() | named_in_production()
    assert {"DATABASE_URL", "RISKAPI_THREADS", "RISKAPI_WORKERS", "PROMETHEUS_MULTIPROC_DIR"} <= names  # the scan sees them
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(path.read_text(encoding="utf-8") for path in documents)
    assert sorted(name for name in names if f"`{name}`" not in text) == []


def test_no_setting_or_variable_exists_for_tests():
    names = read_by_settings() | named_in_production()
    assert sorted(name for name in names if re.search(r"(^|_)TESTS?(_|$)", name)) == []
    assert [field.name for field in dataclasses.fields(Settings) if re.search(r"(^|_)tests?(_|$)", field.name)] == []
