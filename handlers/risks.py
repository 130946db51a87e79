"""The agency's risk profiles: the list an API client finds its `{risk}` uuids in."""

import flask

from handlers import common
from services import listing
from services.list_query import ListRequest


def list_risks(
    agency_id: int, per_page: int, list_request: ListRequest, cursor: str | None = None, sort: list[str] | None = None
) -> flask.Response:
    """List the agency's risk profiles."""
    return common.respond(200, listing.risks(agency_id, common.asked(per_page, cursor, sort, list_request)))
