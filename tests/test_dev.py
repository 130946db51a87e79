"""dev.py: `serve` and `riskapi` run in one tox environment with the runtime dependencies alone, and a first run says so.

How dev.py passes signals on is tried from outside, with real signals, in tests/test_dev_signals.py.
"""

import configparser
import os
import pathlib
import signal
import sys

import pytest

import dev

ROOT = pathlib.Path(__file__).resolve().parent.parent


class Commands(list):
    """The commands run, shortened to `tox ARGS` or `riskapi ARGS`; `codes` gives some an exit status other than 0."""

    def __init__(self):
        super().__init__()
        self.codes: dict[tuple[str, ...], int] = {}  # by the command's first two words


@pytest.fixture
def commands(monkeypatch, tmp_path):
    """What dev.main would run, with no environment yet (a fresh clone)."""
    calls = Commands()

    def run(parent, command, env=None):
        if command[0] == "python":  # python -m tox -c tox.ini ...
            shown = ["tox", *command[5:]]
        else:
            assert command[0] == str(dev.RUN_ENV / dev.BIN / "riskapi") and env["VIRTUAL_ENV"] == str(dev.RUN_ENV)
            shown = ["riskapi", *command[1:]]
        calls.append(shown)
        return calls.codes.get(tuple(shown[:2]), 0)

    monkeypatch.setattr(dev, "tox_python", lambda: pathlib.Path("python"))
    monkeypatch.setattr(dev.Parent, "run", run)
    monkeypatch.setattr(dev, "RUN_ENV", tmp_path / ".tox" / "run")
    return calls


def test_serve_and_the_command_line_share_the_run_environment(commands):
    assert dev.main(["serve", "--", "--port", "9000"]) == 0
    assert dev.main(["serve", "--port", "9000"]) == 0
    assert dev.main(["riskapi", "agency", "list"]) == 0
    assert dev.main(["test", "-e", "lint"]) == 0
    # tox makes the environment (or brings it up to date), then riskapi runs in it without tox in between.
    assert commands == [
        ["tox", "-e", "run", "--notest"],
        ["riskapi", "serve", "--port", "9000"],
        ["tox", "-e", "run", "--notest"],
        ["riskapi", "serve", "--port", "9000"],
        ["tox", "-qq", "-e", "run", "--notest"],
        ["riskapi", "agency", "list"],
        ["tox", "-e", "lint"],
    ]


def test_a_failed_install_runs_nothing_and_exits_with_tox_s_status(commands):
    commands.codes[("tox", "-qq")] = 1
    assert dev.main(["riskapi", "agency", "list"]) == 1
    assert commands == [["tox", "-qq", "-e", "run", "--notest"]]


def test_the_run_environment_installs_no_test_extras():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    run = tox["testenv:run"]
    assert run["extras"].strip() == "" and "deps" not in run  # [testenv]'s `extras = test` is overridden
    assert run["commands"].strip() == "riskapi {posargs}"
    # One environment for both: tox 4 rebuilds a directory that two environments share, so there is no second one.
    assert not {"testenv:serve", "testenv:cli"} & set(tox.sections())


def test_a_first_run_says_what_it_installs_on_stderr_and_a_later_one_says_nothing(commands, capsys):
    dev.main(["riskapi", "agency", "list"])
    first = capsys.readouterr()
    assert first.out == ""  # a command's stdout stays its own (`eval "$(... quickstart)"` reads it)
    assert first.err.startswith("riskapi: first run: installing") and "runtime environment" in first.err
    assert "about" in first.err
    dev.RUN_ENV.mkdir(parents=True)
    dev.main(["serve"])
    dev.main(["test"])
    assert capsys.readouterr().err == ""


def test_a_later_run_runs_riskapi_without_tox_until_the_package_declaration_changes(commands, monkeypatch, tmp_path):
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    for name in ("setup.cfg", "pyproject.toml", ".tox/run/.tox-info.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, (1000, 1000 if name != ".tox/run/.tox-info.json" else 2000))
    dev.main(["riskapi", "agency", "list"])
    os.utime(tmp_path / "setup.cfg", (3000, 3000))  # a pull changed the dependencies: tox installs them
    dev.main(["riskapi", "agency", "list"])
    assert commands == [
        ["riskapi", "agency", "list"],
        ["tox", "-qq", "-e", "run", "--notest"],
        ["riskapi", "agency", "list"],
    ]


def test_the_exit_status_is_the_child_s_and_a_signal_s_as_a_shell_gives_it():
    with dev.Parent() as parent:
        assert parent.run([sys.executable, "-c", "raise SystemExit(3)"]) == 3
        assert parent.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]) == 143
        parent.stopped = signal.SIGINT  # asked to stop between two steps: the next one does not start
        assert parent.run([sys.executable, "-c", "raise SystemExit(3)"]) == 130
