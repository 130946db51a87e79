"""Rules the spec states beyond types: each holds as written, so an outside fuzzer finds none unexplained."""

import re

import spec
from toolkit.tenants import items


def test_every_cursor_the_app_issues_matches_the_documented_pattern(client, tenant):
    pattern = re.compile(spec.resolved()["components"]["parameters"]["Cursor"]["schema"]["pattern"])
    body = items("driver", *[{"first_name": f"P{n}"} for n in range(25)])
    assert client.post(tenant.url("/drivers"), json=body, headers=tenant.headers).status_code == 201
    first = client.get(tenant.url("/drivers"), params={"per_page": 10}, headers=tenant.headers).json()
    second = client.get(tenant.url("/drivers"), params={"per_page": 10, "cursor": first["next_cursor"]}, headers=tenant.headers)
    cursors = [first["next_cursor"], second.json()["next_cursor"], second.json()["prev_cursor"]]
    assert all(isinstance(c, str) and pattern.fullmatch(c) for c in cursors), cursors
    # Malformed (the pattern fails) or forged (the signature fails): the same documented 422.
    # Forged: the payload's first character changed (the signature's last one may carry only padding bits).
    cursor = first["next_cursor"]
    for bad in ["garbage", ("A" if cursor[0] != "A" else "B") + cursor[1:]]:
        answer = client.get(tenant.url("/drivers"), params={"cursor": bad}, headers=tenant.headers)
        assert (answer.status_code, answer.json()["errors"]) == (422, {"cursor": ["The cursor is invalid."]}), bad


def test_a_method_override_that_disagrees_with_the_body_is_the_documented_422(client, tenant):
    body = {"_method": "PATCH", "data": [{"object": "driver", "uuid": "00000000-0000-4000-8000-000000000000", "data": {}}]}
    answer = client.post(tenant.url(), json=body, headers={**tenant.headers, "X-HTTP-Method-Override": "DELETE"})
    assert answer.status_code == 422
    assert answer.json()["errors"]["_method"] == ["The _method field must match the X-HTTP-Method-Override header."]
    described = " ".join(spec.operation("overrideRiskData")[2]["description"].split())
    assert "The _method field must match the X-HTTP-Method-Override header." in described


def test_a_sort_naming_more_fields_than_its_schema_allows_is_refused(client, tenant):
    most = spec.operation("listDrivers")[2]["parameters"]
    (sort,) = [p for p in most if p.get("name") == "sort"]
    limit = sort["schema"]["maxItems"]
    too_many = "&".join(["sort=number"] * (limit + 1))
    answer = client.get(tenant.url("/drivers") + "?" + too_many, headers=tenant.headers)
    assert answer.status_code == 422
    assert answer.json()["errors"] == {"sort": [f"The sort field must not have more than {limit} items."]}
    assert client.get(tenant.url("/drivers") + "?" + "&".join(["sort=number"] * limit), headers=tenant.headers).status_code == 200


def test_a_date_filter_takes_february_29_exactly_in_leap_years(client, tenant):
    pattern = re.compile(spec.resolved()["components"]["schemas"]["DateRangeFilter"]["pattern"])
    for year in (1900, 2000, 2024, 2100, 2400, 3500):
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        assert bool(pattern.fullmatch(f"{year:04d}-02-29,")) == leap, year
        answer = client.get(
            tenant.url("/drivers"), params={"filter[license_expiration]": f"{year}-02-29,"}, headers=tenant.headers
        )
        assert answer.status_code == (200 if leap else 422), (year, answer.text)


def test_a_url_field_is_an_iri_as_its_format_says_and_uri_would_be_ascii_only(client, tenant):
    from services.schema_validation import FORMATS

    assert FORMATS["iri"]("https://\u00d0.example/caf\u00e9") and not FORMATS["uri"]("https://\u00d0.example/caf\u00e9")
    assert FORMATS["uri"]("https://xn--d-sfa.example/caf%C3%A9")
    schemas = spec.resolved()["components"]["schemas"]
    assert schemas["DriverCreateData"]["properties"]["image"]["format"] == schemas["WebhookUrl"]["format"] == "iri"
    taken = client.post(tenant.url("/drivers"), json=items("driver", {"image": "https://\u00d0.example"}), headers=tenant.headers)
    assert taken.status_code == 201, taken.text
    refused = client.post(tenant.url("/drivers"), json=items("driver", {"image": "https://"}), headers=tenant.headers)
    assert refused.status_code == 422 and list(refused.json()["errors"]) == ["data.0.data.image"]


def test_a_recover_until_not_after_since_is_the_rule_the_spec_states(client, tenant):
    until = spec.resolved()["components"]["schemas"]["WebhookRecover"]["properties"]["until"]
    assert until["x-after"] == "since" and "The until field must be a date after since." in " ".join(until["description"].split())


def test_every_query_string_is_bounded_so_a_request_target_fits_the_http_server():
    """A value past its bound answers the service's 422, long before the HTTP server's 65,535-byte limit."""
    unbounded = []
    for path, item in spec.resolved()["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                schema = parameter.get("schema", {})
                if parameter["in"] != "query" or schema.get("type") != "string" or "enum" in schema or "format" in schema:
                    continue
                # A pattern is bounded when nothing repeats without end (escapes and character classes aside).
                pattern = re.sub(r"\[(\\.|[^\]])*\]", "", re.sub(r"\\.", "", schema.get("pattern", "")))
                if "maxLength" not in schema and (not pattern or re.search(r"[*+]|\{\d+,\}", pattern)):
                    unbounded.append(f"{method.upper()} {path} {parameter['name']}")
    assert unbounded == []


def test_a_list_filter_past_its_max_length_is_refused(client, tenant):
    long = ",".join(["7"] * 501)  # 1001 characters
    answer = client.get(tenant.url("/drivers"), params={"filter[number]": long}, headers=tenant.headers)
    assert answer.status_code == 422 and list(answer.json()["errors"]) == ["filter[number]"]
