"""GET /risks: the agency's risk profiles, paginated and filtered like every list, never another agency's."""

import pytest

import models
from models.tenancy import Risk


def add_risks(tenant, *specs: tuple[str, str | None]) -> list[str]:
    """Give the tenant's agency more risk profiles, (type, name) each; return their uuids in creation order."""
    with models.db.connection_context():
        return [str(Risk.create(agency=tenant.agency, type=kind, name=name).uuid) for kind, name in specs]


def listed(client, tenant, **params) -> dict:
    response = client.get("/risks", params=params, headers=tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()


def uuids(page: dict) -> list[str]:
    return [item["uuid"] for item in page["data"]]


def test_each_risk_profile_in_the_envelope_and_never_another_agencys(client, tenant, other_tenant, server):
    mine = [tenant.risk, *add_risks(tenant, ("personal", "Home"), ("commercial", None))]
    page = listed(client, tenant)
    assert uuids(page) == mine  # oldest first
    assert page["path"] == f"{server.url}/api/v1/risks" and page["next_cursor"] is None
    first = page["data"][0]
    assert list(first) == ["object", "uuid", "data", "meta"]
    assert first["object"] == "risk" and first["data"] == {"type": "commercial", "name": "Risk"}
    assert list(first["meta"]) == ["created", "updated"]
    assert page["data"][2]["data"] == {"type": "commercial", "name": None}
    assert uuids(listed(client, other_tenant)) == [other_tenant.risk]
    # Even named by uuid, another agency's profile is not listed.
    assert uuids(listed(client, tenant, **{"filter[uuid]": other_tenant.risk})) == []


def test_filter_by_type_name_and_uuid(client, tenant):
    home, fleet = add_risks(tenant, ("personal", "Home"), ("commercial", "Fleet"))
    assert uuids(listed(client, tenant, **{"filter[type]": "personal"})) == [home]
    assert uuids(listed(client, tenant, **{"filter[type]": "commercial"})) == [tenant.risk, fleet]
    assert uuids(listed(client, tenant, **{"filter[type]": "personal,commercial"})) == [tenant.risk, home, fleet]
    assert uuids(listed(client, tenant, **{"filter[search]": "FLE"})) == [fleet]
    assert uuids(listed(client, tenant, **{"filter[uuid]": f"{home.upper()},{fleet}"})) == [home, fleet]
    assert uuids(listed(client, tenant, sort="-name")) == [tenant.risk, home, fleet]


def test_pages_walk_forward_and_back_with_signed_cursors(client, tenant):
    every = [tenant.risk, *add_risks(tenant, *[("commercial", f"R{n:02}") for n in range(24)])]
    seen, url = [], "/risks?per_page=10"
    while url:
        page = client.get(url, headers=tenant.headers).json()
        seen += uuids(page)
        url = page["next_page_url"]
    assert seen == every
    back = client.get(page["prev_page_url"], headers=tenant.headers).json()
    assert uuids(back) == every[10:20]
    # A cursor of another list (another ordering) is refused, as on every list.
    other = listed(client, tenant, per_page=10, sort="-created")["next_cursor"]
    answer = client.get("/risks", params={"cursor": other}, headers=tenant.headers)
    assert (answer.status_code, answer.json()["errors"]) == (422, {"cursor": ["The cursor is invalid."]})


@pytest.mark.parametrize(
    "params,key",
    [
        ({"filter[type]": "business"}, "filter[type]"),
        ({"filter[kind]": "personal"}, "filter"),  # spatie's "Requested filter(s) `kind` are not allowed."
        ({"sort": "type"}, "sort"),
        ({"per_page": "5"}, "per_page"),
        ({"filter[created]": "yesterday,"}, "filter[created]"),
    ],
)
def test_a_bad_query_is_a_json_422_naming_the_parameter(client, tenant, params, key):
    answer = client.get("/risks", params=params, headers=tenant.headers)
    assert answer.status_code == 422 and answer.headers["content-type"].startswith("application/json")
    assert list(answer.json()["errors"]) == [key]


def test_a_token_is_needed(client):
    answer = client.get("/risks")
    assert answer.status_code == 401 and answer.json()["status"] == 401
