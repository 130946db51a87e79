"""Bulk update and delete of any kind, and POST standing for PATCH or DELETE."""

import pytest

from toolkit.tenants import items


@pytest.fixture
def world(client, tenant):
    """A vehicle, a premise with a building, and two drivers (one with an address)."""
    h = tenant.headers
    vehicle = client.post(tenant.url("/vehicles"), json=items("vehicle", {"make": "Ford"}), headers=h).json()["data"][0]
    premise = client.post(tenant.url("/premises"), json=items("premise", {"city": "Austin"}), headers=h).json()["data"][0]
    building = client.post(tenant.url("/buildings"), json=items("building", {"premise": premise["uuid"]}), headers=h).json()[
        "data"
    ][0]
    address = {"object": "address", "data": {"address": "1 Main", "city": "Austin", "state": "TX", "zip": "78701"}}
    drivers = client.post(
        tenant.url("/drivers"),
        params={"include": "address"},
        json=items("driver", {"first_name": "Ann", "vehicle": vehicle["uuid"], "address": address}, {"first_name": "Bob"}),
        headers=h,
    ).json()["data"]
    return {"vehicle": vehicle, "premise": premise, "building": building, "drivers": drivers}


def get_drivers(client, tenant):
    return client.get(tenant.url("/drivers"), params={"include": "address"}, headers=tenant.headers).json()["data"]


def test_update_mixed_kinds(client, tenant, world):
    ann, bob = world["drivers"]
    body = {
        "data": [
            {
                "object": "driver",
                "uuid": ann["uuid"],
                "data": {"last_name": "Lee", "first_name": None, "vehicle": None},
            },
            {"object": "vehicle", "uuid": world["vehicle"]["uuid"], "data": {"model": "F-150"}},
            {"object": "address", "uuid": ann["relations"]["address"]["uuid"], "data": {"city": "Dallas"}},
            {
                "object": "driver",
                "uuid": bob["uuid"],
                "data": {
                    "vehicle": 1,
                    "address": {"data": {"address": "2 Elm", "city": "Waco", "state": "TX", "zip": "76701"}},
                },
            },
        ]
    }
    response = client.patch(tenant.url(), json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    updated = response.json()["data"]
    assert [(u["object"], u["uuid"], u["profile_type"]) for u in updated] == [
        ("driver", ann["uuid"], "commercial"),
        ("vehicle", world["vehicle"]["uuid"], "commercial"),
        ("address", ann["relations"]["address"]["uuid"], "commercial"),
        ("driver", bob["uuid"], "commercial"),
    ]
    assert "meta" not in updated[0]
    assert updated[0]["data"]["last_name"] == "Lee" and updated[0]["data"]["first_name"] is None
    assert updated[3]["data"]["address"]["data"]["city"] == "Waco"
    ann_now, bob_now = get_drivers(client, tenant)
    assert ann_now["relations"]["vehicle"] is None and ann_now["relations"]["address"]["data"]["city"] == "Dallas"
    assert bob_now["relations"]["vehicle"] == world["vehicle"]["uuid"]
    assert ann_now["meta"]["updated"] > ann["meta"]["updated"]


def test_update_is_atomic_and_reports_every_bad_item(client, tenant, world, other_tenant):
    ann, bob = world["drivers"]
    foreign = client.post(other_tenant.url("/drivers"), json=items("driver", {}), headers=other_tenant.headers).json()["data"][0]
    carl = client.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers).json()["data"][0]
    body = {
        "data": [
            {"object": "driver", "uuid": ann["uuid"], "data": {"first_name": "Changed"}},
            {"object": "driver", "uuid": bob["uuid"], "data": {"number": ann["data"]["number"]}},
            {"object": "driver", "uuid": foreign["uuid"], "data": {"first_name": "x"}},
            {"object": "vehicle", "uuid": world["vehicle"]["uuid"], "data": {}},
            {"object": "building", "uuid": world["building"]["uuid"], "data": {"premise": foreign["uuid"]}},
            {"object": "driver", "uuid": carl["uuid"], "data": {"address": {"data": {"city": "Waco"}}}},
            {"object": "driver", "uuid": ann["uuid"], "data": {"notes": "twice"}},
        ]
    }
    response = client.patch(tenant.url(), json=body, headers=tenant.headers)
    assert response.status_code == 422
    assert response.json()["message"] == {
        "data.1.data.number": ["The data.1.data.number has already been taken."],
        "data.2.uuid": ["The data.2.uuid could not be found in the risk profile."],
        "data.3.data": ["The data.3.data field must have at least 1 items."],
        "data.4.data.premise": ["The selected data.4.data.premise is invalid."],
        "data.5.data.address.data.address": ["The data.5.data.address.data.address field is required."],
        "data.5.data.address.data.state": ["The data.5.data.address.data.state field is required."],
        "data.5.data.address.data.zip": ["The data.5.data.address.data.zip field is required."],
        "data.6.uuid": ["The data.6.uuid field has a duplicate value."],
    }
    assert get_drivers(client, tenant)[0]["data"]["first_name"] == "Ann"


def test_null_address_deletes_it(client, tenant, world):
    ann = world["drivers"][0]
    response = client.patch(
        tenant.url(),
        json={"data": [{"object": "driver", "uuid": ann["uuid"], "data": {"address": None}}]},
        headers=tenant.headers,
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"][0]["data"]["address"] is None
    assert get_drivers(client, tenant)[0]["relations"]["address"] is None


def test_delete_cascades_and_reports(client, tenant, world):
    ann, bob = world["drivers"]
    body = {"data": [{"object": "driver", "uuid": ann["uuid"]}, {"object": "vehicle", "uuid": world["vehicle"]["uuid"]}]}
    response = client.request("DELETE", tenant.url(), json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    assert response.json()["data"] == [
        {"object": "driver", "uuid": ann["uuid"], "profile_type": "commercial"},
        {"object": "vehicle", "uuid": world["vehicle"]["uuid"], "profile_type": "commercial"},
    ]
    remaining = get_drivers(client, tenant)
    assert [d["uuid"] for d in remaining] == [bob["uuid"]]
    gone = client.patch(
        tenant.url(),
        json={"data": [{"object": "address", "uuid": ann["relations"]["address"]["uuid"], "data": {"city": "x"}}]},
        headers=tenant.headers,
    )
    assert gone.json()["message"] == {"data.0.uuid": ["The data.0.uuid could not be found in the risk profile."]}


def test_vehicle_delete_clears_drivers(client, tenant, world):
    body = {"data": [{"object": "vehicle", "uuid": world["vehicle"]["uuid"]}]}
    assert client.request("DELETE", tenant.url(), json=body, headers=tenant.headers).status_code == 200
    assert get_drivers(client, tenant)[0]["data"]["vehicle"] is None


def test_premise_with_buildings_is_refused_unless_they_go_too(client, tenant, world):
    premise = {"object": "premise", "uuid": world["premise"]["uuid"]}
    refused = client.request(
        "DELETE",
        tenant.url(),
        json={"data": [{"object": "driver", "uuid": world["drivers"][1]["uuid"]}, premise]},
        headers=tenant.headers,
    )
    assert refused.status_code == 422
    assert refused.json()["message"] == {"data.1.uuid": ["The data.1.uuid cannot be deleted while the premise has buildings."]}
    assert len(get_drivers(client, tenant)) == 2
    both = {"data": [premise, {"object": "building", "uuid": world["building"]["uuid"]}]}
    assert client.request("DELETE", tenant.url(), json=both, headers=tenant.headers).status_code == 200


def test_delete_unknown_other_risk_or_other_agency(client, tenant, world, other_tenant):
    foreign = client.post(other_tenant.url("/drivers"), json=items("driver", {}), headers=other_tenant.headers).json()["data"][0]
    body = {
        "data": [
            {"object": "driver", "uuid": foreign["uuid"]},
            {"object": "vehicle", "uuid": world["drivers"][0]["uuid"]},
            {"object": "driver", "uuid": "nope"},
        ]
    }
    response = client.request("DELETE", tenant.url(), json=body, headers=tenant.headers)
    assert response.status_code == 422
    assert response.json()["message"] == {
        "data.0.uuid": ["The data.0.uuid could not be found in the risk profile."],
        "data.1.uuid": ["The data.1.uuid could not be found in the risk profile."],
        "data.2.uuid": ["The data.2.uuid field must be a valid UUID."],
    }
    assert client.get(other_tenant.url("/drivers"), headers=other_tenant.headers).json()["data"][0]["uuid"] == foreign["uuid"]


@pytest.mark.parametrize("style", ["header", "body", "both"])
def test_post_stands_for_patch_and_delete(client, tenant, world, style):
    ann, bob = world["drivers"]
    update = {"data": [{"object": "driver", "uuid": ann["uuid"], "data": {"first_name": "Annie"}}]}
    delete = {"data": [{"object": "driver", "uuid": bob["uuid"]}]}
    if style == "header":
        patched = client.post(tenant.url(), json=update, headers={**tenant.headers, "X-HTTP-Method-Override": "PATCH"})
        deleted = client.post(tenant.url(), json=delete, headers={**tenant.headers, "X-HTTP-Method-Override": "DELETE"})
    elif style == "body":
        patched = client.post(tenant.url(), json={**update, "_method": "PATCH"}, headers=tenant.headers)
        deleted = client.post(tenant.url(), json={**delete, "_method": "DELETE"}, headers=tenant.headers)
    else:
        both = {**tenant.headers, "X-HTTP-Method-Override": "PATCH"}
        patched = client.post(tenant.url(), json={**update, "_method": "patch"}, headers=both)
        both = {**tenant.headers, "X-HTTP-Method-Override": "DELETE"}
        deleted = client.post(tenant.url(), json={**delete, "_method": "DELETE"}, headers=both)
    assert patched.status_code == 200, patched.text
    assert deleted.status_code == 200, deleted.text
    assert [d["data"]["first_name"] for d in get_drivers(client, tenant)] == ["Annie"]


def test_post_without_method_is_refused(client, tenant):
    response = client.post(tenant.url(), json={"data": [{"object": "driver", "uuid": "x"}]}, headers=tenant.headers)
    assert response.status_code == 422
    assert "_method" in response.json()["message"]


def test_override_header_and_body_must_agree(client, tenant, world):
    ann, _ = world["drivers"]
    update = {"data": [{"object": "driver", "uuid": ann["uuid"], "data": {"first_name": "Annie"}}], "_method": "DELETE"}
    response = client.post(tenant.url(), json=update, headers={**tenant.headers, "X-HTTP-Method-Override": "PATCH"})
    assert response.status_code == 422
    assert response.json()["message"] == {"_method": ["The _method field must match the X-HTTP-Method-Override header."]}
    invalid = {**tenant.headers, "X-HTTP-Method-Override": "PUT"}
    response = client.post(tenant.url(), json={**update, "_method": "PATCH"}, headers=invalid)
    assert response.status_code == 422
    assert list(response.json()["message"]) == ["X-HTTP-Method-Override"]
    assert [d["data"]["first_name"] for d in get_drivers(client, tenant)][0] != "Annie"
