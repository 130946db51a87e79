"""Errors and security: JSON bodies for every failure, authentication, tenancy, limits."""

import pytest

from toolkit.tenants import items


def test_missing_and_bad_tokens_are_401(client, tenant):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}):
        response = client.get(tenant.url("/drivers"), headers=headers)
        assert response.status_code == 401
        assert response.json()["status"] == 401 and isinstance(response.json()["message"], str)


def test_other_agencys_risk_is_404_like_a_missing_one(client, tenant, other_tenant):
    for risk in (other_tenant.risk, "00000000-0000-4000-8000-000000000000", "not-a-uuid"):
        response = client.get(f"/risks/{risk}/data/drivers", headers=tenant.headers)
        assert response.status_code == 404
        assert response.json() == {"message": "Risk profile not found.", "status": 404}
        posted = client.post(f"/risks/{risk}/data/drivers", json=items("driver", {}), headers=tenant.headers)
        assert posted.status_code == 404


def test_a_malformed_authorization_header_is_shown_the_form(client, tenant):
    """Another scheme, no scheme, no token, a space in it, or not a token of the issued form: a 401 showing `Bearer rk_...`."""
    text = "Unauthenticated: The Authorization header must be `Bearer rk_...` (Bearer, a space, the token)."
    for header in (
        f"Token {tenant.token}",
        tenant.token,
        "Bearer",
        "Basic abc",
        f"Bearer {tenant.token[:8]} {tenant.token[8:]}",
        "Bearer nope",
        f"Bearer {tenant.agency.uuid}",
    ):
        response = client.get(tenant.url("/drivers"), headers={"Authorization": header})
        assert (response.status_code, response.json()) == (401, {"message": text, "status": 401}), header
        assert response.headers["WWW-Authenticate"] == "Bearer"
    unknown = client.get(tenant.url("/drivers"), headers={"Authorization": "Bearer rk_" + "x" * 43})
    assert unknown.json() == {"message": "Unauthenticated: Provided token is not valid.", "status": 401}
    for header in (f"Bearer {tenant.token}", f"bearer {tenant.token}", f"Bearer  {tenant.token}"):
        assert client.get(tenant.url("/drivers"), headers={"Authorization": header}).status_code == 200, header


def test_unknown_route_and_method(client, tenant):
    assert client.get("/nope", headers=tenant.headers).json() == {"message": "Not found.", "status": 404}
    response = client.put(tenant.url("/drivers"), json={}, headers=tenant.headers)
    assert response.status_code == 405
    text = "The method is not allowed for this URL. Allowed methods are `GET, POST`."
    assert response.json() == {"message": text, "status": 405}
    assert response.headers["Allow"] == "GET, POST"


def test_a_405_names_the_allowed_methods_in_its_body(client, tenant):
    """Whichever layer refuses the method (Connexion's routing or ours), the body names what the Allow header does."""
    for method, path in (
        ("OPTIONS", tenant.url("/drivers")),
        ("GET", tenant.url()),
        ("PUT", "/webhooks"),
        ("DELETE", "/openapi.json"),
    ):
        response = client.request(method, path, headers=tenant.headers)
        assert response.status_code == 405, (method, path, response.text)
        allowed = response.headers["Allow"]
        assert allowed and response.json() == {
            "message": f"The method is not allowed for this URL. Allowed methods are `{allowed}`.",
            "status": 405,
        }, (method, path)


def test_non_json_body_is_415(client, tenant):
    response = client.post(
        tenant.url("/drivers"),
        content=b"a=b",
        headers={**tenant.headers, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 415
    assert response.json()["status"] == 415


@pytest.mark.parametrize("raw", [b"{", b"\xff\xfe{}", b'{"data": "\\ud800"}', b"[1, 2"])
def test_malformed_json_is_400(client, tenant, raw):
    response = client.post(tenant.url("/drivers"), content=raw, headers={**tenant.headers, "Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["status"] == 400


def test_empty_and_wrong_shaped_bodies_are_422(client, tenant):
    h = {**tenant.headers, "Content-Type": "application/json"}
    assert client.post(tenant.url("/drivers"), content=b"", headers=h).json()["message"] == {
        "data": ["The data field is required."]
    }
    assert client.post(tenant.url("/drivers"), json={"data": []}, headers=h).json()["message"] == {
        "data": ["The data field must have at least 1 items."]
    }
    assert client.post(tenant.url("/drivers"), json=[1], headers=h).json()["message"] == {
        "body": ["The request body must be a JSON object."]
    }
    too_many = items("driver", *[{}] * 1001)
    assert client.post(tenant.url("/drivers"), json=too_many, headers=h).json()["message"] == {
        "data": ["The data field must not have more than 1000 items."]
    }


def test_body_over_the_limit_is_413(client, tenant, settings):
    response = client.post(
        tenant.url("/drivers"),
        content=b" " * (settings.max_body_bytes + 1),
        headers={**tenant.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["status"] == 413


def test_huge_integers_and_nul_bytes_are_422_not_500(client, tenant):
    response = client.post(
        tenant.url("/drivers"),
        json=items("driver", {"number": 10**30, "first_name": "a\x00b", "year_licensed": -1}),
        headers=tenant.headers,
    )
    assert response.status_code == 422
    assert response.json()["message"] == {
        "data.0.data.number": [
            "The data.0.data.number field must be an integer.",
            "The data.0.data.number field must be between 1 and 2147483647.",
        ],
        "data.0.data.first_name": ["The data.0.data.first_name field format is invalid."],
        "data.0.data.year_licensed": ["The data.0.data.year_licensed field must be between 1900 and 2100."],
    }
    search = client.get(tenant.url("/drivers"), params={"filter[search]": "\x00"}, headers=tenant.headers)
    assert search.status_code == 422


def test_laravel_wording(client, tenant):
    body = items("driver", {"date_of_birth": "2023-02-30", "is_employee": "yes", "image": "not a url", "employee_number": 1.5})
    response = client.post(tenant.url("/drivers"), json=body, headers=tenant.headers)
    assert response.json()["message"] == {
        "data.0.data.date_of_birth": [
            "The data.0.data.date_of_birth field must be a valid date. Allowed formats are `YYYY-MM-DD, MM/DD/YYYY`."
        ],
        "data.0.data.is_employee": ["The data.0.data.is_employee field must be true or false."],
        "data.0.data.image": [
            "The data.0.data.image field must be a valid URL.",
            "The data.0.data.image field format is invalid.",
        ],
        "data.0.data.employee_number": ["The data.0.data.employee_number field must be an integer."],
    }
    unknown = client.post(tenant.url("/drivers"), json=items("driver", {"shoe_size": 9}), headers=tenant.headers)
    assert unknown.json()["message"] == {"data.0.data.shoe_size": ["The data.0.data.shoe_size field is prohibited."]}


def test_unrouted_requests_never_reach_flask(client, tenant):
    odd = client.post(f"/risks/{tenant.risk}%0A/data/drivers", json=items("driver", {}), headers=tenant.headers)
    assert odd.status_code == 404 and odd.json() == {"message": "Not found.", "status": 404}
    options = client.options(tenant.url("/drivers"), headers=tenant.headers)
    assert options.status_code == 405 and options.headers["Allow"] == "GET, POST"
    assert client.options(tenant.url(), headers=tenant.headers).headers["Allow"] == "DELETE, PATCH, POST"
    assert client.delete("/openapi.json").headers["Allow"] == "GET"
