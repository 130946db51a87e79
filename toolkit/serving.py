"""The app served in a thread on a free loopback port, and waiting for things to happen."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time

import httpx
import uvicorn


def free_port() -> int:
    """Return a free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.05):
    """Poll predicate until it returns something truthy; return that, or the last falsy value at the deadline.

    The default is roomy for a busy machine: waiting longer costs nothing when the thing happens.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def stop_serve(serve: subprocess.Popen) -> None:
    """Stop `riskapi serve` as a service manager does (it stops its children in order); kill its group if it hangs."""
    if serve.poll() is not None:
        return
    serve.send_signal(signal.SIGTERM)
    try:
        serve.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(serve.pid, signal.SIGKILL)
        serve.wait()


def answers(api_url: str) -> bool:
    """Tell whether the API at api_url (ending in /api/v1) answers its liveness probe."""
    try:
        # Roomy: a busy machine's slow answer is still an answer.
        return httpx.get(api_url + "/healthz", timeout=10).status_code == 200
    except httpx.TransportError:
        return False


class ServerThread:
    """A uvicorn server running an app in a background thread."""

    def __init__(self, app, port: int):
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self):
        self.thread.start()
        if not wait_until(lambda: self.server.started or not self.thread.is_alive(), timeout=15, interval=0.02):
            raise RuntimeError("server did not start")
        if not self.server.started:
            raise RuntimeError("server exited before it started")
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)
