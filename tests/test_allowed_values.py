"""Errors that say what would have been accepted: fixed choices, date formats, the profile's type, content codings."""

import gzip
import re
import uuid

import orjson

import spec
from foundation.messages import MAX_LISTED, listing
from tests.support import make_tenant, make_webhook, webhook_items
from toolkit.tenants import items

JSON = {"Content-Type": "application/json"}


def errors_of(response) -> dict:
    """Return a 422's errors, after checking that its shape is the documented one."""
    assert response.status_code == 422, response.text
    body = response.json()
    assert set(body) == {"message", "errors", "status", "validation"}
    assert body["message"] == body["errors"] and body["status"] == 422 and body["validation"] is True
    return body["message"]


def test_a_fixed_choice_lists_every_allowed_value(client, tenant):
    data = {"sex": "M", "marital_status": "wed"}
    errors = errors_of(client.post(tenant.url("/drivers"), json=items("driver", data), headers=tenant.headers))
    assert errors == {
        "data.0.data.sex": ["The selected data.0.data.sex is invalid. Allowed values are `male, female, non_binary, unknown`."],
        "data.0.data.marital_status": [
            "The selected data.0.data.marital_status is invalid. "
            "Allowed values are `single, married, divorced, widowed, separated, domestic_partner`."
        ],
    }


def test_an_object_kind_lists_the_kinds_the_operation_takes(client, tenant):
    created = client.post(tenant.url("/drivers"), json=items("drivr", {}), headers=tenant.headers)
    assert errors_of(created) == {"data.0.object": ["The selected data.0.object is invalid. Allowed values are `driver`."]}
    updated = client.patch(
        tenant.url(), json={"data": [{"object": "drivr", "uuid": str(uuid.uuid4()), "data": {}}]}, headers=tenant.headers
    )
    assert errors_of(updated)["data.0.object"] == [
        "The selected data.0.object is invalid. Allowed values are `driver, address, vehicle, premise, building`."
    ]


def test_an_event_name_lists_the_events(client, tenant):
    body = webhook_items({"type": "custom", "url": "https://hooks.example.com/in", "events": ["driver.create"]})
    errors = errors_of(client.post("/webhooks", json=body, headers=tenant.headers))
    names = spec.schema("EventName")["enum"]
    assert len(names) <= MAX_LISTED and "driver.created" in names
    assert errors == {
        "data.0.data.events.0": [f"The selected data.0.data.events.0 is invalid. Allowed values are `{', '.join(names)}`."]
    }


def test_more_than_twenty_values_list_the_first_twenty_and_count_the_rest(client, tenant):
    states = spec.schema("StateCode")["enum"]
    assert len(states) > MAX_LISTED
    response = client.post(tenant.url("/drivers"), json=items("driver", {"license_state": "XX"}), headers=tenant.headers)
    assert errors_of(response) == {
        "data.0.data.license_state": [
            "The selected data.0.data.license_state is invalid. Allowed values are "
            f"`AL, AK, AZ, AR, CA, CO, CT, DE, DC, FL, GA, HI, ID, IL, IN, IA, KS, KY, LA, ME` and {len(states) - 20} more."
        ]
    }


def test_listing_shows_twenty_values_whole_and_counts_past_them():
    assert listing(range(20)) == f"`{', '.join(str(n) for n in range(20))}`"
    assert listing(range(21)) == f"`{', '.join(str(n) for n in range(20))}` and 1 more"
    assert listing([None, True, "a"]) == "`null, true, a`"


def test_a_date_error_names_the_formats_it_takes(client, tenant):
    data = {"date_of_birth": "1990-02-30", "hire_date": "31.01.2020"}
    errors = errors_of(client.post(tenant.url("/drivers"), json=items("driver", data), headers=tenant.headers))
    formats = "Allowed formats are `YYYY-MM-DD, MM/DD/YYYY`."
    assert errors == {
        "data.0.data.date_of_birth": [f"The data.0.data.date_of_birth field must be a valid date. {formats}"],
        "data.0.data.hire_date": [f"The data.0.data.hire_date field must be a valid date. {formats}"],
    }
    accepted = client.post(tenant.url("/drivers"), json=items("driver", {"hire_date": "01/31/2020"}), headers=tenant.headers)
    assert accepted.status_code == 201 and accepted.json()["data"][0]["data"]["hire_date"] == "2020-01-31"


def test_a_profile_type_that_does_not_match_names_the_risk_profiles_type(client):
    personal = make_tenant("personal")
    for sent in ("commercial", "bogus"):
        body = items("driver", {}, profile_type=sent)
        errors = errors_of(client.post(personal.url("/drivers"), json=body, headers=personal.headers))
        text = "The selected data.0.profile_type is invalid. Allowed values are `personal` (the risk profile's type)."
        assert errors == {"data.0.profile_type": [text]}, sent


def test_a_query_parameters_fixed_choice_lists_its_values(client, tenant):
    response = client.get(tenant.url("/drivers"), params={"filter[is_employee]": "yes"}, headers=tenant.headers)
    assert errors_of(response) == {
        "filter[is_employee]": ["The selected filter[is_employee] is invalid. Allowed values are `true, false, 1, 0`."]
    }


def test_a_dry_run_names_the_allowed_values_too(client, tenant):
    headers = {**tenant.headers, "Precognition": "true"}
    response = client.post(tenant.url("/drivers"), json=items("driver", {"sex": "F"}), headers=headers)
    assert response.headers["Precognition-Success"] == "false"
    assert errors_of(response)["data.0.data.sex"] == [
        "The selected data.0.data.sex is invalid. Allowed values are `male, female, non_binary, unknown`."
    ]


def test_a_compressed_body_answers_415_naming_the_encodings_taken(client, tenant):
    body = orjson.dumps(items("driver", {"first_name": "Ann"}))
    for encoding in ("gzip", "br", "identity, gzip"):
        content = gzip.compress(body) if encoding == "gzip" else body
        headers = {**tenant.headers, **JSON, "Content-Encoding": encoding}
        response = client.post(tenant.url("/drivers"), content=content, headers=headers)
        assert response.status_code == 415, (encoding, response.text)
        offending = encoding.split(", ")[-1]
        text = f"The request body's Content-Encoding `{offending}` is not supported. Allowed encodings are `identity`."
        assert response.json() == {"message": text, "status": 415}
        assert response.headers["Accept-Encoding"] == "identity"
    plain = client.post(tenant.url("/drivers"), content=body, headers={**tenant.headers, **JSON, "Content-Encoding": "identity"})
    assert plain.status_code == 201, plain.text
    listed = client.get(tenant.url("/drivers"), headers={**tenant.headers, "Content-Encoding": "gzip"})
    assert listed.status_code == 200  # no body, nothing to decode


def test_a_date_range_filter_names_its_formats(client, tenant):
    response = client.get(tenant.url("/drivers"), params={"filter[license_expiration]": "01/31/2024,"}, headers=tenant.headers)
    assert errors_of(response) == {
        "filter[license_expiration]": [
            "The filter[license_expiration] field must be a valid date range. "
            "Allowed formats are `FROM,TO`, each empty or one of `YYYY-MM-DD`."
        ]
    }


def test_an_enum_filter_refuses_a_value_outside_the_fields_enum_naming_it(client, tenant):
    """`filter[sex]=M` is a 422 listing the sexes, as the body's field is: never a 200 with an empty list."""
    sexes = "The selected filter[sex] is invalid. Allowed values are `male, female, non_binary, unknown`."
    statuses = "Allowed values are `single, married, divorced, widowed, separated, domestic_partner`."
    states = spec.schema("StateCode")["enum"]
    state_text = f"Allowed values are `{', '.join(states[:MAX_LISTED])}` and {len(states) - MAX_LISTED} more."
    for name, value, text in (
        ("sex", "M", sexes),
        ("sex", "male,M", sexes),  # one value outside the choice is enough
        ("marital_status", "wed", f"The selected filter[marital_status] is invalid. {statuses}"),
        ("license_state", "Texas", f"The selected filter[license_state] is invalid. {state_text}"),
        ("license_state", "tx", f"The selected filter[license_state] is invalid. {state_text}"),  # exact, as stored
    ):
        response = client.get(tenant.url("/drivers"), params={f"filter[{name}]": value}, headers=tenant.headers)
        assert errors_of(response) == {f"filter[{name}]": [text]}, value
    premises = client.get(tenant.url("/premises"), params={"filter[state]": "Texas"}, headers=tenant.headers)
    assert errors_of(premises) == {"filter[state]": [f"The selected filter[state] is invalid. {state_text}"]}


def test_enum_filters_with_values_of_the_choice_still_filter(client, tenant):
    drivers = [
        {"first_name": "Ann", "sex": "female", "marital_status": "married", "license_state": "TX"},
        {"first_name": "Bob", "sex": "male", "marital_status": "single", "license_state": "CA"},
        {"first_name": "Cy", "sex": None, "license_state": "NY"},
    ]
    assert client.post(tenant.url("/drivers"), json=items("driver", *drivers), headers=tenant.headers).status_code == 201

    def names(**params) -> list[str]:
        response = client.get(tenant.url("/drivers"), params={**params, "sort": "number"}, headers=tenant.headers)
        assert response.status_code == 200, response.text
        return [driver["data"]["first_name"] for driver in response.json()["data"]]

    assert names(**{"filter[sex]": "female"}) == ["Ann"]
    assert names(**{"filter[sex]": "male,non_binary"}) == ["Bob"]
    assert names(**{"filter[marital_status]": "married,single"}) == ["Ann", "Bob"]
    assert names(**{"filter[license_state]": "TX,NY"}) == ["Ann", "Cy"]
    assert names(**{"filter[license_state]": "AP"}) == []  # in the choice, matching no driver
    premise = items("premise", {"city": "Austin", "state": "TX"}, {"city": "Fresno", "state": "CA"})
    assert client.post(tenant.url("/premises"), json=premise, headers=tenant.headers).status_code == 201
    found = client.get(tenant.url("/premises"), params={"filter[state]": "CA"}, headers=tenant.headers)
    assert [p["data"]["city"] for p in found.json()["data"]] == ["Fresno"]


def test_the_risk_type_filter_lists_the_types(client, tenant):
    wrong = client.get("/risks", params={"filter[type]": "comercial"}, headers=tenant.headers)
    text = "The selected filter[type] is invalid. Allowed values are `commercial, personal`."
    assert errors_of(wrong) == {"filter[type]": [text]}
    right = client.get("/risks", params={"filter[type]": "commercial"}, headers=tenant.headers)
    assert right.status_code == 200 and [risk["uuid"] for risk in right.json()["data"]] == [tenant.risk]
    assert client.get("/risks", params={"filter[type]": "personal"}, headers=tenant.headers).json()["data"] == []


def test_the_response_status_filter_names_its_form(client, tenant):
    hook = make_webhook(client, tenant)
    deliveries = f"/webhooks/{hook['uuid']}/deliveries"
    text = (
        "The filter[response_status] field format is invalid. Allowed form: HTTP status codes or classes, "
        "comma-separated (a code like `500`, a class like `5xx`)."
    )
    for value in ("server", "6xx", "50", "500,"):
        response = client.get(deliveries, params={"filter[response_status]": value}, headers=tenant.headers)
        assert errors_of(response) == {"filter[response_status]": [text]}, value
    accepted = client.get(deliveries, params={"filter[response_status]": "5xx,429"}, headers=tenant.headers)
    assert accepted.status_code == 200 and accepted.json()["data"] == []


def _list_operations() -> list[tuple[str, str, list[str]]]:
    """Return (operationId, path, filter names) of every operation with `filter[...]` parameters."""
    found = []
    for path, item in spec.resolved()["paths"].items():
        for method, op in item.items():
            if method == "get" and isinstance(op, dict) and spec.filters(op["operationId"]):
                found.append((op["operationId"], path, list(spec.filters(op["operationId"]))))
    return found


def test_every_filter_given_a_value_of_no_form_names_what_it_takes(client, tenant):
    """Each filter of each list, sent a value no filter takes, answers 422 naming its values, forms or formats."""
    hook = make_webhook(client, tenant)
    values = {"risk": tenant.risk, "webhook": hook["uuid"]}
    operations = _list_operations()
    assert {op for op, _path, _names in operations} >= {"listRisks", "listDrivers", "listDeliveries", "listWebhooks"}
    for op_id, path, names in operations:
        url = path.format(**values)
        for name in names:
            response = client.get(url, params={f"filter[{name}]": "~\x00~"}, headers=tenant.headers)
            (text,) = errors_of(response)[f"filter[{name}]"]
            assert " Allowed " in text and not text.endswith("field format is invalid."), (op_id, name, text)
            schema = spec.filters(op_id)[name]
            if "x-form" in schema:
                assert text.endswith(f"Allowed form: {schema['x-form']}."), (op_id, name, text)
            if "x-choices" in schema:
                assert listing(spec.schema(schema["x-choices"])["enum"]) in text, (op_id, name, text)


def test_a_choice_filters_pattern_takes_exactly_its_enum():
    """The pattern (what clients and the fuzzer see) and the enum named by `x-choices` (what a 422 lists) agree."""
    checked = 0
    for op_id, _path, names in _list_operations():
        for name in names:
            schema = spec.filters(op_id)[name]
            if "x-choices" not in schema:
                continue
            pattern, choices = re.compile(schema["pattern"]), spec.schema(schema["x-choices"])["enum"]
            assert all(pattern.search(value) for value in choices), (op_id, name)
            assert pattern.search(",".join(choices)), (op_id, name)
            alternatives = re.match(r"^\^\((.*?)\)\(,", schema["pattern"]).group(1).replace("\\.", ".").split("|")
            assert sorted(alternatives) == sorted(choices), (op_id, name)
            checked += 1
    assert checked >= 9
