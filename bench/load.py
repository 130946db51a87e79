"""Load generators: wrk when installed, else a few Python client processes with keep-alive connections."""

import http.client
import multiprocessing
import re
import shutil
import subprocess
import time

MAX_REQUESTS = 2_000_000  # Per client: the loop is bounded in count as well as in time.
PYTHON_CLIENTS = 4  # More client processes would only take CPU from the servers.


def wrk_available() -> bool:
    """Tell whether wrk is on the PATH."""
    return shutil.which("wrk") is not None


def wrk(port: int, path: str, token: str, seconds: float, connections: int) -> tuple[float, int]:
    """Return (requests/s, requests) measured by wrk; any non-2xx answer or socket error is an error."""
    argv = ["wrk", "-t2", f"-c{connections}", f"-d{seconds:g}s", "-H", f"Authorization: Bearer {token}",
            f"http://127.0.0.1:{port}{path}"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw failed responses:\n{out}")
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if errors and (int(errors[1]) or int(errors[3]) or int(errors[4])):
        raise RuntimeError(f"wrk saw socket errors:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1]), int(re.search(r"(\d+) requests in", out)[1])


def _client(port: int, path: str, token: str, seconds: float, results) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    done, failed, deadline = 0, 0, time.monotonic() + seconds
    while time.monotonic() < deadline and done < MAX_REQUESTS:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            failed += 1
        done += 1
    conn.close()
    results.put((done, failed))


def python_load(port: int, path: str, token: str, seconds: float, connections: int) -> tuple[float, int]:
    """Return (requests/s, requests) of `connections` client processes, each with one keep-alive connection."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    clients = [context.Process(target=_client, args=(port, path, token, seconds, results)) for _ in range(connections)]
    started = time.monotonic()
    for client in clients:
        client.start()
    counts = [results.get(timeout=seconds + 60) for _ in clients]
    elapsed = time.monotonic() - started
    for client in clients:
        client.join(10)
    done, failed = sum(c[0] for c in counts), sum(c[1] for c in counts)
    if failed:
        raise RuntimeError(f"{failed} of {done} requests failed")
    return done / elapsed, done


def measure(kind: str, port: int, path: str, token: str, seconds: float, connections: int) -> tuple[float, int]:
    """Return (requests/s, requests) with the chosen generator ("wrk" or "python")."""
    if kind == "wrk":
        return wrk(port, path, token, seconds, connections)
    return python_load(port, path, token, seconds, connections)
