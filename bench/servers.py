"""Start the servers under test on 127.0.0.1 and stop every process they started, by PID."""

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from jobs.runtime.embedded_redis import server_executable
from toolkit import ROOT
from toolkit.serving import free_port

# Units a minute per token: the limiter counts every request in Redis as deployed, yet never answers 429.
RATE_LIMIT_NEVER = 1_000_000_000


def has_gunicorn() -> bool:
    """Tell whether gunicorn can run under this interpreter."""
    return shutil.which("gunicorn", path=str(Path(sys.executable).parent)) is not None


def python_of(root: Path) -> str:
    """Return the interpreter of a checkout: its .venv's, else this one."""
    venv = Path(root) / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def main_module(root: Path) -> str:
    """Return the module `python -m` runs as a checkout's `riskapi`: `riskapi`, or `riskapi.process` before issue 52's layout."""
    return "riskapi.process" if (Path(root) / "riskapi" / "process" / "__main__.py").exists() else "riskapi"


def is_checkout(root: Path) -> bool:
    """Tell whether a directory is a checkout of riskapi (of any layout)."""
    return (Path(root) / "riskapi" / "__init__.py").exists() and (Path(root) / "spec" / "openapi.yaml").exists()


def service_argv(port: int, processes: int, python: str = sys.executable, root: Path = ROOT) -> list[str]:
    """The API as deployed: `riskapi serve --no-worker --workers N` (N processes on SO_REUSEPORT sockets)."""
    return [python, "-m", main_module(root), "serve", "--no-worker", "--workers", str(processes),
            "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip


def service_env(database_url: str, redis_url: str) -> dict:
    """The settings serve runs with: metrics (serve makes their multiprocess directory), access log, rate limit on Redis."""
    return {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "RISKAPI_RATE_LIMIT": str(RATE_LIMIT_NEVER),
            "RISKAPI_METRICS": "1", "RISKAPI_ACCESS_LOG": "1"}  # fmt: skip


def commit_of(root: Path) -> str:
    """Return a checkout's commit, with `+changes` when its work tree differs from it."""
    git = ["git", "-C", str(root)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty.strip() else "")


def baseline_argv(port: int, processes: int, kind: str) -> list[str]:
    """The bare endpoint under gunicorn sync workers, or under uvicorn with a2wsgi (how the service ran Flask until issue 24)."""
    if kind == "gunicorn":
        return [sys.executable, "-m", "gunicorn", "-w", str(processes), "-k", "sync", "-b", f"127.0.0.1:{port}",
                "--log-level", "warning", "bench.yardsticks.baseline:app"]  # fmt: skip
    return [sys.executable, "-m", "uvicorn", "bench.yardsticks.baseline:asgi", "--factory", "--host", "127.0.0.1",
            "--port", str(port), "--workers", str(processes), "--log-level", "warning", "--no-access-log"]  # fmt: skip


def has_floor() -> bool:
    """Tell whether the floor's pieces (asyncpg, uvloop, httptools: the `bench` extra) are installed."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("asyncpg", "uvloop", "httptools"))


def floor_argv(port: int, processes: int) -> list[str]:
    """The floor (bench.yardsticks.floor): a bare ASGI callable under uvicorn with uvloop and httptools, asyncpg and orjson."""
    return [sys.executable, "-m", "uvicorn", "bench.yardsticks.floor:app", "--host", "127.0.0.1", "--port", str(port),
            "--workers", str(processes), "--loop", "uvloop", "--http", "httptools", "--log-level", "warning",
            "--no-access-log"]  # fmt: skip


def _started(pid: int) -> float | None:
    """Return a process's start time (to never signal a recycled PID), or None when it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _descendants(pid: int) -> list[int]:
    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


class Server:
    """One server process tree, started with a log file and stopped by PID."""

    def __init__(self, name: str, argv: list[str], env: dict, port: int, log_dir: str, root: Path = ROOT):
        self.name, self.argv, self.env, self.port, self.root = name, argv, env, port, root
        self.log_path = os.path.join(log_dir, f"{name}.log")
        self.proc: subprocess.Popen | None = None

    def start(self, ready_path: str, headers: dict, timeout: float = 60.0) -> "Server":
        """Start the process and wait until ready_path answers 200."""
        # A benchmark measures throughput: the per-token rate limit (RISKAPI_RATE_LIMIT) would cap it, so it is off
        # unless the environment sets it.
        env = {"RISKAPI_RATE_LIMIT": "0", **os.environ, **self.env, "PYTHONPATH": str(self.root)}
        if env.get("BENCH_GC_DIR"):  # bench.soak --gc: every collection of every process recorded
            env["PYTHONPATH"] += os.pathsep + str(ROOT / "bench" / "gc_probe")
        if "PROMETHEUS_MULTIPROC_DIR" not in self.env:
            env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # serve makes one of its own, as deployed
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", ready_path, headers=headers)
                status = conn.getresponse().status
                conn.close()
                if status == 200:
                    return self
                raise RuntimeError(f"{self.name} answered {status} to {ready_path}:\n{self.log_tail()}")
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Terminate the process, then any worker it left behind, each by PID."""
        if self.proc is None:
            return
        children = [(pid, _started(pid)) for pid in _descendants(self.proc.pid)]
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for pid, started in children:
            if started is not None and _started(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.proc = None

    def cpu_seconds(self) -> float:
        """Return the CPU time (user + system) used so far by the server and its workers."""
        total = 0.0
        for pid in [self.proc.pid, *_descendants(self.proc.pid)]:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
        return total

    def log_tail(self, lines: int = 20) -> str:
        """Return the end of the server's log."""
        with open(self.log_path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])


class RedisServer:
    """A private redis-server on a free loopback port, without persistence, stopped by PID."""

    def __init__(self, log_dir: str):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log_path = os.path.join(log_dir, "redis.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> "RedisServer":
        """Start redis-server and wait until it answers PING."""
        argv = [server_executable(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        """Stop the server (by its PID) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
