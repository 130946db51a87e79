"""What C libraries write to stderr becomes log lines of the one format (foundation.formats).

libpq prints a server's notice that arrives while a connection is being made straight to file
descriptor 2 unless its client has put a notice handler in place first (psycopg 3 does; the driver before it did not):
a PostgreSQL stopped in immediate mode tells every connection it is ending ("WARNING:  terminating
connection due to immediate shutdown command"), and one half made at that moment printed that bare line
among the process's JSON ones, which a log shipper reading one object per line cannot parse.

So a process `riskapi` runs gives descriptor 2 to a pipe whose lines a thread logs as the logger
`riskapi.stderr`, and Python's own writes (the log handlers, an uncaught traceback) keep the real
stderr: they never wait on that thread. As the process exits, it waits (2 s at most) until the thread
has logged everything written before (a mark sent through the pipe comes back): a connection's notice
is often the last thing before a failed start-up's exit.
"""

import atexit
import logging
import os
import sys
import threading

log = logging.getLogger("riskapi.stderr")


def capture() -> None:
    """Log every line written to descriptor 2 from here on; Python's sys.stderr keeps the real stderr.

    Called first thing by each process `riskapi` runs, before the log handlers are made (they write
    to sys.stderr as it is then).
    """
    real = os.dup(2)
    read, write = os.pipe()
    os.dup2(write, 2)  # inheritable, as descriptor 2 must be; os.pipe's own ends are not
    os.close(write)
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    sys.stderr = open(real, "w", buffering=1, encoding=encoding, errors="backslashreplace")
    mark = f"riskapi: stderr of process {os.getpid()} relayed\n".encode()
    relayed = threading.Event()
    threading.Thread(target=_relay, args=(read, mark, relayed), name="native-stderr", daemon=True).start()
    atexit.register(_wait_relayed, mark, relayed)


def _relay(read: int, mark: bytes, relayed: threading.Event) -> None:
    with open(read, "rb") as pipe:
        for raw in pipe:
            if raw.endswith(mark):  # after a C library's unfinished line, maybe
                raw = raw[: -len(mark)]
                relayed.set()
            line = raw.decode("utf-8", errors="replace").strip()
            if line:
                log.warning("%s", line)


def _wait_relayed(mark: bytes, relayed: threading.Event) -> None:
    try:
        os.write(2, mark)
    except OSError:
        return
    relayed.wait(2.0)


def for_children() -> int | None:
    """Return the stderr a child process should be given: this process's real one (the child captures its own)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None  # not a file (a test's capture): the child inherits descriptor 2


__all__ = ["capture", "for_children"]
