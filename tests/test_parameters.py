"""Query parameters as the spec declares them: nothing unknown ignored, every error reported at once."""

from toolkit.tenants import items


def test_empty_include_names_nothing(client, tenant):
    client.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)
    for kind in ("drivers", "vehicles", "buildings"):
        response = client.get(tenant.url(f"/{kind}"), params={"include": ""}, headers=tenant.headers)
        assert response.status_code == 200, response.text
    created = client.post(tenant.url("/drivers"), params={"include": ""}, json=items("driver", {}), headers=tenant.headers)
    assert created.status_code == 201
    assert created.json()["data"][0]["relations"]["address"] is None


def test_empty_sort_is_refused(client, tenant):
    response = client.get(tenant.url("/premises"), params={"sort": ""}, headers=tenant.headers)
    assert response.status_code == 422 and list(response.json()["errors"]) == ["sort"]


def test_includes_a_list_does_not_allow_are_refused(client, tenant):
    for kind in ("vehicles", "premises"):
        response = client.get(tenant.url(f"/{kind}"), params={"include": "x"}, headers=tenant.headers)
        assert response.status_code == 422
        assert response.json()["errors"]["include"][0].startswith("Requested include(s) `x` are not allowed.")


def test_unknown_query_parameters_are_named(client, tenant):
    response = client.get(tenant.url("/drivers"), params={"perpage": "10"}, headers=tenant.headers)
    assert response.status_code == 422
    assert response.json()["errors"] == {"perpage": ["The perpage field is prohibited."]}


def test_query_and_body_errors_in_one_response(client, tenant):
    body = items("driver", {"number": "x"})
    response = client.post(tenant.url("/drivers"), params={"include": "bogus"}, json=body, headers=tenant.headers)
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert set(errors) == {"include", "data.0.data.number"}
    # A dry-run limited to other fields keeps the parameter error (it is the request's, not a field's).
    only = {**tenant.headers, "Precognition": "true", "Precognition-Validate-Only": "data.0.data.first_name"}
    response = client.post(tenant.url("/drivers"), params={"include": "bogus"}, json=body, headers=only)
    assert response.status_code == 422 and set(response.json()["errors"]) == {"include"}
    assert client.get(tenant.url("/drivers"), headers=tenant.headers).json()["data"] == []
