"""Drivers: create, list, filters, sorts, search, includes."""

from toolkit.tenants import items


def create(client, tenant, *datas, include=None, expect=201):
    params = {"include": include} if include else {}
    response = client.post(tenant.url("/drivers"), json=items("driver", *datas), headers=tenant.headers, params=params)
    assert response.status_code == expect, response.text
    return response.json()["data"] if expect == 201 else response.json()


def listing(client, tenant, **params):
    response = client.get(tenant.url("/drivers"), params=params, headers=tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()


def test_create_returns_full_envelope_with_normalised_dates(client, tenant):
    [driver] = create(
        client,
        tenant,
        {
            "first_name": "Ann",
            "date_of_birth": "02/03/1990",
            "hire_date": "2020-01-31",
            "is_employee": True,
            "license_state": "CA",
        },
    )
    assert driver["object"] == "driver"
    assert driver["data"]["number"] == 1
    assert driver["data"]["date_of_birth"] == "1990-02-03"
    assert driver["data"]["hire_date"] == "2020-01-31"
    assert driver["data"]["is_employee"] is True
    assert driver["data"]["middle_name"] is None
    assert driver["meta"]["created"].endswith("+00:00")
    assert driver["relations"] == {"address": None, "vehicle": None}


def test_numbers_are_assigned_highest_plus_one(client, tenant):
    created = create(client, tenant, {"number": 5}, {}, {"number": None}, {"number": 7})
    assert [d["data"]["number"] for d in created] == [5, 8, 9, 7]
    assert create(client, tenant, {})[0]["data"]["number"] == 10


def test_duplicate_number_is_refused_and_nothing_is_written(client, tenant):
    create(client, tenant, {"number": 3})
    body = create(client, tenant, {"first_name": "ok"}, {"number": 3}, {"number": 4}, {"number": 4}, expect=422)
    assert body["message"] == {
        "data.1.data.number": ["The data.1.data.number has already been taken."],
        "data.3.data.number": ["The data.3.data.number has already been taken."],
    }
    assert body["errors"] == body["message"] and body["status"] == 422 and body["validation"] is True
    assert len(listing(client, tenant)["data"]) == 1


def test_vehicle_by_uuid_or_number_and_unknown_vehicle(client, tenant, other_tenant):
    vehicle = client.post(tenant.url("/vehicles"), json=items("vehicle", {"make": "Ford"}), headers=tenant.headers).json()[
        "data"
    ][0]
    foreign = client.post(other_tenant.url("/vehicles"), json=items("vehicle", {}), headers=other_tenant.headers).json()["data"][
        0
    ]
    by_uuid, by_number = create(client, tenant, {"vehicle": vehicle["uuid"]}, {"vehicle": vehicle["data"]["number"]})
    assert by_uuid["relations"]["vehicle"] == vehicle["uuid"] == by_number["data"]["vehicle"]
    body = create(client, tenant, {"vehicle": foreign["uuid"]}, {"vehicle": 99}, expect=422)
    assert body["message"] == {
        "data.0.data.vehicle": ["The selected data.0.data.vehicle is invalid."],
        "data.1.data.vehicle": ["The selected data.1.data.vehicle is invalid."],
    }


def test_nested_address_and_include(client, tenant):
    address = {
        "object": "address",
        "data": {"address": "1 Main St", "city": "Austin", "state": "TX", "zip": "78701", "lat": 30.2},
    }
    [driver] = create(client, tenant, {"first_name": "Al", "address": address}, include="address")
    included = driver["relations"]["address"]
    assert included["object"] == "address"
    assert included["data"] == {
        "address": "1 Main St",
        "address2": None,
        "city": "Austin",
        "state": "TX",
        "zip": "78701",
        "county": None,
        "lat": 30.2,
        "lng": None,
    }
    assert listing(client, tenant)["data"][0]["relations"]["address"] is None
    assert listing(client, tenant, include="address")["data"][0]["relations"]["address"]["uuid"] == included["uuid"]


def test_nested_address_errors_use_dotted_paths(client, tenant):
    body = create(
        client,
        tenant,
        {"address": {"object": "address", "data": {"address": "x", "state": "ZZ", "zip": "1"}}},
        expect=422,
    )
    assert body["message"] == {
        "data.0.data.address.data.city": ["The data.0.data.address.data.city field is required."],
        "data.0.data.address.data.state": [
            "The selected data.0.data.address.data.state is invalid. Allowed values are "
            "`AL, AK, AZ, AR, CA, CO, CT, DE, DC, FL, GA, HI, ID, IL, IN, IA, KS, KY, LA, ME` and 42 more."
        ],
        "data.0.data.address.data.zip": ["The data.0.data.address.data.zip field format is invalid."],
    }


def test_profile_type_must_match_the_risk_profile(client, tenant):
    response = client.post(tenant.url("/drivers"), json=items("driver", {}, profile_type="personal"), headers=tenant.headers)
    assert response.status_code == 422
    text = "The selected data.0.profile_type is invalid. Allowed values are `commercial` (the risk profile's type)."
    assert response.json()["message"] == {"data.0.profile_type": [text]}


def test_filters(client, tenant):
    create(
        client,
        tenant,
        {
            "first_name": "Anna",
            "last_name": "Smith",
            "is_employee": True,
            "license_state": "CA",
            "sex": "female",
            "year_licensed": 2001,
            "license_expiration": "2027-05-01",
        },
        {
            "first_name": "Bob",
            "last_name": "Jones",
            "is_employee": False,
            "license_state": "NY",
            "sex": "male",
            "year_licensed": 2005,
            "license_expiration": "2030-01-01",
        },
        {"first_name": "Hannah", "last_name": "Banner", "license_state": "TX", "year_licensed": 2010},
    )

    def names(**params):
        return [d["data"]["first_name"] for d in listing(client, tenant, **params)["data"]]

    assert names(**{"filter[first_name]": "ANN"}) == ["Anna", "Hannah"]
    assert names(**{"filter[search]": "jon"}) == ["Bob"]
    assert names(**{"filter[search]": "an"}) == ["Anna", "Hannah"]
    assert names(**{"filter[is_employee]": "1"}) == ["Anna"]
    assert names(**{"filter[is_employee]": "false"}) == ["Bob"]
    assert names(**{"filter[license_state]": "NY,TX"}) == ["Bob", "Hannah"]
    assert names(**{"filter[year_licensed]": "2001,2010"}) == ["Anna", "Hannah"]
    assert names(**{"filter[license_expiration]": "2027-01-01,"}) == ["Anna", "Bob"]
    assert names(**{"filter[license_expiration]": ",2027-05-01"}) == ["Anna"]
    assert names(**{"filter[number]": "2"}) == ["Bob"]
    assert names(**{"filter[first_name]": "%"}) == []
    assert names(**{"filter[first_name]": "_ob"}) == []


def test_filter_by_uuid_vehicle_and_timestamps(client, tenant):
    vehicle = client.post(tenant.url("/vehicles"), json=items("vehicle", {}), headers=tenant.headers).json()["data"][0]
    a, b, c = create(client, tenant, {"vehicle": vehicle["uuid"]}, {}, {})
    found = listing(client, tenant, **{"filter[uuid]": f"{a['uuid']},{c['uuid'].upper()}"})["data"]
    assert [d["uuid"] for d in found] == [a["uuid"], c["uuid"]]
    assert [d["uuid"] for d in listing(client, tenant, **{"filter[vehicle]": str(vehicle["data"]["number"])})["data"]] == [
        a["uuid"]
    ]
    today = a["meta"]["created"][:10]
    assert len(listing(client, tenant, **{"filter[created]": f"{today},{today}"})["data"]) == 3
    assert listing(client, tenant, **{"filter[created]": "2000-01-01,2000-12-31"})["data"] == []
    assert len(listing(client, tenant, **{"filter[updated]": f"{a['meta']['updated']},"})["data"]) == 3


def test_sorts_with_nulls_first_ascending(client, tenant):
    create(client, tenant, {"last_name": "b"}, {"last_name": None}, {"last_name": "a"}, {"last_name": None})
    ascending = [(d["data"]["last_name"], d["data"]["number"]) for d in listing(client, tenant, sort="last_name")["data"]]
    assert ascending == [(None, 2), (None, 4), ("a", 3), ("b", 1)]
    descending = [(d["data"]["last_name"], d["data"]["number"]) for d in listing(client, tenant, sort="-last_name")["data"]]
    assert descending == [("b", 1), ("a", 3), (None, 2), (None, 4)]
    assert [d["data"]["number"] for d in listing(client, tenant, sort="-number")["data"]] == [4, 3, 2, 1]


def test_unknown_filter_sort_include_name_the_allowed_ones(client, tenant):
    response = client.get(
        tenant.url("/drivers"),
        params={"filter[nope]": "1", "sort": "nope,-number", "include": "vehicle,address"},
        headers=tenant.headers,
    )
    assert response.status_code == 422
    message = response.json()["message"]
    assert message["include"] == ["Requested include(s) `vehicle` are not allowed. Allowed include(s) are `address`."]
    assert message["sort"][0].startswith("Requested sort(s) `nope` is not allowed. Allowed sort(s) are `number, employee_number,")
    assert message["filter"][0].startswith("Requested filter(s) `nope` are not allowed. Allowed filter(s) are `uuid, search,")


def test_bad_filter_values(client, tenant):
    response = client.get(
        tenant.url("/drivers"),
        params={"filter[number]": "x", "filter[is_employee]": "maybe", "filter[created]": "2024-01-01"},
        headers=tenant.headers,
    )
    assert response.status_code == 422
    assert set(response.json()["message"]) == {"filter[number]", "filter[is_employee]", "filter[created]"}


def test_concurrent_creates_get_distinct_numbers(client, tenant, server):
    import concurrent.futures

    import httpx

    def worker(n):
        with httpx.Client(base_url=server.url + "/api/v1", timeout=60) as http:
            response = http.post(
                tenant.url("/drivers"), json=items("driver", *[{"first_name": f"w{n}"}] * 5), headers=tenant.headers
            )
            return response.status_code, [d["data"]["number"] for d in response.json().get("data", [])]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(worker, range(16)))
    assert {status for status, _ in results} == {201}
    numbers = [n for _, batch in results for n in batch]
    assert sorted(numbers) == list(range(1, 81))


def test_filter_values_in_array_form(client, tenant):
    create(client, tenant, {"license_state": "CA"}, {"license_state": "NY"}, {"license_state": "TX"})
    response = client.get(
        tenant.url("/drivers") + "?filter[license_state][]=CA&filter[license_state][]=TX&sort=number", headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    assert [d["data"]["license_state"] for d in response.json()["data"]] == ["CA", "TX"]
