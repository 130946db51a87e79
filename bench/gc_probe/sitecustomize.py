"""Record every garbage collection of a process the bench started: `python -m bench.soak --gc`.

On the served processes' PYTHONPATH only when asked (bench.servers.Server adds this folder when its
environment names BENCH_GC_DIR). Python imports `sitecustomize` at start-up: each process then appends
one line per collection to BENCH_GC_DIR/<pid>.txt: the CLOCK_MONOTONIC time it started (the same clock
in every process, so the soak keeps only those of its load), its generation and its duration in
seconds. The duration is wall time: a process the kernel did not run meanwhile shows that too.
"""

import gc
import os
import sys
import time

_FOLDER = os.environ.get("BENCH_GC_DIR")

if _FOLDER:
    _log = open(os.path.join(_FOLDER, f"{os.getpid()}.txt"), "a", buffering=1)
    _log.write(" ".join(["#", *sys.argv[:2]]) + "\n")
    _began = [0.0]

    def _record(phase: str, info: dict) -> None:
        if phase == "start":
            _began[0] = time.monotonic()
        else:
            _log.write(f"{_began[0]:.6f} {info['generation']} {time.monotonic() - _began[0]:.6f}\n")

    gc.callbacks.append(_record)
