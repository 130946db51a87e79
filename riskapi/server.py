"""Running the service: uvicorn for the API (the next issue adds the relay and worker)."""

import uvicorn

import models
from riskapi.config import Settings


def serve(settings: Settings, host: str, port: int, workers: int = 1) -> None:
    """Upgrade the database, then serve the API."""
    models.bind(settings.database_url)
    models.upgrade()
    uvicorn.run(
        "riskapi.app:asgi",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        access_log=False,
    )


def work(settings: Settings, burst: bool = False) -> None:
    """Run webhook delivery workers."""
    raise SystemExit("riskapi: the webhook worker is not available yet")
