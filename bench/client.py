"""A small keep-alive HTTP client that times each request."""

import http.client
import statistics
import time

import orjson


class Client:
    """JSON requests to one server with a bearer token, over one connection."""

    def __init__(self, port: int, token: str):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def send(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, float]:
        """Return (status, raw body, seconds from sending to the last byte read)."""
        started = time.perf_counter()
        try:
            self.conn.request(method, path, body=body, headers=self.headers)
            response = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closed the kept connection while it was idle (uvicorn after 5 s): once more, on a new one.
            self.conn.close()
            started = time.perf_counter()
            self.conn.request(method, path, body=body, headers=self.headers)
            response = self.conn.getresponse()
        raw = response.read()
        return response.status, raw, time.perf_counter() - started

    def json(self, method: str, path: str, body=None, expect: int = 200) -> dict:
        """Send a request, check its status and return the parsed body."""
        status, raw, _ = self.send(method, path, orjson.dumps(body) if body is not None else None)
        if status != expect:
            raise RuntimeError(f"{method} {path} answered {status}, not {expect}: {raw[:300]!r}")
        return orjson.loads(raw)

    def timed(self, path: str) -> float:
        """Return the seconds one GET took; any status but 200 is an error."""
        status, raw, seconds = self.send("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}: {raw[:300]!r}")
        return seconds

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def median_ms(samples: list[float]) -> float:
    """Return the median of seconds, in milliseconds."""
    return statistics.median(samples) * 1000.0
