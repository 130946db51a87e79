"""Nullable references: one form in the spec, read the same way by the app as by strict readers.

A nullable reference is `oneOf: [{$ref: X}, {$ref: NullValue}]` (NullValue: `type: string`,
`nullable: true`, `enum: [null]`). `nullable` stands only beside `type`, so the linters, ajv,
Connexion's response validator and the app's own request validator agree: null is accepted, an
X is accepted, anything else is refused with X's own message.
"""

import pytest

import spec

NULL_REF = {"$ref": "#/components/schemas/NullValue"}


def nodes(node, path=""):
    """Yield (path, dict) for every mapping of the spec as written."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from nodes(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from nodes(value, f"{path}/{index}")


def test_nullable_stands_only_beside_type():
    loose = [path for path, node in nodes(spec.raw()) if node.get("nullable") and "type" not in node]
    assert loose == []


def test_every_nullable_reference_has_the_one_form():
    refs = [node["oneOf"] for _path, node in nodes(spec.raw()) if NULL_REF in node.get("oneOf", [])]
    assert len(refs) >= 30
    assert all(len(branches) == 2 and "$ref" in branches[0] for branches in refs)
    assert spec.schema("NullValue") == {**spec.schema("NullValue"), "type": "string", "nullable": True, "enum": [None]}


def driver(**data) -> dict:
    return {"data": [{"object": "driver", "data": {"first_name": "Ada", **data}}]}


def test_null_and_a_value_are_accepted_and_answered(client, tenant):
    created = client.post(
        f"/risks/{tenant.risk}/data/drivers", json=driver(last_name=None, sex="female", vehicle=None), headers=tenant.headers
    )
    assert created.status_code == 201, created.text
    item = created.json()["data"][0]
    assert item["data"]["last_name"] is None and item["data"]["sex"] == "female"
    # Response validation is on in the test suite: a null address and an address object both pass it.
    uuid = item["uuid"]
    listed = client.get(f"/risks/{tenant.risk}/data/drivers?include=address", headers=tenant.headers)
    assert listed.status_code == 200, listed.text
    assert listed.json()["data"][0]["relations"]["address"] is None
    address = {"data": {"address": "12 Oak Lane", "city": "Austin", "state": "TX", "zip": "78702"}}
    body = {"data": [{"object": "driver", "uuid": uuid, "data": {"address": address, "sex": None}}]}
    updated = client.patch(f"/risks/{tenant.risk}/data", json=body, headers=tenant.headers)
    assert updated.status_code == 200, updated.text
    listed = client.get(f"/risks/{tenant.risk}/data/drivers?include=address", headers=tenant.headers)
    got = listed.json()["data"][0]
    assert got["relations"]["address"]["data"]["city"] == "Austin" and got["data"]["sex"] is None
    cleared = {"data": [{"object": "driver", "uuid": uuid, "data": {"address": None}}]}
    assert client.patch(f"/risks/{tenant.risk}/data", json=cleared, headers=tenant.headers).status_code == 200
    listed = client.get(f"/risks/{tenant.risk}/data/drivers?include=address", headers=tenant.headers)
    assert listed.json()["data"][0]["relations"]["address"] is None


@pytest.mark.parametrize(
    "field,value,text",
    [
        ("last_name", 5, "The data.0.data.last_name field must be a string."),
        ("last_name", {}, "The data.0.data.last_name field must be a string."),
        (
            "date_of_birth",
            "2020-02-30",
            "The data.0.data.date_of_birth field must be a valid date. Allowed formats are `YYYY-MM-DD, MM/DD/YYYY`.",
        ),
        ("sex", "bogus", "The selected data.0.data.sex is invalid. Allowed values are `male, female, non_binary, unknown`."),
        (
            "sex",
            [],
            "The data.0.data.sex field must be a string."
            "|The selected data.0.data.sex is invalid. Allowed values are `male, female, non_binary, unknown`.",
        ),
        ("vehicle", "nope", "The selected data.0.data.vehicle is invalid."),
        ("number", 0, "The data.0.data.number field must be between 1 and 2147483647."),
    ],
)
def test_anything_else_is_refused_with_the_references_message(client, tenant, field, value, text):
    response = client.post(f"/risks/{tenant.risk}/data/drivers", json=driver(**{field: value}), headers=tenant.headers)
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == {f"data.0.data.{field}": text.split("|")}
