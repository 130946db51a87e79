"""The agency's risk profiles: the list an API client finds its `{risk}` uuids in."""

from typing import Any

import flask

from handlers import common
from models.tenancy import Risk
from riskapi.services import render


def list_risks(
    agency_id: int, per_page: int, cursor: str | None = None, filter_: Any = None, sort: list[str] | None = None
) -> flask.Response:
    """List the agency's risk profiles."""
    rows = Risk.select().where(Risk.agency == agency_id).dicts()
    return common.list_page(
        Risk, rows, agency_id, per_page, cursor, filter_, sort, lambda page: [render.envelope(Risk, row) for row in page]
    )
