"""Settings: typed, with defaults; a malformed value stops the service with one line naming its variable."""

import os
import subprocess
import sys

import pytest

from riskapi.config import Settings, SettingsError


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
    done = subprocess.run([sys.executable, "-m", "riskapi.process", *command], env=env, capture_output=True, timeout=60)
    assert done.returncode == 1
    [line] = done.stderr.decode().strip().splitlines()
    assert line.startswith(f"riskapi: {name}={value!r} is not a ")
