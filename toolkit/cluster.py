"""The service as deployed on many hosts (toolkit.hosts): PostgreSQL, Redis, two API hosts, two worker hosts.

Each runs on a host of its own, as the README's many-hosts layout does: `riskapi serve --no-worker` on api1
and api2, `riskapi worker` on worker1 and worker2, with every setting at its default (rate limits, metrics and
the access log on) but the lease and the retry delays, shortened so that a partition plays out in a minute.
The load and the receiver have hosts of their own too; this process reaches them by moving a thread there.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import httpx
import redis

from jobs.runtime.embedded_redis import server_executable
from toolkit import ROOT
from toolkit.hosts import Hosts
from toolkit.postgres import OwnPostgres
from toolkit.receiver import Receiver
from toolkit.serving import wait_until

HOSTS = ["postgres", "redis", "api1", "api2", "worker1", "worker2", "load", "receiver"]
APIS, WORKERS = ("api1", "api2"), ("worker1", "worker2")
API_PORT = 8000
LEASE = 5.0  # RISKAPI_WEBHOOK_STALE_AFTER: how long a claim holds a delivery
ATTEMPT_TIMEOUT = 5.0  # RISKAPI_WEBHOOK_TIMEOUT, the default
# Retries span any cut played here (63 s): a delivery that waits out a partition is retried, not given up.
RETRY_DELAYS = "1,2,4,8,16,32"


class Cluster:
    """Every host started, and stopped again by `close` (also when starting fails half-way)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="riskapi-hosts-"))
        self.hosts = Hosts(HOSTS)
        self.processes: dict[str, subprocess.Popen] = {}
        self.postgres: OwnPostgres | None = None
        self.receiver: Receiver | None = None
        self.load = concurrent.futures.ThreadPoolExecutor(16, "load", initializer=self.hosts.enter, initargs=("load",))
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        address = self.hosts.address
        self.postgres = OwnPostgres(listen=address["postgres"], prefix=("ip", "netns", "exec", self.hosts.namespace("postgres")))
        self.postgres.start()
        socket = str(self.dir / "redis.sock")
        self.processes["redis"] = self.hosts.spawn(
            "redis",
            [server_executable(), "--port", "6379", "--bind", address["redis"], "--protected-mode", "no"]
            + ["--unixsocket", socket, "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL,
        )
        self.redis = redis.Redis(unix_socket_path=socket)
        if not wait_until(self._redis_answers, timeout=30):
            raise RuntimeError("redis-server did not start")
        made: dict[str, Receiver] = {}
        builder = threading.Thread(target=self._make_receiver, args=(made,))
        builder.start()
        builder.join()
        self.receiver = made["receiver"]
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("RISKAPI_", "PROMETHEUS_"))},
            "PYTHONPATH": str(ROOT),
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": f"redis://{address['redis']}:6379/0",
            "RISKAPI_WEBHOOK_ALLOW_PRIVATE": "1",
            "RISKAPI_WEBHOOK_CA_BUNDLE": self.receiver.ca_path,
            "RISKAPI_WEBHOOK_STALE_AFTER": str(LEASE),
            "RISKAPI_WEBHOOK_TIMEOUT": str(ATTEMPT_TIMEOUT),
            "RISKAPI_WEBHOOK_RETRY_DELAYS": RETRY_DELAYS,
        }
        self.cli("db", "upgrade")
        for name in (*APIS, *WORKERS):
            self.start(name)
        for name in APIS:
            if not self.on_load(wait_until, lambda name=name: self.healthy(name), 60):
                raise RuntimeError(f"{name} did not answer:\n{self.log(name)[-3000:]}")

    def _redis_answers(self) -> bool:
        try:
            return bool(self.redis.ping())
        except (redis.RedisError, OSError):
            return False

    def _make_receiver(self, made: dict) -> None:
        self.hosts.enter("receiver")
        made["receiver"] = Receiver(keep_alive=True, host=self.hosts.address["receiver"], name=self.hosts.hostname("receiver"))

    def start(self, name: str) -> None:
        """Start a host's process (`serve --no-worker` on an API host, `worker` on a worker host), logging to a file."""
        command = [sys.executable, "-m", "riskapi"]
        if name in APIS:
            command += ["serve", "--no-worker", "--host", self.hosts.address[name], "--port", str(API_PORT)]
        else:
            command += ["worker"]
        with (self.dir / f"{name}.log").open("ab") as log:
            self.processes[name] = self.hosts.spawn(name, command, cwd=ROOT, env=self.env, stdout=log, stderr=log)

    def kill(self, name: str) -> None:
        """Kill a host's processes outright (SIGKILL to its whole group), as a lost machine does."""
        process = self.processes[name]
        os.killpg(process.pid, 9)
        process.wait(30)

    def log(self, name: str) -> str:
        """Return what a host's process wrote."""
        return (self.dir / f"{name}.log").read_text(errors="replace")

    def base(self, name: str) -> str:
        """Return an API host's base URL."""
        return f"http://{self.hosts.address[name]}:{API_PORT}/api/v1"

    def healthy(self, name: str) -> bool:
        """Tell whether an API host answers its liveness probe (call on the load host)."""
        try:
            return httpx.get(self.base(name) + "/healthz", timeout=10).status_code == 200
        except httpx.HTTPError:
            return False

    def on_load(self, function, *args):
        """Run a function on the load host and return its result."""
        return self.load.submit(function, *args).result()

    def cli(self, *args: str) -> dict:
        """Run a riskapi command on the load host; return its JSON line."""
        command = ["ip", "netns", "exec", self.hosts.namespace("load"), sys.executable, "-m", "riskapi", *args]
        done = subprocess.run(command, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"riskapi {' '.join(args)}: {done.stderr[-2000:]}")
        lines = done.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else {}

    def close(self) -> None:
        """Stop everything started here and remove its files."""
        self.load.shutdown(wait=False, cancel_futures=True)
        if self.receiver is not None:
            self.receiver.close()
        if self.postgres is not None:
            self.postgres.close()  # while its host is there: pg_ctl runs on it
        self.hosts.close()  # every process of every host, then the namespaces
        subprocess.run(["rm", "-rf", str(self.dir)], check=False)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
