"""What one operation costs each process it touches: the service or worker, Redis and PostgreSQL (read only)."""

import collections
from collections.abc import Callable

import psutil
import redis


def tree_cpu(pid: int) -> float:
    """Return the CPU seconds (user + system) of a process and its children."""
    try:
        processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def backends(database: str) -> dict[tuple[int, float], float]:
    """Return {(pid, start): CPU seconds} of the PostgreSQL backends connected to this database (read from /proc)."""
    marker, found = f" {database} ", {}
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            if process.info["name"] == "postgres" and marker in " ".join(process.info["cmdline"] or ()) + " ":
                times = process.cpu_times()
                found[(process.pid, process.create_time())] = times.user + times.system
        except psutil.Error:
            continue
    return found


class Meter:
    """CPU of a process tree, of a Redis server we started and of one database's backends, and Redis's commands.

    start() resets Redis's command counts (CONFIG RESETSTAT: the server is our own); report(n, unit) prints the
    cost of one of n operations. A backend that exits between start and report loses its CPU: a connection pool
    keeps them.
    """

    def __init__(self, pid: Callable[[], int], redis_url: str, redis_pid: int | None, database_url: str):
        self.pid, self.redis_url, self.redis_pid = pid, redis_url, redis_pid
        self.database = database_url.rsplit("/", 1)[-1] if database_url.startswith("postgres") else None
        self.before: dict = {}
        self.exclude: set[int] = set()  # backend PIDs of the bench's own connections (it writes the work)

    def _read(self) -> dict:
        return {
            "process": tree_cpu(self.pid()),
            "redis": tree_cpu(self.redis_pid) if self.redis_pid else 0.0,
            "postgres": backends(self.database) if self.database else {},
        }

    def start(self) -> None:
        """Reset Redis's command counts and take the CPU clocks."""
        client = redis.Redis.from_url(self.redis_url)
        try:
            client.config_resetstat()
        finally:
            client.close()
        self.before = self._read()

    def report(self, count: int, unit: str, process: str) -> dict:
        """Print (and return) the CPU ms of one operation in each place, and Redis's commands per operation."""
        after = self._read()
        client = redis.Redis.from_url(self.redis_url)
        try:
            stats = client.info("commandstats")
        finally:
            client.close()
        calls = collections.Counter(
            {name.removeprefix("cmdstat_"): value["calls"] for name, value in stats.items() if name not in ("cmdstat_info",)}
        )
        calls.pop("config|resetstat", None)
        calls.pop("config", None)
        pg = sum(
            used - self.before["postgres"].get(key, 0.0) for key, used in after["postgres"].items() if key[0] not in self.exclude
        )
        costs = {
            process: (after["process"] - self.before["process"]) * 1000 / count,
            "redis": (after["redis"] - self.before["redis"]) * 1000 / count,
            "postgres": pg * 1000 / count if self.database else float("nan"),
            "redis_calls": sum(calls.values()) / count,
        }
        where = "" if self.database else " (PostgreSQL: not measured on SQLite)"
        print(f"CPU ms per {unit}: {process} {costs[process]:.3f}, Redis {costs['redis']:.3f}, "
              f"PostgreSQL backends {costs['postgres']:.3f}{where}")  # fmt: skip
        top = ", ".join(f"{name} {n / count:.2f}" for name, n in calls.most_common(8))
        print(f"Redis commands per {unit}: {costs['redis_calls']:.2f} ({top})")
        return costs


def own_backend() -> int | None:
    """Return the PostgreSQL backend PID of this thread's pooled connection, None on SQLite."""
    import models

    if models.is_sqlite():
        return None
    with models.db.connection_context():
        return models.db.connection().info.backend_pid
