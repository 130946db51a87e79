"""Serve the API as `python -m uvicorn` would, in a process that dies right after a keyed write commits.

The fault is installed from outside the product (tests/test_idempotency_faults.py runs this module in place
of uvicorn): the first transaction that stores an Idempotency-Key's answer (models.idempotency's
`IdempotencyKey.complete`) gets a Peewee after-commit callback that exits the process. The write and its
answer are then committed and the client never hears back, as if the process were killed at that moment;
no clock or signal decides when, so a busy machine cannot move the fault.

    python -m tests.dies_after_commit api.app:asgi --factory --port 8000
"""

import os
from typing import Any

import uvicorn

import models
from models.idempotency import IdempotencyKey

# EX_TEMPFAIL: what the test expects, so that no other way of dying passes for this one.
EXIT_STATUS = 75


def die_after_commit() -> None:
    """Make the process exit right after the commit of a transaction that stored an Idempotency-Key's answer."""
    complete = IdempotencyKey.complete

    def completing(*args: Any, **kwargs: Any) -> bool:
        stored = complete(*args, **kwargs)
        if stored:
            # os._exit, not sys.exit: nothing may run after the commit (no answer, no clean shutdown).
            models.db.after_commit(lambda: os._exit(EXIT_STATUS))
        return stored

    IdempotencyKey.complete = staticmethod(completing)  # type: ignore[method-assign]


if __name__ == "__main__":
    die_after_commit()
    uvicorn.main()
