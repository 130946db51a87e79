"""Tests for riskapi.sockets: `serve --workers N` spreads connections over its API processes and keeps them running."""

import json
import os
import signal
import socket
import subprocess
import sys

import httpx
import psutil
import pytest

from riskapi.sockets import reuse_port_socket
from toolkit.serving import answers, free_port, stop_serve, wait_until


@pytest.fixture
def serve(tmp_path):
    """Start `riskapi serve --workers 2 --no-worker` on SQLite; yield (process, port); stop it whatever happens."""
    port = free_port()
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/listener.db", RISKAPI_RATE_LIMIT="0")
    argv = [sys.executable, "-m", "riskapi", "serve", "--port", str(port), "--workers", "2", "--no-worker"]
    process = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        # Both listening: each process listens once its app is built, so one may answer while the other still builds.
        assert wait_until(lambda: all_listening(process, port, 2) and answers(f"http://127.0.0.1:{port}/api/v1"), timeout=60)
        yield process, port
    finally:
        stop_serve(process)


def api_processes(serve: subprocess.Popen) -> list[psutil.Process]:
    try:
        return [child for child in psutil.Process(serve.pid).children() if "riskapi.sockets" in " ".join(child.cmdline())]
    except psutil.Error:
        return []


def all_listening(serve: subprocess.Popen, port: int, count: int) -> bool:
    """Tell whether serve runs `count` API processes and each listens on the port."""
    apis = api_processes(serve)
    try:
        listening = [any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in a.net_connections("tcp")) for a in apis]
    except psutil.Error:
        return False
    return len(apis) == count and all(listening)


def established(process: psutil.Process, port: int) -> int:
    return sum(c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port for c in process.net_connections("tcp"))


def test_keep_alive_connections_opened_at_once_are_spread_over_the_api_processes(serve):
    """16 connections opened together land on both processes (one shared socket let the first to wake take them all)."""
    process, port = serve
    clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", timeout=30) for _ in range(16)]
    try:
        assert all(client.get("/healthz").status_code == 200 for client in clients)
        counts = [established(api, port) for api in api_processes(process)]
        assert sum(counts) == 16 and min(counts) >= 1, counts
    finally:
        for client in clients:
            client.close()


def test_an_api_process_killed_outright_is_started_again_and_the_port_keeps_answering(serve):
    process, port = serve
    victim = api_processes(process)[0]
    victim.kill()
    victim.wait(10)  # a connection made while it is still dying may be queued on its socket, and reset
    # The survivor answers meanwhile: the dead process's socket left the port's group with it.
    assert all(answers(f"http://127.0.0.1:{port}/api/v1") for _ in range(10))
    assert wait_until(lambda: len(api_processes(process)) == 2 and victim.pid not in {p.pid for p in api_processes(process)}, 30)


def test_sigterm_stops_serve_and_every_api_process(serve):
    process, _ = serve
    started = api_processes(process)
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    assert wait_until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in started), 30)


def test_a_port_in_use_stops_serve_at_once(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/taken.db")
        argv = [sys.executable, "-m", "riskapi", "serve", "--port", str(port), "--workers", "2", "--no-worker"]
        run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "Address already in use" in run.stderr


def test_one_process_serve_on_a_port_in_use_says_so_and_never_serving(tmp_path):
    """The README's fuzz run beside the quick start's: a second serve on a taken port fails before "serving"."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/taken.db")
        argv = [sys.executable, "-m", "riskapi", "serve", "--port", str(port), "--no-worker"]
        run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and f"cannot listen on 127.0.0.1:{port}: Address already in use" in run.stderr
    assert "serving" not in run.stdout and "quickstart" not in run.stdout


def test_only_listening_sockets_of_the_group_are_given_connections():
    """The socket serve holds (bound, not listening) must never be handed a connection."""
    held = reuse_port_socket("127.0.0.1", 0)
    port = held.getsockname()[1]
    with held, reuse_port_socket("127.0.0.1", port) as serving:
        serving.listen()
        for _ in range(20):
            with socket.create_connection(("127.0.0.1", port), timeout=30):
                accepted, _ = serving.accept()
                accepted.close()


def test_settle_sets_start_ups_objects_aside_from_the_collectors_full_passes():
    # In a process of its own: frozen objects stay for good. What start-up built (the modules here) is
    # frozen; what is made after is collected as before.
    code = (
        "import gc, json, api.app\n"
        "from riskapi import settle\n"
        "before = len(gc.get_objects())\n"
        "settle()\n"
        "print(json.dumps([before, gc.get_freeze_count(), len(gc.get_objects())]))\n"
    )
    shown = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    before, frozen, tracked = json.loads(shown)
    assert frozen > 0.9 * before > 10_000
    assert tracked < 0.01 * before
