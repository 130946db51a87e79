"""Hostile input beyond what the schema says: range edges, overflowing dates, nesting, missing types."""

import pytest

from toolkit.tenants import items

TOP = 2147483647


def test_auto_numbers_past_the_top_answer_422_not_500(client, tenant):
    url = tenant.url("/drivers")
    assert client.post(url, json=items("driver", {"number": TOP}), headers=tenant.headers).status_code == 201
    response = client.post(url, json=items("driver", {}), headers=tenant.headers)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["data.0.data.number"]
    both = client.post(url, json=items("driver", {"number": 5}, {"number": None}), headers=tenant.headers)
    assert both.status_code == 422 and list(both.json()["errors"]) == ["data.1.data.number"]
    # A free number given explicitly still works.
    assert client.post(url, json=items("driver", {"number": 7}), headers=tenant.headers).status_code == 201


def test_top_number_in_one_request_with_an_auto_numbered_item(client, tenant):
    response = client.post(tenant.url("/vehicles"), json=items("vehicle", {"number": TOP}, {}), headers=tenant.headers)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["data.1.data.number"]
    listed = client.get(tenant.url("/vehicles"), headers=tenant.headers).json()["data"]
    assert listed == []


@pytest.mark.parametrize(
    "value",
    [
        ",9999-12-31",
        "9999-12-31,",
        "0001-01-01T00:00+01:00,",
        "9999-12-31T23:59-01:00,",
        ",9999-12-31T23:59:59-14:00",
        ",0001-01-01T00:00:00+14:00",
        "0001-01-01,9999-12-31",
        # Year 0000: the spec's pattern takes it (ISO 8601's year before year 1), Python's datetime has no such year.
        "0000-02-01,",
        ",0000-02-29",
        "0000-01-01T00:00:00Z,0000-12-31",
    ],
)
def test_overflowing_date_bounds_never_500(client, tenant, value):
    client.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)
    for path in (tenant.url("/drivers"), "/webhooks"):
        for name in ("created", "updated"):
            response = client.get(path, params={f"filter[{name}]": value}, headers=tenant.headers)
            assert response.status_code == 200, (path, name, value, response.text)
    response = client.get(tenant.url("/drivers"), params={"filter[created]": value}, headers=tenant.headers)
    lower, upper = value.split(",")
    # Everything stored lies between year 1 and 9999: only a bound beyond the far end excludes it.
    expected = 0 if lower.startswith("9999") or upper.startswith(("0000", "0001")) else 1
    assert len(response.json()["data"]) == expected


def test_overflowing_date_bounds_on_deliveries(client, tenant):
    from tests.support import make_webhook

    hook = make_webhook(client, tenant)
    for value in (",9999-12-31", "0001-01-01T00:00+01:00,", "9999-12-31T23:59-01:00,"):
        response = client.get(f"/webhooks/{hook['uuid']}/deliveries", params={"filter[created]": value}, headers=tenant.headers)
        assert response.status_code == 200, response.text


def nested(depth: int):
    value: dict = {"leaf": 1}
    for _ in range(depth):
        value = {"x": value}
    return value


def test_nesting_is_bounded_everywhere(client, tenant):
    too_deep = client.post("/events", json={"event": "form.completed", "data": nested(300)}, headers=tenant.headers)
    assert too_deep.status_code == 422
    (path,) = too_deep.json()["errors"]
    assert path.startswith("data.x.x.") and "nested more than 32" in too_deep.json()["errors"][path][0]
    fits = client.post("/events", json={"event": "form.completed", "data": nested(30)}, headers=tenant.headers)
    assert fits.status_code == 202, fits.text
    arrays: list = [1]
    for _ in range(100):
        arrays = [arrays]
    body = items("driver", {"notes": arrays})
    response = client.post(tenant.url("/drivers"), json=body, headers=tenant.headers)
    assert response.status_code == 422
    assert response.json()["status"] == 422


def test_a_body_without_content_type_is_415(client, tenant):
    raw = b'{"data": [{"object": "driver", "data": {}}]}'
    headers = {k: v for k, v in tenant.headers.items()}
    response = client.post(tenant.url("/drivers"), content=raw, headers=headers)
    assert response.status_code == 415
    assert response.json() == {"message": "The request body must be JSON (Content-Type: application/json).", "status": 415}
    # Operations without a body need no Content-Type.
    from tests.support import make_webhook

    hook = make_webhook(client, tenant)
    assert client.post(f"/webhooks/{hook['uuid']}/rotate-secret", headers=tenant.headers).status_code == 200
