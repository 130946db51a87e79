"""dev.py: `serve` and `riskapi` run in one tox environment with the runtime dependencies alone, and a first run says so."""

import configparser
import os
import pathlib

import pytest

import dev

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture
def tox_calls(monkeypatch, tmp_path):
    """The arguments dev.main would give tox (after `python -m tox -c tox.ini`), with no environment yet (a fresh clone)."""
    calls = []
    monkeypatch.setattr(dev, "tox_python", lambda: pathlib.Path("python"))
    monkeypatch.setattr(dev.subprocess, "call", lambda args, cwd: calls.append(args[5:]) or 0)
    monkeypatch.setattr(dev, "RUN_ENV", tmp_path / ".tox" / "run")
    return calls


def test_serve_and_the_command_line_share_the_run_environment(tox_calls):
    assert dev.main(["serve", "--", "--port", "9000"]) == 0
    assert dev.main(["serve", "--port", "9000"]) == 0
    assert dev.main(["riskapi", "agency", "list"]) == 0
    assert dev.main(["test", "-e", "lint"]) == 0
    assert tox_calls == [
        ["-e", "run", "--", "serve", "--port", "9000"],
        ["-e", "run", "--", "serve", "--port", "9000"],
        ["-qq", "-e", "run", "--", "agency", "list"],
        ["-e", "lint"],
    ]


def test_the_run_environment_installs_no_test_extras():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    run = tox["testenv:run"]
    assert run["extras"].strip() == "" and "deps" not in run  # [testenv]'s `extras = test` is overridden
    assert run["commands"].strip() == "riskapi {posargs}"
    # One environment for both: tox 4 rebuilds a directory that two environments share, so there is no second one.
    assert not {"testenv:serve", "testenv:cli"} & set(tox.sections())


def test_a_first_run_says_what_it_installs_on_stderr_and_a_later_one_says_nothing(tox_calls, capsys):
    dev.main(["riskapi", "agency", "list"])
    first = capsys.readouterr()
    assert first.out == ""  # a command's stdout stays its own (`eval "$(... quickstart)"` reads it)
    assert first.err.startswith("riskapi: first run: installing") and "runtime environment" in first.err
    assert "about" in first.err
    dev.RUN_ENV.mkdir(parents=True)
    dev.main(["serve"])
    dev.main(["test"])
    assert capsys.readouterr().err == ""


def test_a_later_run_skips_tox_rebuilding_the_editable_install_until_the_package_declaration_changes(
    tox_calls, monkeypatch, tmp_path
):
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    for name in ("setup.cfg", "pyproject.toml", ".tox/run/.tox-info.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, (1000, 1000 if name != ".tox/run/.tox-info.json" else 2000))
    dev.main(["riskapi", "agency", "list"])
    os.utime(tmp_path / "setup.cfg", (3000, 3000))  # a pull changed the dependencies: tox installs them
    dev.main(["riskapi", "agency", "list"])
    assert tox_calls == [
        ["--skip-pkg-install", "-qq", "-e", "run", "--", "agency", "list"],
        ["-qq", "-e", "run", "--", "agency", "list"],
    ]
