"""Every list's page: the spec's filters and sorts, a signed cursor, Laravel's envelope (what the list handlers call).

A list handler passes the request's values in (`list_request`: its filters, its query and URL, services.list_query)
and answers with the envelope that comes back; the rows each list selects are chosen here.
"""

import functools
import threading
import uuid
from collections.abc import Callable
from typing import Any

import cachetools
import peewee

from foundation.exceptions import ApiError
from models.risk_data import InRisk
from models.tenancy import AppKey, Risk
from models.webhooks import Delivery, Event, Webhook
from services import events as agency_events
from services import render, webhook_ops, webhook_writes
from services.list_query import ListRequest, ListSpec, WithChildren
from services.pagination import Paginator, PreparedPages, envelope

_SECRET: list = []

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


def cursor_secret(configured: str | None) -> bytes:
    """Return the key that signs cursors, shared by every process: RISKAPI_SECRET_KEY, or one kept in the database."""
    if not _SECRET:
        _SECRET.append((configured or AppKey.get_or_make("cursor")).encode())
    return _SECRET[0]


class Asked:
    """What every page asks: how many, from which cursor, in which order, and the request's filters, query and URL."""

    def __init__(self, per_page: int, cursor: str | None, sort: list[str] | None, request: ListRequest, secret: str | None):
        self.per_page, self.cursor, self.sort, self.request, self.secret = per_page, cursor, sort, request, secret


def risks(agency_id: int, asked: Asked) -> dict:
    """Return a page of the agency's risk profiles."""
    rows = Risk.select().where(Risk.agency == agency_id).dicts()
    return page(Risk, rows, agency_id, asked, lambda found: [render.envelope(Risk, row) for row in found])


def risk_data(model: type[InRisk], agency_id: int, risk: str, asked: Asked, include: list[str] | None) -> dict:
    """Return a page of a risk profile's rows of one kind, each with the relations asked for."""
    profile = risk_of(agency_id, risk)
    shown = functools.partial(render.envelopes, model, include=include)
    return page(model, None, profile.id, asked, shown, pages=pages_of(model))


@functools.cache
def pages_of(model: type[InRisk]) -> PreparedPages:
    """Return the page queries of a kind's list, each written once per shape."""

    def rows(risk: Any) -> "peewee.ModelSelect[Any]":
        return render.select_rows(model).where(model.risk == risk)

    return PreparedPages(model, rows, model.risk, functools.partial(render.with_references, model))


def webhooks(agency_id: int, asked: Asked) -> dict:
    """Return a page of the agency's webhooks."""
    rows = Webhook.select().where((Webhook.agency == agency_id) & Webhook.subscription()).dicts()
    return page(Webhook, rows, agency_id, asked, lambda found: [webhook_writes.render(row) for row in found])


def deliveries(agency_id: int, webhook: str, asked: Asked) -> dict:
    """Return a page of a webhook's deliveries (a listen session's too), newest first, each with its attempts."""
    hook = webhook_ops.webhook_of(agency_id, webhook, sessions=True)
    rows = webhook_ops.select().where(Delivery.webhook == hook.id).dicts()
    return page_with_children(Delivery, rows, webhook_ops.attempts, webhook_ops.render, agency_id, asked)


def events(agency_id: int, asked: Asked) -> dict:
    """Return a page of the agency's events, newest first, each with the deliveries it made."""
    rows = agency_events.rows(agency_id)
    return page_with_children(Event, rows, agency_events.deliveries, agency_events.render, agency_id, asked)


def page(
    model: render.Model,
    rows_query: "peewee.ModelSelect[Any] | None",
    scope_id: int,
    asked: Asked,
    render_rows: Callable[[list], list[dict]],
    fetch: Callable[[Any], list] = list,
    pages: PreparedPages | None = None,
) -> dict:
    """Return one page of a list: its rows filtered and sorted as the spec names them, a signed cursor, the envelope.

    render_rows(rows) turns the page's rows into its items; scope_id is what reference filters look up within;
    fetch(query) runs rows_query's page (render.fetch reads the driver's rows as they are). Given pages (and no
    rows_query), a page is read through them instead: its text written once per shape, its rows as the driver sends them.
    """
    request = asked.request
    listing = _listing(request.operation, model)
    paginator = Paginator(listing.keys(asked.sort), listing.signature_of(asked.sort), cursor_secret(asked.secret))
    if pages is not None:
        hole = listing.written(scope_id, request.filters)
        rows_after = pages.rows_after(paginator, scope_id, hole, functools.partial(render.fetch_text, model))
        rows, next_cursor, prev_cursor = paginator.page_from(rows_after, asked.per_page, asked.cursor)
    elif rows_query is None:
        raise TypeError("page needs a rows_query or pages")
    else:
        where = listing.condition(scope_id, request.filters)
        rows_query = rows_query if where is None else rows_query.where(where)
        rows, next_cursor, prev_cursor = paginator.page(rows_query, asked.per_page, asked.cursor, fetch)
    return envelope(render_rows(rows), asked.per_page, next_cursor, prev_cursor, request.url, request.query)


def page_with_children(
    model: render.Model,
    rows_query: "peewee.ModelSelect[Any]",
    children: Callable[[list[int]], dict[int, list[dict]]],
    render_row: Callable[[dict, list[dict]], dict],
    scope_id: int,
    asked: Asked,
) -> dict:
    """Return a list page whose rows (dicts) are read with their children (children(ids) -> {id: [...]}) in one snapshot."""
    found = WithChildren(children, render_row)
    return page(model, rows_query, scope_id, asked, found.render, found.fetch)


@functools.cache
def _listing(operation: str, model: render.Model) -> ListSpec:
    # Named by the operation's function, so that its cursors cannot be replayed on another list.
    return ListSpec(operation, model)
