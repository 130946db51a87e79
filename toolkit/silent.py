"""A server that takes connections and never answers: a dependency cut off by the network, as seen from a client.

A link that goes silent (a blackhole route, a dropped security-group rule) does not refuse connections: they
hang. On one host the nearest thing is a listener that accepts, reads and never writes. It counts the
connections it took, which is what a test asserts on: how often a client went back to a server it had
found silent.
"""

import socket
import threading

from toolkit.serving import free_port


class SilentServer:
    """Listen on a loopback port; accept, read and never answer; count the connections taken."""

    def __init__(self) -> None:
        self.port = free_port()
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", self.port), backlog=128)
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        """Return a Redis URL to it."""
        return f"redis://127.0.0.1:{self.port}/0"

    def __enter__(self) -> "SilentServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way (close alone does not, on Linux)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for held in self._held:
                held.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.accepted += 1
                self._held.append(connection)  # held open, read by nobody: the client's bytes go unanswered
