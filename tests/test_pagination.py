"""Cursor pagination: envelope, walking both ways, stability, cursor and per_page errors; over HTTP, then directly."""

import base64
import functools

import httpx
import pytest

from foundation.exceptions import ValidationFailed
from models.risk_data import Driver, Vehicle
from services.list_query import ListSpec
from services.pagination import Paginator, envelope
from toolkit.tenants import items


@pytest.fixture
def drivers(client, tenant):
    """35 drivers; last names repeat and a third of them are null."""
    datas = [{"last_name": None if i % 3 == 0 else f"n{i % 4}", "first_name": f"f{i}"} for i in range(35)]
    response = client.post(tenant.url("/drivers"), json=items("driver", *datas), headers=tenant.headers)
    assert response.status_code == 201
    return response.json()["data"]


def walk(client, tenant, url, key="next_page_url"):
    pages = []
    while url:
        page = client.get(url, headers=tenant.headers).json()
        assert "data" in page, page
        pages.append(page)
        url = page[key]
    return pages


def expected_order(drivers, desc=False):
    """Nulls sort as the smallest value; ties keep creation order (the ascending tiebreaker)."""
    groups = {}
    for driver in drivers:
        name = driver["data"]["last_name"]
        groups.setdefault((name is not None, name or ""), []).append(driver)
    return [d["uuid"] for key in sorted(groups, reverse=desc) for d in sorted(groups[key], key=lambda d: d["data"]["number"])]


def test_envelope_keys_and_urls(client, tenant, drivers, server):
    response = client.get(
        tenant.url("/drivers"),
        params={"per_page": 10, "filter[first_name]": "f", "sort": "-number"},
        headers=tenant.headers,
    )
    page = response.json()
    assert list(page) == ["data", "path", "per_page", "next_cursor", "next_page_url", "prev_cursor", "prev_page_url"]
    assert page["path"] == f"{server.url}/api/v1/risks/{tenant.risk}/data/drivers"
    assert page["per_page"] == 10 and len(page["data"]) == 10
    assert page["prev_cursor"] is None and page["prev_page_url"] is None
    next_url = httpx.URL(page["next_page_url"])
    assert next_url.params["per_page"] == "10"
    assert next_url.params["filter[first_name]"] == "f" and next_url.params["sort"] == "-number"
    assert next_url.params["cursor"] == page["next_cursor"]
    assert client.get(tenant.url("/drivers"), headers=tenant.headers).json()["per_page"] == 50


@pytest.mark.parametrize("sort", ["last_name", "-last_name", "number", "-created"])
def test_walk_forward_then_back(client, tenant, drivers, sort):
    first = client.get(tenant.url("/drivers"), params={"per_page": 10, "sort": sort}, headers=tenant.headers).request.url
    forward = walk(client, tenant, str(first))
    assert [len(p["data"]) for p in forward] == [10, 10, 10, 5]
    seen = [d["uuid"] for p in forward for d in p["data"]]
    assert sorted(seen) == sorted(d["uuid"] for d in drivers) and len(set(seen)) == 35
    if "last_name" in sort:
        assert seen == expected_order(drivers, desc=sort.startswith("-"))
    assert forward[-1]["next_cursor"] is None
    backward = walk(client, tenant, forward[-1]["prev_page_url"], key="prev_page_url")
    assert [[d["uuid"] for d in p["data"]] for p in backward] == [[d["uuid"] for d in p["data"]] for p in reversed(forward[:-1])]
    assert backward[-1]["prev_cursor"] is None


@pytest.mark.parametrize("sort", ["last_name", "-last_name", "-created"])
def test_a_filter_every_driver_passes_reads_the_pages_of_no_filter(client, tenant, drivers, sort):
    # A drivers page runs its text written once per shape (PreparedPages); a filter every driver passes is written
    # into that text's hole: both ways, the same pages as without it (each compared with Peewee's query below).
    def pages(*extra):
        params = {"per_page": 10, "sort": sort, **dict(extra)}
        first = client.get(tenant.url("/drivers"), params=params, headers=tenant.headers).request.url
        forward = walk(client, tenant, str(first))
        backward = walk(client, tenant, forward[-1]["prev_page_url"], key="prev_page_url")
        return [[d["uuid"] for d in p["data"]] for p in forward + backward]

    written = pages()
    assert written == pages(("filter[first_name]", "f")) and len(written) == 7
    assert sum(map(len, written)) == 35 + 30


def test_inserts_between_requests_do_not_disturb_the_walk(client, tenant, drivers):
    page = client.get(tenant.url("/drivers"), params={"per_page": 10, "sort": "last_name"}, headers=tenant.headers).json()
    seen = [d["uuid"] for d in page["data"]]
    client.post(
        tenant.url("/drivers"),
        json=items("driver", {"last_name": None}, {"last_name": "a"}, {"last_name": "zz"}),
        headers=tenant.headers,
    )
    for later in walk(client, tenant, page["next_page_url"]):
        seen += [d["uuid"] for d in later["data"]]
    original = {d["uuid"] for d in drivers}
    assert original <= set(seen) and len(seen) == len(set(seen))


def test_bad_cursors_are_422(client, tenant, drivers):
    page = client.get(tenant.url("/drivers"), params={"per_page": 10}, headers=tenant.headers).json()
    cursor = page["next_cursor"]
    body, mac = cursor.split(".")
    forged = (
        base64.urlsafe_b64encode(base64.urlsafe_b64decode(body + "==").replace(b"10", b"20")).rstrip(b"=").decode() + "." + mac
    )
    for bad in ["garbage", "", "a.b.c", forged, cursor[:-2], "%%%"]:
        response = client.get(tenant.url("/drivers"), params={"cursor": bad}, headers=tenant.headers)
        if bad == "":
            assert response.status_code == 200
            continue
        assert response.status_code == 422, bad
        assert response.json()["message"] == {"cursor": ["The cursor is invalid."]}
    other_sort = client.get(tenant.url("/drivers"), params={"cursor": cursor, "sort": "-number"}, headers=tenant.headers)
    assert other_sort.status_code == 422


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("9", "The per page field must be between 10 and 100."),
        ("101", "The per page field must be between 10 and 100."),
        ("ten", "The per page field must be a number."),
    ],
)
def test_per_page_bounds(client, tenant, value, message):
    response = client.get(tenant.url("/drivers"), params={"per_page": value}, headers=tenant.headers)
    assert response.status_code == 422
    assert response.json()["message"] == {"per_page": [message]}


# ---- services.pagination, called directly ------------------------------------------------------------

SECRET = b"cursor-secret"


def paginator(*sort, operation="listDrivers", secret=SECRET) -> Paginator:
    """A paginator of drivers in the order `sort` names (by number when none), signed as the list does."""
    spec = ListSpec(operation, Driver)
    return Paginator(spec.keys(list(sort) or None), spec.signature_of(list(sort) or None), secret)


def stored(profile, last_names) -> list[dict]:
    """Store one driver per last name (numbered 1, 2, ...); return their rows as the list query reads them."""
    for number, name in enumerate(last_names, start=1):
        Driver.create(risk=profile.id, number=number, last_name=name)
    return list(Driver.select().where(Driver.risk == profile.id).dicts())


def pages(profile, pager, per_page: int) -> list[list[int]]:
    """Walk every page forward from the first; return the numbers on each."""
    query = Driver.select().where(Driver.risk == profile.id).dicts()
    walked, cursor = [], None
    while True:
        rows, next_cursor, _ = pager.page(query, per_page, cursor)
        walked.append([row["number"] for row in rows])
        if next_cursor is None:
            return walked
        cursor = next_cursor


def test_a_cursor_decodes_to_the_row_it_was_made_from(profile):
    """decode(encode(row)) gives back the row's key values, typed, and the direction."""
    row = stored(profile, ["Lee"])[0]
    pager = paginator("-last_name")
    assert pager.decode(pager.encode(row, True)) == (["Lee", row["id"]], True)
    assert pager.decode(pager.encode(row, False)) == (["Lee", row["id"]], False)
    by_created = paginator("created")
    assert by_created.decode(by_created.encode(row, True))[0][0] == row["created"]


def test_a_cursor_is_refused_when_tampered_with_or_made_for_another_list(profile):
    """Any change to a cursor, another secret or another ordering's signature: 422 "The cursor is invalid."."""
    row = stored(profile, ["Lee"])[0]
    cursor = paginator().encode(row, True)
    body, _, mac = cursor.partition(".")
    flipped = body[:5] + ("A" if body[5] != "A" else "B") + body[6:]
    bad = [flipped + "." + mac, cursor[:-2], body, "garbage", "a.b.c", cursor + "é", ""]
    for text in bad:
        with pytest.raises(ValidationFailed) as failed:
            paginator().decode(text)
        assert failed.value.errors == {"cursor": ["The cursor is invalid."]}, text
    for other in (paginator(secret=b"another"), paginator(operation="listVehicles"), paginator("-number")):
        with pytest.raises(ValidationFailed):
            other.decode(cursor)


@pytest.mark.parametrize("number", ["7", True, 2**53 + 1, 1.5, None, [1], {"a": 1}])
def test_a_signed_cursor_with_a_value_its_column_cannot_hold_is_refused(profile, number):
    """Values are checked against their column even under a valid signature (a leaked secret cannot inject)."""
    pager = paginator()
    cursor = pager.encode({"number": number}, True)
    with pytest.raises(ValidationFailed):
        pager.decode(cursor)


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        # Nulls sort as the smallest value; ties keep the id's (creation) order.
        (("last_name",), [2, 5, 1, 4, 3, 6]),
        (("-last_name",), [3, 6, 1, 4, 2, 5]),
        (("-number",), [6, 5, 4, 3, 2, 1]),
    ],
)
def test_pages_follow_the_order_with_nulls_and_ties_and_walk_back(profile, sort, expected):
    """Walking forward gives every row once in order; prev cursors give the same pages back."""
    stored(profile, ["b", None, "c", "b", None, "c"])
    pager = paginator(*sort)
    forward = pages(profile, pager, 4)
    assert forward == [expected[:4], expected[4:]]
    query = Driver.select().where(Driver.risk == profile.id).dicts()
    rows, next_cursor, prev_cursor = pager.page(
        query, 4, pager.encode(next(r for r in query if r["number"] == expected[3]), True)
    )
    assert [r["number"] for r in rows] == expected[4:] and next_cursor is None and prev_cursor
    back, next_back, prev_back = pager.page(query, 4, prev_cursor)
    assert [r["number"] for r in back] == expected[:4] and next_back and prev_back is None


def test_page_edges_have_no_cursor_outwards(profile):
    """The first page has no prev cursor, the last no next; an exact fit ends without an empty page; none is empty."""
    stored(profile, ["a"] * 4)
    query = Driver.select().where(Driver.risk == profile.id).dicts()
    rows, next_cursor, prev_cursor = paginator().page(query, 4, None)
    assert len(rows) == 4 and next_cursor is None and prev_cursor is None
    rows, next_cursor, prev_cursor = paginator().page(query, 3, None)
    assert [r["number"] for r in rows] == [1, 2, 3] and next_cursor and prev_cursor is None
    empty = Driver.select().where(Driver.risk == -1).dicts()
    assert paginator().page(empty, 10, None) == ([], None, None)


def test_the_envelope_repeats_every_other_parameter_in_its_page_urls():
    """Page URLs keep the request's parameters (repeats too), with per_page and cursor replaced and last."""
    args = [("filter[first_name]", "a b"), ("cursor", "old"), ("sort", "x"), ("per_page", "99"), ("sort", "y")]
    page = envelope(["item"], 20, "next.c", None, "https://api.example.com/v1/things", args)
    assert list(page) == ["data", "path", "per_page", "next_cursor", "next_page_url", "prev_cursor", "prev_page_url"]
    assert page["data"] == ["item"] and page["path"] == "https://api.example.com/v1/things" and page["per_page"] == 20
    assert page["next_page_url"] == (
        "https://api.example.com/v1/things?filter%5Bfirst_name%5D=a+b&sort=x&sort=y&per_page=20&cursor=next.c"
    )
    assert page["next_cursor"] == "next.c"
    assert page["prev_cursor"] is None and page["prev_page_url"] is None


FILTERS = [
    {},
    {"search": "n1"},
    {"last_name": "N"},
    {"number": "3,5,7,9,11"},
    {"is_employee": "false"},
    {"license_state": "TX,CA"},
    {"percent_use": "0"},
    {"created": "2020-01-01,"},
    {"updated": ",2999-12-31"},
    {"vehicle": "1,00000000-0000-0000-0000-000000000000"},
    {"search": "n", "number": "1,2,3,4,5,6,7,8,9,10,11,12,13,14"},
]


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(f) or "none")
@pytest.mark.parametrize("sort", [(), ("last_name",), ("-created",)])
def test_a_page_of_written_texts_reads_what_peewee_reads(profile, filters, sort):
    # PreparedPages writes the text once per shape and each request's filters into its hole (models.prepared):
    # walked both ways, every page and cursor equals Peewee's query of the same filters.
    from services import render
    from services.listing import pages_of

    vehicle = Vehicle.create(risk=profile.id, number=1)
    for number, name in enumerate(["n1", None, "n2", "n10", None, "n1", "x"] * 2, start=1):
        refers = vehicle.id if number % 3 else None  # the written text joins the reference's UUID after its LIMIT
        Driver.create(
            risk=profile.id, number=number, last_name=name, is_employee=number % 2 == 0, percent_use=number % 3, vehicle=refers
        )
    listing = ListSpec("listDrivers", Driver)
    pager = paginator(*sort)
    where = listing.condition(profile.id, filters)
    hole = listing.written(profile.id, filters)  # kept from here on: each page below asks again
    pages_ = pages_of(Driver)
    peewee_query = render.select_all(Driver).where(Driver.risk == profile.id)
    peewee_query = peewee_query if where is None else peewee_query.where(where)

    def written(cursor):
        return pager.page_from(
            pages_.rows_after(
                pager, profile.id, listing.written(profile.id, filters), functools.partial(render.fetch_text, Driver)
            ),
            10,
            cursor,
        )

    def peewee(cursor):
        return pager.page(peewee_query, 10, cursor, functools.partial(render.fetch, Driver))

    def walk_both(cursor, way):
        # Each page both ways; `way` picks the cursor followed (1: next, 2: previous). Return the last page's answer.
        while True:
            a, b = written(cursor), peewee(cursor)
            assert [(r["id"], r["vehicle_uuid"]) for r in a[0]] == [(r["id"], r["vehicle_uuid"]) for r in b[0]] and a[1:] == b[1:]
            assert {r["vehicle_uuid"] for r in a[0]} <= {None, vehicle.uuid, str(vehicle.uuid), vehicle.uuid.hex}
            walked.extend(r["id"] for r in a[0])
            if a[way] is None:
                return a
            cursor = a[way]

    assert (hole is None) == (where is None)
    walked: list[int] = []
    last = walk_both(None, 1)
    forward = len(walked)
    if last[2] is not None:
        walk_both(last[2], 2)
    assert forward == len(set(walked[:forward]))  # no row twice in one direction
    if not filters:
        assert forward == 14 and len(walked) > forward  # every driver, then pages walked back too


def test_a_list_keeps_only_its_latest_page_shapes(profile):
    # The sort takes up to 20 columns in any order and direction: a caller could ask for countless shapes,
    # so a list keeps the latest SHAPES_KEPT written and writes an older one again when asked.
    from services import render
    from services.pagination import SHAPES_KEPT, PreparedPages

    Driver.create(risk=profile.id, number=1, last_name="kept")
    pages_ = PreparedPages(Driver, lambda risk: render.select_all(Driver).where(Driver.risk == risk), Driver.risk)
    names = ["number", "last_name", "first_name", "created", "updated", "year_licensed", "percent_use", "sex"]
    pairs = [(a, b) for a in names for b in names if a != b]
    sorts = [[x + a, y + b] for a, b in pairs for x in ("", "-") for y in ("", "-")] + [[a, b, "sex"] for a, b in pairs]
    assert len(sorts) > SHAPES_KEPT
    read = functools.partial(render.fetch_text, Driver)
    for sort in sorts:
        (rows, _, _) = paginator(*sort).page_from(pages_.rows_after(paginator(*sort), profile.id, None, read), 10, None)
        assert [row["last_name"] for row in rows] == ["kept"]
    assert len(pages_.written) == SHAPES_KEPT


def test_a_list_keeps_its_latest_filter_sets_written_and_never_a_bad_one(profile):
    # A filter set asked again is not written again (a client paging through, a dashboard polling); the sets kept
    # are bounded, as a caller can send countless ones; a bad value is refused every time it comes.
    from foundation.exceptions import ValidationFailed
    from services.list_query import KEPT

    listing = ListSpec("listDrivers", Driver)
    first = listing.written(profile.id, {"license_state": "TX,CA", "created": "2020-01-01,"})
    assert listing.written(profile.id, {"license_state": "TX,CA", "created": "2020-01-01,"}) is first
    assert listing.written(profile.id + 1, {"license_state": "TX,CA", "created": "2020-01-01,"}) is not first
    assert listing.written(profile.id, {}) is None
    for _ in range(2):
        with pytest.raises(ValidationFailed):
            listing.written(profile.id, {"created": "yesterday,"})
    for n in range(KEPT + 10):
        listing.written(profile.id, {"license_state": f"S{n}"})
    assert len(listing._kept) == KEPT
