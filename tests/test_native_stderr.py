"""What C libraries print on stderr (libpq's notices while connecting) is a log line of the one format, too."""

import json
import os
import socket
import struct
import subprocess
import sys
import threading

import httpx
import pytest

from toolkit.serving import free_port, stop_serve, wait_until

NOTICE = "terminating connection due to immediate shutdown command"


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


def _fields(severity: str, text: str) -> bytes:
    pairs = [(b"S", severity), (b"V", severity), (b"C", "57P01"), (b"M", text)]
    return b"".join(code + value.encode() + b"\0" for code, value in pairs) + b"\0"


@pytest.fixture
def stopping_postgres():
    """A server speaking PostgreSQL's protocol as one stopped in immediate mode does to a connection half made.

    It accepts the start-up, then sends the notice PostgreSQL sends every connection as it stops, then the
    error: libpq printed such a notice on descriptor 2 itself under psycopg2; psycopg 3 takes it over at once.
    """
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(60)

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while True:  # SSL and GSS requests are refused (one byte); the start-up packet follows
                    (length,) = struct.unpack("!I", conn.recv(4, socket.MSG_WAITALL))
                    body = conn.recv(length - 4, socket.MSG_WAITALL)
                    if struct.unpack("!I", body[:4])[0] not in (80877103, 80877104):
                        break
                    conn.sendall(b"N")
                ok = _message(b"R", struct.pack("!I", 0))
                notice = _message(b"N", _fields("WARNING", NOTICE))
                error = _message(b"E", _fields("FATAL", "terminating connection due to administrator command"))
                conn.sendall(ok + notice + error)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield f"postgresql://127.0.0.1:{server.getsockname()[1]}/riskapi"
    server.close()


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_notice_sent_while_connecting_is_never_a_bare_line(stopping_postgres, command, tmp_path):
    env = dict(os.environ, DATABASE_URL=stopping_postgres, RISKAPI_LOG_FORMAT="json", REDIS_URL="redis://127.0.0.1:1/0")
    argv = [sys.executable, "-m", "riskapi", command, *(["--port", str(free_port())] if command == "serve" else [])]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    assert done.returncode == 1, done.stderr
    # One line says why the command stopped; every other line is one JSON object.
    said, *others = sorted(done.stderr.splitlines(), key=lambda line: line.startswith("{"))
    assert said.startswith("riskapi: the database (DATABASE_URL) does not answer: "), done.stderr
    assert "Traceback" not in done.stderr
    logged = [json.loads(line) for line in others]
    # Never a bare line: psycopg 3 receives the notice itself (nothing printed); what C code prints is a JSON line.
    assert all(entry["logger"] == "riskapi.stderr" for entry in logged if NOTICE in entry["message"]), logged


def test_the_api_processes_lines_reach_serves_stderr_as_their_own(tmp_path):
    """`serve --workers 2` gives its API processes its real stderr: their lines are never wrapped as serve's."""
    port = free_port()
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/api.db", RISKAPI_LOG_FORMAT="json", RISKAPI_ACCESS_LOG="1")
    argv = [sys.executable, "-m", "riskapi", "serve", "--port", str(port), "--workers", "2", "--no-worker"]
    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        serve = subprocess.Popen(argv, env=env, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL, stderr=sink)
        try:
            url = f"http://127.0.0.1:{port}/api/v1/healthz"
            assert wait_until(lambda: _status(url) == 200, timeout=90), log.read_text()
            # A request with an id of its own: its access line is an API process's, written to serve's stderr.
            httpx.get(url, headers={"X-Request-Id": "native-stderr-check"}, timeout=10)
            assert wait_until(lambda: "native-stderr-check" in log.read_text(), timeout=30), log.read_text()
        finally:
            stop_serve(serve)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    mine = [entry for entry in entries if "native-stderr-check" in json.dumps(entry)]
    assert [(entry["logger"], entry["request_id"], entry["status"]) for entry in mine] == [
        ("riskapi.access", "native-stderr-check", 200)
    ]
    assert not [entry for entry in entries if entry["logger"] == "riskapi.stderr"], entries


def _status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=5).status_code
    except httpx.HTTPError:
        return None
