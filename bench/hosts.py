"""Many hosts on one machine: the soak on API processes and worker processes of their own (`python -m bench.hosts -h`).

The layout of several hosts sharing one PostgreSQL and one Redis: `--apis` (2) `riskapi serve --no-worker`
processes, each on a port of its own, and `--workers` (2) `riskapi worker` processes (each the outbox relay,
RQ's workers and scheduler, and the delivery engine), on a redis-server started for the run (or --redis-url)
and the database riskapi_hosts. The load, its checks, the text summary and the PNG are bench.soak's, the
connections spread over the API ports. A worker runs as on a worker host: not niced unless
RISKAPI_WORKER_NICE says so (serve nices its own worker to 10).
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import redis

from bench import servers
from bench.soak import run as soak_run
from bench.soak.load import Checkout
from riskapi.serve import stop_process_group
from toolkit.serving import free_port, wait_until

NAME = "hosts"  # the database is riskapi_hosts


def options(argv=None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    soak_run.add_options(parser, f"riskapi_{NAME}")
    parser.add_argument("--apis", type=int, default=2, help="`riskapi serve --no-worker` processes (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="`riskapi worker` processes (default 2)")
    return parser.parse_args(argv)


class Hosts:
    """API processes, worker processes and (without --redis-url) a redis-server, each started and stopped by PID."""

    def __init__(self, apis: int, workers: int):
        self.apis, self.workers = apis, workers
        self.description = f"{apis} x riskapi serve --no-worker, {workers} x riskapi worker"
        self.servers: list[servers.Server] = []
        self.processes: list[subprocess.Popen] = []  # the workers
        self.redis: subprocess.Popen | None = None
        self.log_files: list[Path] = []

    def _spawn(self, argv: list[str], env: dict, cwd: Path, log: Path) -> subprocess.Popen:
        self.log_files.append(log)
        with open(log, "wb") as handle:
            # A session of its own: the RQ scheduler a worker forks goes down with its group.
            return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=handle,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    def _start_redis(self, work: Path) -> str:
        port = free_port()
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.redis = self._spawn(argv, dict(os.environ), work, work / "redis.log")
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        if not wait_until(answers, timeout=15):
            raise RuntimeError("redis-server did not answer within 15 s")
        client.close()
        return f"redis://127.0.0.1:{port}/0"

    def start(self, checkout: Checkout, env: dict, work: Path) -> list[str]:
        """Start Redis, the API processes one by one (each answering), then the workers; return the APIs' bases."""
        env = {**env, "REDIS_URL": env["REDIS_URL"] or self._start_redis(work)}
        bases = []
        for number in range(1, self.apis + 1):
            port = free_port()
            argv = [checkout.python, "-m", servers.main_module(checkout.root), "serve", "--port", str(port), "--no-worker"]
            self.servers.append(servers.Server(f"api-{number}", argv, env, port, str(work), root=checkout.root))
            self.servers[-1].start("/api/v1/healthz", {})
            self.log_files.append(Path(self.servers[-1].log_path))
            bases.append(f"http://127.0.0.1:{port}/api/v1")
        worker_env = {**os.environ, **env, "PYTHONPATH": str(checkout.root)}
        for number in range(1, self.workers + 1):
            argv = [checkout.python, "-m", servers.main_module(checkout.root), "worker"]
            self.processes.append(self._spawn(argv, worker_env, checkout.root, work / f"worker-{number}.log"))
        time.sleep(2.0)  # A worker that cannot start (a bad setting) exits at once: say so before the load.
        for process, log in zip(self.processes, self.log_files[-self.workers :], strict=True):
            if process.poll() is not None:
                raise RuntimeError(f"a worker exited with {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        return bases

    def pids(self) -> list[int]:
        """Return the PIDs of the API processes, the workers and our Redis."""
        started = [s.proc for s in self.servers] + self.processes + [self.redis]
        return [p.pid for p in started if p is not None and p.poll() is None]

    def stop(self) -> None:
        """Stop the workers (and their schedulers), the API processes, then Redis, each by PID."""
        for process in self.processes:
            stop_process_group(process, grace=15.0)
        for server in self.servers:
            server.stop()
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            try:
                self.redis.wait(10)
            except subprocess.TimeoutExpired:
                self.redis.kill()
                self.redis.wait()

    def logs(self) -> list[Path]:
        """Return every process's log."""
        return list(self.log_files)


def main(argv=None) -> int:
    """Run one soak on the many-hosts layout; exit 1 when it was not clean."""
    args = options(argv)
    return soak_run.run_once(args, Hosts(args.apis, args.workers), NAME)


if __name__ == "__main__":
    sys.exit(main())
