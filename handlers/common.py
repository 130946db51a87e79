"""What every handler shares: the caller's risk profile, the body, lists, bulk responses."""

import functools
import threading
import uuid
from collections.abc import Callable
from typing import Any

import cachetools
import flask
import orjson
import peewee

from api import precognition
from foundation.exceptions import ApiError
from handlers import settings
from models.tenancy import AppKey, Risk
from services import list_query, render
from services.bulk_write import Errors, Write, check, fail_if, run
from services.pagination import Paginator, PreparedPages, envelope

_SECRET: list = []


def respond(status: int, body: Any) -> flask.Response:
    """Return a compact JSON response."""
    return flask.Response(orjson.dumps(body), status=status, mimetype="application/json")


# Risk profiles are never re-assigned to another agency; a few seconds of caching saves a query per request.
_RISK_TTL = 5.0
# (agency id, risk uuid) -> Risk; TTLCache is not thread-safe, and even a lookup may evict expired entries.
_risks: cachetools.TTLCache = cachetools.TTLCache(maxsize=10000, ttl=_RISK_TTL)
_risks_lock = threading.Lock()


def risk_of(agency_id: int, risk_uuid: str) -> Risk:
    """Return the caller's risk profile; another agency's answers 404 like a missing one."""
    with _risks_lock:
        hit = _risks.get((agency_id, risk_uuid))
    if hit is not None:
        return hit
    try:
        uuid.UUID(risk_uuid)
    except ValueError:
        raise ApiError(404, "Risk profile not found.") from None
    risk = Risk.of_agency(agency_id, risk_uuid)
    if risk is None:
        raise ApiError(404, "Risk profile not found.")
    with _risks_lock:
        _risks[(agency_id, risk_uuid)] = risk
    return risk


def refuse(body_errors: dict | None) -> None:
    """Answer 422 with the body's schema errors, if it has any (Connexion hands them over as `body_errors`)."""
    fail_if(Errors(body_errors or {}))


def cursor_secret() -> bytes:
    """Return the key that signs cursors, shared by every process."""
    if not _SECRET:
        configured = settings().secret_key
        _SECRET.append((configured or AppKey.get_or_make("cursor")).encode())
    return _SECRET[0]


def list_page(
    model: render.Model,
    rows_query: "peewee.ModelSelect[Any] | None",
    scope_id: int,
    per_page: int,
    cursor: str | None,
    list_request: list_query.ListRequest,
    sort: list[str] | None,
    render_rows: Callable[[list], list[dict]],
    fetch: Callable[[Any], list] = list,
    pages: PreparedPages | None = None,
) -> flask.Response:
    """Answer one page of the request's list operation: the spec's filters and sorts, a signed cursor, Laravel's envelope.

    render_rows(rows) turns the page's rows into its items; scope_id is what reference filters look up within;
    fetch(query) runs rows_query's page (render.fetch reads the driver's rows as they are). Given pages (and no
    rows_query), a page is read through them instead: its text written once per shape, its rows as the driver sends them.
    """
    listing = _listing(list_request.operation, model)
    filters = list_request.filters
    paginator = Paginator(listing.keys(sort), listing.signature_of(sort), cursor_secret())
    if pages is not None:
        hole = listing.written(scope_id, filters)
        rows_after = pages.rows_after(paginator, scope_id, hole, functools.partial(render.fetch_text, model))
        rows, next_cursor, prev_cursor = paginator.page_from(rows_after, per_page, cursor)
    elif rows_query is None:
        raise TypeError("list_page needs a rows_query or pages")
    else:
        where = listing.condition(scope_id, filters)
        rows_query = rows_query if where is None else rows_query.where(where)
        rows, next_cursor, prev_cursor = paginator.page(rows_query, per_page, cursor, fetch)
    items = render_rows(rows)
    return respond(200, envelope(items, per_page, next_cursor, prev_cursor, list_request.url, list_request.query))


def list_page_with_children(
    model: render.Model,
    rows_query: "peewee.ModelSelect[Any]",
    children: Callable[[list[int]], dict[int, list[dict]]],
    render_row: Callable[[dict, list[dict]], dict],
    scope_id: int,
    per_page: int,
    cursor: str | None,
    list_request: list_query.ListRequest,
    sort: list[str] | None,
) -> flask.Response:
    """Answer a list page whose rows (dicts) are read with their children (children(ids) -> {id: [...]}) in one snapshot."""
    page = list_query.WithChildren(children, render_row)
    return list_page(model, rows_query, scope_id, per_page, cursor, list_request, sort, page.render, page.fetch)


@functools.cache
def _listing(operation: str, model: render.Model) -> list_query.ListSpec:
    # Named by the operation's function, so that its cursors cannot be replayed on another list.
    return list_query.ListSpec(operation, model)


def bulk_write(status: int, write: Write, body: Any, body_errors: dict | None, dry_run: bool) -> flask.Response:
    """Answer a bulk write on its one path (services.bulk_write): a dry-run only checks it, else applies it atomically.

    `body_errors` are the body's schema errors, which the rules add to; `dry_run` comes from api.precognition.
    """
    errors = Errors(body_errors or {})
    if dry_run:
        check(write, body, errors)
        return precognition.passed()
    return respond(status, {"data": run(write, body, errors)})
