"""Vehicles, premises and buildings."""

from toolkit.tenants import items


def post(client, tenant, kind, *datas, **params):
    return client.post(
        tenant.url(f"/{kind}"),
        json=items(kind.rstrip("s").replace("premise", "premise"), *datas),
        headers=tenant.headers,
        params=params,
    )


def test_vehicles_and_premises(client, tenant):
    vehicle = client.post(
        tenant.url("/vehicles"),
        json=items("vehicle", {"year": 2020, "make": "Ford", "vin": "1FTFW1E50JFA00001"}),
        headers=tenant.headers,
    )
    assert vehicle.status_code == 201, vehicle.text
    assert vehicle.json()["data"][0]["data"] == {
        "number": 1,
        "year": 2020,
        "make": "Ford",
        "model": None,
        "vin": "1FTFW1E50JFA00001",
    }
    premise = client.post(
        tenant.url("/premises"),
        json=items("premise", {"city": "Austin", "state": "TX", "zip": "78701"}),
        headers=tenant.headers,
    )
    assert premise.status_code == 201, premise.text
    listed = client.get(tenant.url("/premises"), params={"filter[city]": "aus"}, headers=tenant.headers).json()["data"]
    assert [p["data"]["city"] for p in listed] == ["Austin"]


def test_building_needs_a_premise_of_the_same_risk(client, tenant, other_tenant):
    foreign = client.post(other_tenant.url("/premises"), json=items("premise", {}), headers=other_tenant.headers).json()["data"][
        0
    ]
    response = client.post(
        tenant.url("/buildings"),
        json=items("building", {"number": "x"}, {"premise": foreign["uuid"]}, {"premise": "nope"}),
        headers=tenant.headers,
    )
    assert response.status_code == 422
    assert response.json()["message"] == {
        "data.0.data.number": ["The data.0.data.number field must be a number."],
        "data.0.data.premise": ["The data.0.data.premise field is required."],
        "data.1.data.premise": ["The selected data.1.data.premise is invalid."],
        "data.2.data.premise": ["The data.2.data.premise field must be a valid UUID."],
    }


def test_building_include_premise(client, tenant):
    premise = client.post(tenant.url("/premises"), json=items("premise", {"city": "Reno"}), headers=tenant.headers).json()[
        "data"
    ][0]
    created = client.post(
        tenant.url("/buildings"),
        params={"include": "premise"},
        json=items("building", {"premise": premise["uuid"]}, {"premise": premise["uuid"], "number": 9}),
        headers=tenant.headers,
    )
    assert created.status_code == 201, created.text
    first, second = created.json()["data"]
    assert first["data"] == {"number": 10, "premise": premise["uuid"]}
    assert first["relations"]["premise"]["data"]["city"] == "Reno"
    assert second["data"]["number"] == 9
    plain = client.get(tenant.url("/buildings"), headers=tenant.headers).json()["data"]
    assert plain[0]["relations"] == {"premise": premise["uuid"]}
    filtered = client.get(
        tenant.url("/buildings"), params={"filter[premise]": premise["uuid"], "sort": "-number"}, headers=tenant.headers
    ).json()
    assert [b["data"]["number"] for b in filtered["data"]] == [10, 9]
