"""A PostgreSQL server of one's own (initdb in a temporary directory, a free port) to crash and start again.

Fault tests and benches stop this one, never the shared server. Run as root, the server runs as the
`postgres` user (PostgreSQL refuses to run as root). Only the processes started here are ever stopped.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from toolkit.serving import free_port

BIN = Path(os.environ.get("RISKAPI_PG_BIN", "/usr/lib/postgresql/15/bin"))


def available() -> bool:
    """Tell whether initdb and pg_ctl are installed."""
    return (BIN / "initdb").exists() and (BIN / "pg_ctl").exists()


class OwnPostgres:
    """initdb, start, crash, stop: a throw-away cluster on 127.0.0.1:<free port>, database `postgres`, no password.

    `listen` and `prefix` put it on a host of toolkit.hosts (an address there, `ip netns exec NS`); `local_url`
    reaches it from anywhere on this machine, through its unix socket.
    """

    def __init__(self, listen: str = "127.0.0.1", prefix: tuple[str, ...] = ()) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="riskapi-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.listen, self.prefix = listen, prefix
        self.url = f"postgresql://postgres@{listen}:{self.port}/postgres"
        self.local_url = f"postgresql:///postgres?host={self.dir}&port={self.port}&user=postgres"
        self._user = None
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            self._user = "postgres"
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self._run(str(BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        if listen != "127.0.0.1":  # initdb trusts loopback alone; a host's clients come from the hosts' network
            with (self.data / "pg_hba.conf").open("a") as rules:
                rules.write("host all all 10.0.0.0/8 trust\n")

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        if self._user is not None:
            argv = ("runuser", "-u", self._user, "--", *argv)
        argv = (*self.prefix, *argv)
        return subprocess.run(argv, cwd=self.dir, capture_output=True, text=True, check=check, timeout=120)

    def _ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", *args, check=check)

    def start(self) -> OwnPostgres:
        """Start the server and wait until it accepts connections."""
        # fsync off: a crash of the server process loses nothing the OS holds; only a machine crash would.
        options = f"-p {self.port} -k {self.dir} -c listen_addresses={self.listen} -c fsync=off -c max_connections=200"
        self._ctl("-o", options, "-l", str(self.dir / "server.log"), "start")
        return self

    def crash(self) -> None:
        """Stop the server at once, as a crash does (no checkpoint; it recovers from its WAL on the next start)."""
        self._ctl("-m", "immediate", "stop")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server cleanly (`fast`: open sessions are cut, after a checkpoint)."""
        self._ctl("-m", mode, "stop", check=False)

    def restart(self) -> None:
        """Restart the server (fast stop, start): a fraction of a second down."""
        self._ctl("-m", "fast", "-l", str(self.dir / "server.log"), "restart")  # -l: no pipe left open to us

    def running(self) -> bool:
        """Tell whether the server runs."""
        return self._ctl("status", check=False).returncode == 0

    def close(self) -> None:
        """Stop the server if it runs, and remove its files."""
        if self.data.exists() and self.running():
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> OwnPostgres:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
