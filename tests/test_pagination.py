"""Cursor pagination: envelope, walking both ways, stability, cursor and per_page errors."""

import base64

import httpx
import pytest

from tests.conftest import items


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
        pages.append(page)
        url = page[key]
    return pages


def expected_order(drivers, desc=False):
    """Nulls sort as the smallest value; ties keep creation order (the ascending tiebreaker)."""
    groups = {}
    for driver in drivers:
        name = driver["data"]["last_name"]
        groups.setdefault((name is not None, name or ""), []).append(driver)
    return [
        d["uuid"]
        for key in sorted(groups, reverse=desc)
        for d in sorted(groups[key], key=lambda d: d["data"]["number"])
    ]


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
    first = client.get(
        tenant.url("/drivers"), params={"per_page": 10, "sort": sort}, headers=tenant.headers
    ).request.url
    forward = walk(client, tenant, str(first))
    assert [len(p["data"]) for p in forward] == [10, 10, 10, 5]
    seen = [d["uuid"] for p in forward for d in p["data"]]
    assert sorted(seen) == sorted(d["uuid"] for d in drivers) and len(set(seen)) == 35
    if "last_name" in sort:
        assert seen == expected_order(drivers, desc=sort.startswith("-"))
    assert forward[-1]["next_cursor"] is None
    backward = walk(client, tenant, forward[-1]["prev_page_url"], key="prev_page_url")
    assert [[d["uuid"] for d in p["data"]] for p in backward] == [
        [d["uuid"] for d in p["data"]] for p in reversed(forward[:-1])
    ]
    assert backward[-1]["prev_cursor"] is None


def test_inserts_between_requests_do_not_disturb_the_walk(client, tenant, drivers):
    page = client.get(
        tenant.url("/drivers"), params={"per_page": 10, "sort": "last_name"}, headers=tenant.headers
    ).json()
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
        base64.urlsafe_b64encode(base64.urlsafe_b64decode(body + "==").replace(b"10", b"20")).rstrip(b"=").decode()
        + "."
        + mac
    )
    for bad in ["garbage", "", "a.b.c", forged, cursor[:-2], "%%%"]:
        response = client.get(tenant.url("/drivers"), params={"cursor": bad}, headers=tenant.headers)
        if bad == "":
            assert response.status_code == 200
            continue
        assert response.status_code == 422, bad
        assert response.json()["message"] == {"cursor": ["The cursor is invalid."]}
    other_sort = client.get(
        tenant.url("/drivers"), params={"cursor": cursor, "sort": "-number"}, headers=tenant.headers
    )
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
