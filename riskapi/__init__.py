"""riskapi, the roof: the `riskapi` command line and the processes it starts (serve, worker, listen).

Everything else is imported from here, never the other way: `api` and `handlers` (the HTTP service), `jobs` (webhook
delivery), `services` and `webhooks` (the rules), `models` (the data), and `foundation` (settings, errors, logging,
metrics, signing), which imports nothing of the product.
"""

import gc

from foundation import __version__

__all__ = ["__version__", "settle"]


def settle() -> None:
    """Set aside for good what start-up built, once it is built: the collector's full passes skip it.

    An API process keeps its spec, its compiled validators, routes and modules until it exits, a worker
    its modules; a full collection walks every object the process tracks, with every thread of the
    process stopped. In the soak's API processes they took up to 128 ms each (bench/README, issue 24).
    Start-up's garbage is collected first, or it would be kept for good too.
    """
    gc.collect()
    gc.freeze()
