"""PostgreSQL known away: once a connection timed out, a process answers at once while one thread asks again.

A silent server (a partition: packets dropped, nothing refused, nothing reset) costs a request the connect
timeout or the TCP user timeout of models.SILENCE (about 2 s) before it fails. Without a memory, every
request of every thread pays it again, for as long as the silence lasts. After one such failure the breaker
opens: requests get the database's own error at once (the API's JSON 503 with Retry-After), while a
thread of the breaker tries a fresh connection every `every` seconds; the first that answers closes it.
A refused or reset connection (a crash, a restart, a terminated backend) fails fast and opens nothing: a
restart is over before a probe would be.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import peewee

# A connection failure that took this long was a silence: a refusal or a reset takes milliseconds.
SLOW = 1.0


class Breaker:
    """Remember that PostgreSQL went silent, and find out in the background when it answers again."""

    def __init__(self, probe: Callable[[], None], every: float = 0.5) -> None:
        self._probe, self.every = probe, every
        self._open = threading.Event()
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        """Tell whether the database is known away."""
        return self._open.is_set()

    def check(self) -> None:
        """Raise peewee.OperationalError at once while the database is known away."""
        if self._open.is_set():
            raise peewee.OperationalError(f"PostgreSQL is known away (a connection timed out); asked again every {self.every} s")

    def failed(self, took: float) -> None:
        """Note a connection failure that took `took` seconds; a slow one opens the breaker."""
        if took < SLOW:
            return
        with self._lock:
            if self._open.is_set():
                return
            self._open.set()
        threading.Thread(target=self._ask_again, name="database-breaker", daemon=True).start()

    def _ask_again(self) -> None:
        while True:
            time.sleep(self.every)
            try:
                self._probe()
            except peewee.PeeweeException:
                continue
            self._open.clear()
            return
