"""`serve --workers N`: N API processes, each accepting on a socket of its own in the port's SO_REUSEPORT group.

uvicorn's own `--workers` shares one listening socket between its processes, and whichever process
wakes first accepts: 32 keep-alive connections opened at once (a load balancer's or a proxy's
upstream pool) can all land on one process and stay there, leaving the others idle while that one's
GIL queues every request. With a socket per process the kernel spreads new connections over the
processes by a hash of their addresses, whichever is awake. `serve` holds the port (bound, not
listening: a socket that does not listen is given no connections) and supervises the processes
(riskapi.serve.Supervisor).
"""

import socket
import subprocess
import sys

import uvicorn

from foundation import formats, native
from foundation.config import Settings, SettingsError
from jobs.runtime.embedded_redis import die_with_parent
from riskapi import settle

# How long an API process may take over its requests in flight once asked to stop.
GRACE = 10.0
BACKLOG = 2048


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """Return a TCP socket bound to host:port in the port's SO_REUSEPORT group (not yet listening)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def listening_socket(host: str, port: int) -> socket.socket:
    """Return a TCP socket listening on host:port, this process's alone (no SO_REUSEPORT: a port in use fails here)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: restart past TIME_WAIT
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def start(host: str, port: int, env: dict) -> subprocess.Popen:
    """Start one API process in a session of its own (serve stops it in order), dying with its parent."""
    code = "import sys; from riskapi.sockets import run; run(sys.argv[1], int(sys.argv[2]))"
    return subprocess.Popen(
        [sys.executable, "-c", code, host, str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=native.for_children(),
        start_new_session=True,
        preexec_fn=die_with_parent,
    )


def run(host: str, port: int) -> None:
    """Serve the API in this process on a socket of its own, until SIGTERM or SIGINT (then gracefully)."""
    native.capture()
    try:
        formats.setup(Settings.from_env().log_format)
    except SettingsError:
        formats.setup("text")  # the app factory says what is wrong, in this format
    sock = reuse_port_socket(host, port)
    # log_config=None: uvicorn's lines keep the one format set above.
    config = uvicorn.Config("api.app:asgi", factory=True, log_level="warning", access_log=False, backlog=BACKLOG, log_config=None)
    config.load()  # the app, built here rather than in the server's loop: then set aside before the first request
    settle()
    # Only now: a listening socket takes its share of the port's new connections at once, and a process
    # (re)started while the others serve would hold its share unanswered for as long as the app takes to build.
    sock.listen(BACKLOG)
    uvicorn.Server(config).run(sockets=[sock])
