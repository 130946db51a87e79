"""The agency's risk profiles: the list an API client finds its `{risk}` uuids in."""

import flask

from handlers import common
from models.tenancy import Risk
from services import render
from services.list_query import ListRequest


def list_risks(
    agency_id: int, per_page: int, list_request: ListRequest, cursor: str | None = None, sort: list[str] | None = None
) -> flask.Response:
    """List the agency's risk profiles."""
    rows = Risk.select().where(Risk.agency == agency_id).dicts()
    return common.list_page(
        Risk, rows, agency_id, per_page, cursor, list_request, sort, lambda page: [render.envelope(Risk, row) for row in page]
    )
