"""The process entry points: the `riskapi` command line, `serve`'s supervisor and its listening sockets."""

import gc


def settle() -> None:
    """Set aside for good what start-up built, once it is built: the collector's full passes skip it.

    An API process keeps its spec, its compiled validators, routes and modules until it exits, a worker
    its modules; a full collection walks every object the process tracks, with every thread of the
    process stopped. In the soak's API processes they took up to 128 ms each (bench/README, issue 24).
    Start-up's garbage is collected first, or it would be kept for good too.
    """
    gc.collect()
    gc.freeze()
