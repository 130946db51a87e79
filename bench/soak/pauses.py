"""The service's garbage collections during the load, process by process: `python -m bench.soak --gc`.

Each served process appends a line per collection to a file of its own (bench/gc_probe/sitecustomize.py);
a collection stops every thread of its process, so its requests in flight wait out the longest of them.
"""

from pathlib import Path


def read(folder: Path, started: float, stopped: float) -> list[dict]:
    """Return, per process, its command and its collections by generation that began during the load."""
    processes = []
    for path in sorted(folder.glob("*.txt")):
        lines = path.read_text().splitlines()
        if not lines:
            continue
        command = lines[0].removeprefix("# ")
        counts, seconds, longest = [0, 0, 0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        for line in lines[1:]:
            fields = line.split()
            try:
                at, generation, took = float(fields[0]), int(fields[1]), float(fields[2])
            except (IndexError, ValueError):  # a line cut short when the process was stopped
                continue
            if started <= at <= stopped:
                counts[generation] += 1
                seconds[generation] += took
                longest[generation] = max(longest[generation], took)
        processes.append({"pid": int(path.stem), "command": command, "counts": counts, "seconds": seconds, "longest": longest})
    return processes


def describe(processes: list[dict]) -> list[str]:
    """Return a line per process that collected during the load: counts, time in all and the longest, by generation."""
    lines = []
    for process in processes:
        if not any(process["counts"]):
            continue
        counts, seconds, longest = process["counts"], process["seconds"], process["longest"]
        parts = [f"gen {g}: {counts[g]} in {seconds[g] * 1000:.0f} ms, longest {longest[g] * 1000:.1f}" for g in range(3)]
        lines.append(f"  pid {process['pid']} ({process['command']}): " + "; ".join(parts))
    return lines
