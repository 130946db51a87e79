"""What the `riskapi` commands share: one JSON line per answer, the database, an agency named on the command line."""

import datetime
import json
import sys
import uuid
from typing import Any

import models
from foundation.config import Settings
from models import migrations, timestamp
from models.tenancy import Agency


def emit(obj: Any) -> None:
    """Print one JSON line."""
    sys.stdout.write(json.dumps(obj) + "\n")


def bind(settings: Settings) -> None:
    """Bind the models to the configured database and apply its pending migrations."""
    models.bind(settings.database_url)
    migrations.upgrade()


def when(moment: datetime.datetime | None) -> str | None:
    """Return a moment as the API writes it, or None."""
    return timestamp(moment) if moment else None


def agency_of(value: str) -> Agency:
    """Return the agency a UUID names, or stop with one line saying why not."""
    try:
        uuid.UUID(value)
    except ValueError:
        sys.exit(f"riskapi: agency {value!r} is not a UUID")
    agency = Agency.get_or_none(Agency.uuid == value)
    if agency is None:
        sys.exit(f"riskapi: no agency {value}")
    return agency
