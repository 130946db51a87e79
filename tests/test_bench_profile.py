"""bench.profile.pyspy's reading of py-spy's collapsed stacks, on made-up samples (the profiles themselves are benchmarks)."""

from pathlib import Path

from bench.profile import pyspy

SERVE = 'process 10:"/v/bin/python -m riskapi serve --no-worker --workers 2 --port 8000"'
# serve's API processes run `python -c "import sys; from riskapi.sockets import run; ..."`: `;` in a frame.
API = 'process 11:"/v/bin/python -c import sys; from riskapi.sockets import run; run(sys.argv[1]) 127.0.0.1 8000"'
WORKER = 'process 12:"/v/bin/python -m riskapi worker"'


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "profile.raw"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_samples_are_counted_by_the_role_of_their_innermost_process(tmp_path):
    raw = write(
        tmp_path,
        [
            f"{SERVE};{API};thread (11): handler-1;list_page (handlers/common.py:90);fetch (services/render.py:12) 6",
            f"{SERVE};{API};thread (11): MainThread;send (uvicorn/protocols/http/httptools_impl.py:400) 2",
            f"{SERVE};{WORKER};thread (12): MainThread;write (jobs/outcomes.py:10);execute (peewee.py:3300) 3",
            f"{SERVE};thread (10): supervisor;wait (threading.py:600) 1",
        ],
    )
    profile = pyspy.Profile().add(raw)
    assert profile.total == {"api": 9, "worker": 3}
    assert profile.selfs["api"]["fetch (services/render.py)"] == 6
    assert profile.incl["api"]["list_page (handlers/common.py)"] == 6
    assert profile.modules["api"] == {"services/render.py": 6, "uvicorn": 2, "threading": 1}
    assert profile.module_incl["worker"] == {"jobs/outcomes.py": 3}
    assert profile.project_incl["api"]["list_page (handlers/common.py)"] == 6


def test_a_function_recursing_counts_once_inclusive(tmp_path):
    raw = write(tmp_path, ["thread (1): MainThread;walk (services/render.py:5);walk (services/render.py:5) 4"])
    profile = pyspy.Profile().add(raw)
    assert profile.total == {"other": 4}
    assert profile.incl["other"]["walk (services/render.py)"] == 4
    assert profile.selfs["other"]["walk (services/render.py)"] == 4


def test_roles_by_command_line():
    assert pyspy.role("/v/bin/python -m riskapi serve --no-worker --workers 1") == "api"
    assert pyspy.role("/v/bin/python -c import sys; from riskapi.sockets import run; run()") == "api"
    assert pyspy.role("/v/bin/python -m riskapi worker") == "worker"
    assert pyspy.role("/v/bin/python -m bench.soak --seconds 20") == "other"
