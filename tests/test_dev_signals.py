"""dev.py as a parent, tried from outside: a real SIGINT or SIGTERM sent to `dev.py serve` or `dev.py riskapi listen`
(to dev.py alone, as `kill` or a process manager sends it) stops the command: exit 0, no traceback, no process left."""

import json
import os
import signal
import subprocess
import sys
import threading

import psutil
import pytest

from toolkit import ROOT
from toolkit.serving import answers, free_port, stop_serve, wait_until

# Roomy: the first run provisions .tox/run (tox, then pip), and a busy machine is slow. Never a duration asserted on.
PROVISION = 900.0
START = 180.0


def user_env(tmp_path) -> dict:
    """The environment of a user at a terminal: a SQLite file, no Redis (serve embeds one), nothing of tox's."""
    env = {
        name: value
        for name, value in os.environ.items()
        # Under `tox -e py` the suite has tox's variables: dev.py's own tox would read TOX_* as its options.
        if not name.startswith("TOX_") and name not in {"VIRTUAL_ENV", "REDIS_URL", "PYTHONPATH"}
    }
    env.update(DATABASE_URL=f"sqlite:///{tmp_path}/dev.db", PYTHONUNBUFFERED="1")
    return env


@pytest.fixture(scope="module")
def provisioned(tmp_path_factory):
    """.tox/run made (the first `dev.py` run makes it), so that each test's wait is for its command alone."""
    env = user_env(tmp_path_factory.mktemp("provision"))
    done = subprocess.run(
        [sys.executable, "dev.py", "riskapi", "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=PROVISION
    )
    assert done.returncode == 0, done.stdout + done.stderr


class DevPy:
    """`python3 dev.py ARGS` as a user starts it; its output collected, and every process of its tree as it runs."""

    def __init__(self, env: dict, *args: str):
        self.process = subprocess.Popen(
            [sys.executable, "dev.py", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self.tree: dict[int, psutil.Process] = {}
        self.me = psutil.Process(self.process.pid)
        threading.Thread(target=self._read, daemon=True).start()
        self.watcher = threading.Thread(target=self._watch, daemon=True)
        self.watcher.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def _watch(self):
        # Every descendant seen while dev.py runs (the worker's scheduler is forked after the worker starts).
        while self.process.poll() is None:
            try:
                for child in self.me.children(recursive=True):
                    self.tree.setdefault(child.pid, child)
            except psutil.NoSuchProcess:
                return
            threading.Event().wait(0.1)

    def line(self, starting: str) -> str | None:
        return next((line for line in self.lines if line.startswith(starting)), None)

    def commands(self) -> list[str]:
        """The command lines of dev.py's descendants seen so far."""
        found = []
        for process in list(self.tree.values()):
            try:
                found.append(" ".join(process.cmdline()))
            except psutil.Error:
                pass
        return found

    def left(self) -> list[str]:
        """The descendants still alive (a zombie has ended: only its entry waits for a reaper)."""
        alive = []
        for process in list(self.tree.values()):
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{process.pid} {' '.join(process.cmdline())}")
            except psutil.NoSuchProcess:
                pass
        return alive

    def stop(self, signum: int) -> int:
        """Send dev.py (and it alone) the signal; return its exit status."""
        self.process.send_signal(signum)
        return self.process.wait(START)

    def kill(self):
        """Clean up after a failed test: dev.py and what it started, by their ids."""
        for process in [self.me, *self.tree.values()]:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        self.process.wait()


def stopped_cleanly(dev: DevPy, signum: int) -> None:
    code = dev.stop(signum)
    dev.watcher.join(10)
    output = "\n".join(dev.lines)
    assert code == 0, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert wait_until(lambda: not dev.left(), timeout=10), dev.left()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_stops_on_a_signal_to_dev_py_with_exit_0_and_leaves_no_process(provisioned, tmp_path, signum):
    port = free_port()
    dev = DevPy(user_env(tmp_path), "serve", "--", "--port", str(port))
    try:
        assert wait_until(lambda: answers(f"http://127.0.0.1:{port}/api/v1"), timeout=START), dev.lines
        # The whole tree is up: the API, its embedded Redis and the delivery worker.
        assert wait_until(lambda: all(any(part in c for c in dev.commands()) for part in ("redis-server", "worker")), START)
        stopped_cleanly(dev, signum)
        assert dev.line("riskapi: serving"), dev.lines
    finally:
        dev.kill()


def riskapi(env: dict, *args: str) -> dict:
    """Run a `riskapi` command (this worktree's code) with env; return the JSON it printed."""
    env = dict(env, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "riskapi", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_listen_stops_on_a_signal_to_dev_py_with_exit_0_ends_its_session_and_leaves_no_process(provisioned, tmp_path, signum):
    env = user_env(tmp_path)
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api/v1"
    argv = [sys.executable, "-m", "riskapi", "serve", "--port", str(port), "--no-worker"]
    serve = subprocess.Popen(
        argv, cwd=ROOT, env=dict(env, PYTHONPATH=str(ROOT)), start_new_session=True, stdout=subprocess.DEVNULL
    )
    dev = None
    try:
        assert wait_until(lambda: answers(api_url), timeout=START)
        agency = riskapi(env, "agency", "create", "--name", "Signals")["uuid"]
        token = riskapi(env, "token", "create", "--agency", agency)["token"]
        # The URL and token from the environment, as the README shows: nothing secret on a command line.
        listen_env = dict(env, RISKAPI_API_URL=api_url, RISKAPI_TOKEN=token)
        dev = DevPy(listen_env, "riskapi", "listen", "--forward-to", f"http://127.0.0.1:{free_port()}/hooks")
        assert wait_until(lambda: dev.line("Ready!"), timeout=START), dev.lines
        # Connected: an event reaches it through its stream (and the local URL, where nothing listens, refuses it).
        riskapi(listen_env, "trigger", "form.completed")
        assert wait_until(lambda: any(" form.completed " in line for line in dev.lines), timeout=START), dev.lines
        stopped_cleanly(dev, signum)
        assert dev.lines[-1].startswith("Stopped listening (session"), dev.lines
    finally:
        if dev is not None:
            dev.kill()
        stop_serve(serve)
