"""The soak's text summary, its picture and its per-second CSV, and whether the run was clean."""

import collections
import os
from dataclasses import dataclass, field
from pathlib import Path

from bench.soak import plot, series
from bench.soak.load import EVENTS, Stats
from bench.soak.receiver import Receiving

# Issue 24's aims on its 2-core machine: printed beside the figures, never a failure.
AIMS = {"requests/s": 285.0, "read p99 ms": 150.0, "write p99 ms": 300.0, "arrived during the load %": 80.0, "drain s": 15.0}


@dataclass
class Run:
    """Everything one soak run measured."""

    meta: dict
    args: object
    stats: Stats
    result: dict
    receiver: Receiving
    cpu: list
    started: float
    stopped: float
    pauses: list[str] = field(default_factory=list)  # --gc: a line per process (bench.soak.pauses)


def ms(samples: list, q: float) -> float:
    """Return the q-quantile of (time, seconds) samples in milliseconds."""
    ordered = sorted(seconds for _, seconds in samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 if ordered else float("nan")


def _aim(name: str, value: float, higher: bool = False) -> str:
    met = value >= AIMS[name] if higher else value <= AIMS[name]
    return f"(aim {'>=' if higher else '<='} {AIMS[name]:g}: {'met' if met else 'not met'})"


def _split(cpu: dict) -> str:
    return ", ".join(f"{series.LABELS[p]} {cpu[p]:.2f}" for p in series.PARTS)


def report(run: Run, png: str) -> bool:
    """Print the summary, write the PNG and the CSV; return whether the run was clean."""
    stats, result, receiver = run.stats, run.result, run.receiver
    elapsed, total = run.stopped - run.started, sum(stats.statuses.values())
    rate = total / elapsed
    print(f"\nrequests: {total} in {elapsed:.1f} s = {rate:.1f} req/s {_aim('requests/s', rate, higher=True)}")
    statuses = sorted(stats.statuses.items(), key=lambda item: str(item[0]))
    print("statuses: " + ", ".join(f"{status} x {n}" for status, n in statuses))
    for status, samples in sorted(stats.samples.items(), key=lambda item: str(item[0])):
        print(f"  {status}:\n    " + "\n    ".join(samples))
    read_p99, write_p99 = ms(stats.reads, 0.99), ms(stats.writes, 0.99)
    print(f"reads  (GET, {len(stats.reads)}): p50 {ms(stats.reads, 0.5):7.1f} ms, p99 {read_p99:7.1f} ms "
          f"{_aim('read p99 ms', read_p99)}")  # fmt: skip
    print(f"writes (POST/PATCH/DELETE, {len(stats.writes)}): p50 {ms(stats.writes, 0.5):7.1f} ms, p99 {write_p99:7.1f} ms "
          f"{_aim('write p99 ms', write_p99)}")  # fmt: skip

    last = run.cpu[-1][0] if run.cpu else run.stopped
    during_load = series.cpu_between(run.cpu, run.started, run.stopped)
    after_load = series.cpu_between(run.cpu, run.stopped, last)
    cores = os.cpu_count() or 1
    print(f"CPU seconds per second on {cores} cores, during the load: {_split(during_load)}")
    print(f"  after it (the drain, {last - run.stopped:.0f} s): {_split(after_load)}")
    whole = series.cpu_between(run.cpu, run.started, last)
    api_ms = during_load["api"] * elapsed * 1000 / max(total, 1)
    delivery_ms = whole["delivery"] * (last - run.started) * 1000 / result["received"] if result["received"] else float("nan")
    print(f"  CPU per request (API processes, during the load) {api_ms:.2f} ms; "
          f"per delivery (delivery side, load and drain) {delivery_ms:.2f} ms")  # fmt: skip
    if run.pauses:
        print("garbage collections during the load, by process (each stops the process's every thread):")
        print("\n".join(run.pauses))

    kinds = collections.Counter(event for _, event, _ in stats.expected.elements())
    produced = sum(n for at, n in stats.produced if run.started <= at <= run.stopped)
    print(f"deliveries expected: {sum(kinds.values())} (" + ", ".join(f"{e} {kinds[e]}" for e in EVENTS) + ", "
          f"{stats.warm_up} of them from the creates made before the load, which waited until they arrived)")  # fmt: skip
    lost, unexpected = sum(result["lost"].values()), sum(result["unexpected"].values())
    over = f"over {receiver.connections} connections" if receiver.connections is not None else "connections unknown"
    print(f"deliveries received: {result['received']} unique {over}, lost {lost}, duplicated {result['duplicated']}, "
          f"badly signed {result['bad']}, unexpected {unexpected}")  # fmt: skip
    for key, n in list((result["lost"] + result["unexpected"]).items())[:5]:
        print(f"  {'lost' if key in result['lost'] else 'unexpected'}: {key[1]} {key[2]} x {n}")
    # Arrival times come from the receiver's clock: what was queued but not yet read still counts.
    arrivals = [r.at for r in receiver.requests]
    during = sum(run.started <= at <= run.stopped for at in arrivals)
    share = 100.0 * during / max(produced, 1)
    print(f"deliveries that arrived during the load: {during} of {produced} produced during it = {share:.1f} % "
          f"{_aim('arrived during the load %', share, higher=True)}")  # fmt: skip
    drained = max(arrivals + [run.stopped]) - run.stopped
    gave_up = f" (gave up after {run.args.drain:g} s)" if lost else ""
    print(f"backlog drained {drained:.1f} s after the load stopped{gave_up} {_aim('drain s', drained)}")

    table = series.rows(run.started, stats, arrivals, run.cpu)
    if table:
        peak = max(table, key=lambda row: row["backlog"])
        print(f"backlog peak: {peak['backlog']} deliveries at {peak['second']} s")
        title = " · ".join([run.meta["layout"], run.meta["code"], run.meta["database"]])
        figures = (f"{rate:.0f} req/s · reads p50/p99 {ms(stats.reads, 0.5):.0f}/{read_p99:.0f} ms · writes p50/p99 "
                   f"{ms(stats.writes, 0.5):.0f}/{write_p99:.0f} ms · arrived during the load {share:.1f} % · "
                   f"drained {drained:.1f} s after")  # fmt: skip
        summary = "\n".join([run.meta["load"], run.meta["webhooks"], figures])
        plot.plot(table, elapsed, title, summary, png, cores)
        csv_path = str(Path(png).with_suffix(".csv"))
        series.write_csv(table, csv_path)
        print(f"picture: {Path(png).resolve()} (per-second figures: {Path(csv_path).resolve()})")
    errors = sum(n for status, n in stats.statuses.items() if status == "error" or status >= 500)
    # Duplicates too: at least once allows them after a failure, and a healthy run has none.
    return not (errors or lost or unexpected or result["duplicated"] or result["bad"])
