"""The soak second by second: requests, latency percentiles, the delivery backlog and where the CPU went."""

import contextlib
import csv
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

# Where a process's CPU is counted; the stacked CPU panel keeps this order, bottom up.
PARTS = ("api", "delivery", "redis", "postgres", "bench", "other")
LABELS = {
    "api": "API processes",
    "delivery": "delivery (relay + worker)",
    "redis": "Redis",
    "postgres": "PostgreSQL (this database)",
    "bench": "bench (load + receiver)",
    "other": "rest of the machine",
}


def part_of(process: psutil.Process) -> str:
    """Return which side of the service a process of its tree is: by its command line (a fork keeps its parent's)."""
    argv = " ".join(process.cmdline())
    if "redis-server" in argv:
        return "redis"
    # `riskapi worker` (relay, RQ workers, engine) and the RQ scheduler it forks.
    if "riskapi worker" in argv:
        return "delivery"
    return "api"  # API processes (riskapi.sockets) and serve itself (uvicorn, or the supervisor alone)


def _busy(times) -> float:
    return times.user + times.system


@dataclass
class CpuSampler:
    """Once a second, the CPU time each part has used: the service's trees (roots()), this database's PostgreSQL
    backends, the bench (this process and extra_pids()) and the rest of the machine."""

    roots: Callable[[], list[int]]
    database: str
    extra_pids: Callable[[], list[int]]
    samples: list = field(default_factory=list)  # (monotonic time, {part: CPU seconds since the first sample})
    _seen: dict = field(default_factory=dict)  # (pid, create time) -> (part, CPU seconds at the last sample)
    _totals: dict = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    _busy0: float = 0.0  # the machine's busy CPU seconds at the first sample
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _processes(self):
        for root in self.roots():
            try:
                top = psutil.Process(root)
                yield from ((p, part_of(p)) for p in [top, *top.children(recursive=True)])
            except psutil.Error:
                continue
        marker = f" {self.database} "
        for process in psutil.process_iter(["name", "cmdline"]):
            if process.info["name"] == "postgres" and marker in " ".join(process.info["cmdline"] or ()) + " ":
                yield process, "postgres"
        for pid in [os.getpid(), *self.extra_pids()]:
            with contextlib.suppress(psutil.Error):
                yield psutil.Process(pid), "bench"

    def sample(self) -> None:
        """Add what each part used since the last sample (a process born since counts from zero)."""
        found = list(self._processes())  # Walking the trees is the slow part: done before the clocks are read.
        first, seen, now, machine = not self.samples, {}, time.monotonic(), psutil.cpu_times()
        for process, part in found:
            try:
                key, used = (process.pid, process.create_time()), _busy(process.cpu_times())
            except psutil.Error:
                continue
            _, before = self._seen.get(key, (part, 0.0 if not first else used))
            self._totals[part] += used - before
            seen[key] = (part, used)
        self._seen = seen  # A process gone since loses its last partial second: a second's rounding.
        busy = machine.user + machine.nice + machine.system + machine.irq + machine.softirq + machine.steal
        if first:
            self._busy0 = busy
        ours = sum(v for k, v in self._totals.items() if k != "other")
        self._totals["other"] = max(0.0, busy - self._busy0 - ours)
        self.samples.append((now, dict(self._totals)))

    def start(self, t0: float) -> None:
        """Sample at t0, t0 + 1 s, ... in a thread of its own until stop()."""

        def run() -> None:
            tick = 0
            while not self._stop.wait(max(0.0, t0 + tick - time.monotonic())):
                self.sample()
                tick += 1

        self._thread = threading.Thread(target=run, name="cpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling, if it started (the samples stay)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _pct(values: list, q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else float("nan")


def _by_second(events, t0: float, seconds: int) -> list[list]:
    bins: list[list] = [[] for _ in range(seconds)]
    for at, value in events:
        if at >= t0 and (k := int(at - t0)) < seconds:  # int() rounds toward zero: -0.5 s is not second 0
            bins[k].append(value)
    return bins


def rows(t0: float, stats, arrivals: list[float], cpu: list) -> list[dict]:
    """Return one row a second from t0 to the last CPU sample: the figures of the PNG and the CSV."""
    seconds = len(cpu) - 1
    reads, writes = _by_second(stats.reads, t0, seconds), _by_second(stats.writes, t0, seconds)
    produced = [sum(b) for b in _by_second(stats.produced, t0, seconds)]
    arrived = [len(b) for b in _by_second([(at, 1) for at in arrivals], t0, seconds)]
    table, due, got = [], 0, 0
    for k in range(seconds):
        due, got = due + produced[k], got + arrived[k]
        span = cpu[k + 1][0] - cpu[k][0]
        split = {f"cpu_{p}": max(0.0, cpu[k + 1][1][p] - cpu[k][1][p]) / span for p in PARTS}
        table.append({"second": k, "requests": len(reads[k]) + len(writes[k]), "reads": len(reads[k]), "writes": len(writes[k]),
                      "read_p50_ms": _pct(reads[k], 0.5), "read_p99_ms": _pct(reads[k], 0.99),
                      "write_p50_ms": _pct(writes[k], 0.5), "write_p99_ms": _pct(writes[k], 0.99),
                      "produced": produced[k], "arrived": arrived[k], "backlog": max(0, due - got), **split})  # fmt: skip
    return table


def cpu_between(cpu: list, start: float, end: float) -> dict:
    """Return each part's CPU seconds per second between two times (the nearest samples)."""
    first = min(cpu, key=lambda s: abs(s[0] - start))
    last = min(cpu, key=lambda s: abs(s[0] - end))
    span = last[0] - first[0]
    return {p: (last[1][p] - first[1][p]) / span if span > 0 else 0.0 for p in PARTS}


def write_csv(table: list[dict], path: str) -> None:
    """Write the rows as CSV, one line a second."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]) if table else ["second"])
        writer.writeheader()
        writer.writerows({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()} for row in table)
