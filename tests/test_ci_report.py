"""tools.ci_report: a failing test's id, message and traceback, read back from pytest's JUnit report."""

import subprocess
import sys

from tools import ci_report


def test_the_report_names_each_failed_test_with_its_message_and_traceback(tmp_path, capsys):
    (tmp_path / "test_sample.py").write_text(
        "def test_passes():\n    assert True\n\n"
        "def test_fails():\n    seen = 12\n    assert seen <= 11, 'most attempts in one second'\n"
    )
    report = tmp_path / "junit.xml"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stdout

    assert ci_report.main([str(report), str(tmp_path / "absent.xml")]) == 0
    out = capsys.readouterr().out
    assert f"{report}: 1 failed" in out
    assert "FAILURE test_sample::test_fails" in out and "test_passes" not in out
    assert "most attempts in one second" in out and "| E       AssertionError" in out
    assert f"{tmp_path / 'absent.xml'}: no report" in out
