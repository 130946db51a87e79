"""services.risk_data_rules: the database rules of bulk writes (numbers, references, existence, delete order)."""

import peewee
import pytest

from foundation.exceptions import ApiError, ValidationFailed
from foundation.messages import message
from models.risk_data import Address, Building, Driver, Premise, Vehicle
from services import risk_data_rules as bulk
from services import risk_data_writes


def body(kind: str, *datas, **extra) -> dict:
    """A bulk body of one kind of object."""
    return {"data": [{"object": kind, "data": data, **extra} for data in datas]}


def plan_create(model, profile, payload):
    """Plan a create; return (rows, errors)."""
    errors = bulk.Errors()
    return bulk.plan_create(model, profile, payload, errors), dict(errors)


def test_errors_keep_one_of_each_message_and_know_what_is_clean():
    """Errors.add drops repeats; clean(path) is false when the path or anything under it has an error."""
    errors = bulk.Errors()
    errors.add("data.0.uuid", "taken")
    errors.add("data.0.uuid", "taken")
    errors.add("data.1.data.number", "bad")
    assert errors == {"data.0.uuid": ["taken"], "data.1.data.number": ["bad"]}
    assert not errors.clean("data.0.uuid") and not errors.clean("data.1") and not errors.clean("data.1.data")
    assert errors.clean("data.2") and errors.clean("data.1.data.num")


def test_auto_numbers_continue_after_the_highest_stored_and_requested_number(profile):
    """Rows without a number get the next free ones after both the stored maximum and the request's own numbers."""
    Vehicle.create(risk=profile.id, number=3)
    rows, errors = plan_create(Vehicle, profile, body("vehicle", {}, {"number": 10}, {"make": "Ford"}))
    assert errors == {}
    assert [row["number"] for row, _ in rows] == [11, 10, 12]
    assert rows[2][0]["make"] == "Ford" and rows[0][0]["make"] is None and rows[0][0]["risk"] == profile.id
    assert len({row["uuid"] for row, _ in rows}) == 3


def test_numbers_taken_in_the_profile_or_twice_in_the_request_are_errors(profile):
    """A number stored already, or repeated in the request (the repeat), is taken; nothing is planned."""
    Vehicle.create(risk=profile.id, number=2)
    rows, errors = plan_create(Vehicle, profile, body("vehicle", {"number": 2}, {"number": 5}, {"number": 5}))
    assert rows == []
    assert errors == {
        "data.0.data.number": ["The data.0.data.number has already been taken."],
        "data.2.data.number": ["The data.2.data.number has already been taken."],
    }


def test_a_number_of_another_profile_is_free(profile):
    """Numbers are unique per risk profile only."""
    from models.tenancy import Risk

    other = Risk.create(agency=profile.agency_id, type="commercial", name="Other")
    Vehicle.create(risk=other.id, number=1)
    rows, errors = plan_create(Vehicle, profile, body("vehicle", {"number": 1}, {}))
    assert errors == {} and [row["number"] for row, _ in rows] == [1, 2]


def test_no_auto_number_is_left_past_the_maximum(profile):
    """When the profile's numbers reach the spec's maximum, an item without a number cannot be numbered."""
    Vehicle.create(risk=profile.id, number=bulk.MAX_NUMBER)
    rows, errors = plan_create(Vehicle, profile, body("vehicle", {"number": 4}, {}))
    assert rows == []
    assert errors == {"data.1.data.number": [message("no_number_left", "data.1.data.number", max=bulk.MAX_NUMBER)]}


def test_references_resolve_by_uuid_or_number_and_unknown_ones_are_errors(profile):
    """A driver's vehicle may be named by UUID (any case) or number, or be null; one not in the profile is invalid."""
    vehicle = Vehicle.create(risk=profile.id, number=7)
    datas = [{"vehicle": str(vehicle.uuid).upper()}, {"vehicle": 7}, {"vehicle": None}, {}]
    rows, errors = plan_create(Driver, profile, body("driver", *datas))
    assert errors == {}
    assert [row["vehicle"] for row, _ in rows] == [vehicle.id, vehicle.id, None, None]
    unknown = "00000000-0000-4000-8000-000000000000"
    rows, errors = plan_create(Driver, profile, body("driver", {"vehicle": 8}, {"vehicle": unknown}))
    assert rows == []
    assert errors == {
        "data.0.data.vehicle": ["The selected data.0.data.vehicle is invalid."],
        "data.1.data.vehicle": ["The selected data.1.data.vehicle is invalid."],
    }


def test_a_profile_type_other_than_the_profiles_is_invalid(profile):
    """An item's profile_type, when given, must be the risk profile's type."""
    payload = body("vehicle", {}, profile_type="commercial")
    payload["data"].append({"object": "vehicle", "data": {}, "profile_type": "personal"})
    rows, errors = plan_create(Vehicle, profile, payload)
    text = "The selected data.1.profile_type is invalid. Allowed values are `commercial` (the risk profile's type)."
    assert rows == [] and errors == {"data.1.profile_type": [text]}


def test_a_drivers_nested_address_is_planned_beside_it(profile):
    """plan_create returns each driver row with its nested address (None without one); values become columns."""
    address = {"data": {"address": "1 Main St", "city": "Austin", "state": "TX", "zip": "78701"}}
    rows, errors = plan_create(Driver, profile, body("driver", {"address": address, "date_of_birth": "04/12/1990"}, {}))
    assert errors == {}
    assert [nested for _, nested in rows] == [address, None]
    assert str(rows[0][0]["date_of_birth"]) == "1990-04-12"
    assert "address" not in rows[0][0]


def test_insert_stores_planned_rows_and_their_addresses(profile):
    """insert() writes the rows (ids filled in) and a driver's nested address."""
    address = {"data": {"address": "1 Main St", "city": "Austin", "state": "TX", "zip": "78701"}}
    rows, _ = plan_create(Driver, profile, body("driver", {"first_name": "Ada", "address": address}, {"first_name": "Bo"}))
    stored = bulk.insert(Driver, profile, rows)
    assert [row["id"] for row in stored] == [d.id for d in Driver.select().where(Driver.risk == profile.id).order_by(Driver.id)]
    [saved] = Address.select().where(Address.risk == profile.id)
    assert saved.driver_id == stored[0]["id"] and saved.city == "Austin"


def plan_update(profile, payload):
    """Plan an update; return (plan, errors)."""
    errors = bulk.Errors()
    return bulk.plan_update(profile, payload, errors), dict(errors)


def test_an_update_finds_its_objects_and_reports_unknown_and_repeated_ones(profile):
    """Known UUIDs (any case) map to ids in request order; an unknown one is not found, a repeat is a duplicate."""
    one = Vehicle.create(risk=profile.id, number=1)
    two = Driver.create(risk=profile.id, number=1)
    payload = {
        "data": [
            {"object": "driver", "uuid": str(two.uuid), "data": {"first_name": "Ada"}},
            {"object": "vehicle", "uuid": str(one.uuid).upper(), "data": {"make": "Ford"}},
        ]
    }
    plan, errors = plan_update(profile, payload)
    assert errors == {}
    assert [(i, model, object_id) for i, model, object_id, _, _ in plan] == [(0, Driver, two.id), (1, Vehicle, one.id)]
    missing = "00000000-0000-4000-8000-000000000000"
    payload["data"] += [
        {"object": "vehicle", "uuid": str(one.uuid), "data": {}},
        {"object": "vehicle", "uuid": missing, "data": {}},
        {"object": "driver", "uuid": str(one.uuid), "data": {}},  # a vehicle's UUID is no driver's
    ]
    _, errors = plan_update(profile, payload)
    assert errors == {
        "data.2.uuid": ["The data.2.uuid field has a duplicate value."],
        "data.3.uuid": [message("not_found", "data.3.uuid")],
        "data.4.uuid": [message("not_found", "data.4.uuid")],
    }


def test_an_update_may_keep_its_own_number_but_not_take_anothers(profile):
    """Renumbering to the object's own number is fine; to another object's number it is taken."""
    first = Vehicle.create(risk=profile.id, number=1)
    Vehicle.create(risk=profile.id, number=2)
    _, errors = plan_update(profile, body("vehicle", {"number": 1}, uuid=str(first.uuid)))
    assert errors == {}
    _, errors = plan_update(profile, body("vehicle", {"number": 2}, uuid=str(first.uuid)))
    assert errors == {"data.0.data.number": ["The data.0.data.number has already been taken."]}


def test_a_driver_without_an_address_needs_a_complete_one(profile):
    """A nested address for a driver that has none is checked as a full address; one that has an address may be partial."""
    bare = Driver.create(risk=profile.id, number=1)
    housed = Driver.create(risk=profile.id, number=2)
    Address.create(risk=profile.id, driver=housed.id, address="1 Main St", city="Austin", state="TX", zip="78701")
    partial = {"address": {"data": {"city": "Dallas"}}}
    payload = {"data": [{"object": "driver", "uuid": str(d.uuid), "data": partial} for d in (bare, housed)]}
    _, errors = plan_update(profile, payload)
    assert set(errors) == {"data.0.data.address.data.address", "data.0.data.address.data.state", "data.0.data.address.data.zip"}
    assert errors["data.0.data.address.data.zip"] == ["The data.0.data.address.data.zip field is required."]


def plan_delete(profile, items):
    """Plan a delete of (kind, uuid) items; return (plan, errors)."""
    errors = bulk.Errors()
    payload = {"data": [{"object": kind, "uuid": str(value)} for kind, value in items]}
    return bulk.plan_delete(profile, payload, errors), dict(errors)


def test_deletes_run_children_first_and_answer_in_request_order(profile):
    """A premise and its building in one request: the building is deleted first; the answer keeps the request's order."""
    premise = Premise.create(risk=profile.id, number=1)
    building = Building.create(risk=profile.id, number=1, premise=premise.id)
    plan, errors = plan_delete(profile, [("premise", premise.uuid), ("building", building.uuid)])
    assert errors == {}
    assert [model for _, model, _, _ in plan] == [Building, Premise]
    answer = risk_data_writes.apply_delete(profile, plan)
    expected = [("premise", str(premise.uuid)), ("building", str(building.uuid))]
    assert [(item["object"], item["uuid"]) for item in answer] == expected
    assert not Premise.select().where(Premise.id == premise.id).exists()


def test_a_premise_with_buildings_left_cannot_be_deleted(profile):
    """Deleting a premise whose buildings stay is an error on the premise's item."""
    premise = Premise.create(risk=profile.id, number=1)
    Building.create(risk=profile.id, number=1, premise=premise.id)
    _, errors = plan_delete(profile, [("premise", premise.uuid)])
    assert errors == {"data.0.uuid": ["The data.0.uuid cannot be deleted while the premise has buildings."]}


def test_a_delete_of_an_unknown_object_is_not_found(profile):
    """An object of another kind's UUID, or of no object, is not found."""
    vehicle = Vehicle.create(risk=profile.id, number=1)
    _, errors = plan_delete(profile, [("driver", vehicle.uuid), ("vehicle", vehicle.uuid)])
    assert errors == {"data.0.uuid": [message("not_found", "data.0.uuid")]}


def test_fail_if_raises_only_with_errors():
    """fail_if passes no errors and raises ValidationFailed with them otherwise."""
    bulk.fail_if(bulk.Errors())
    errors = bulk.Errors()
    errors.add("data.0.uuid", "gone")
    with pytest.raises(ValidationFailed) as failed:
        bulk.fail_if(errors)
    assert failed.value.errors == {"data.0.uuid": ["gone"]}


def test_transaction_runs_again_after_a_lost_race_and_gives_up_with_409(connection):
    """A unique-number race (IntegrityError) runs the work again; after eight lost races the answer is 409."""
    calls = []

    def lose_twice():
        calls.append(1)
        if len(calls) < 3:
            raise peewee.IntegrityError("taken")
        return "done"

    assert bulk.transaction(lose_twice) == "done" and len(calls) == 3

    def always_lose():
        raise peewee.IntegrityError("taken")

    with pytest.raises(ApiError) as failed:
        bulk.transaction(always_lose)
    assert failed.value.status == 409


def test_transaction_does_not_retry_other_database_errors(connection):
    """An operational error that is no deadlock or serialization failure goes up at once."""
    calls = []

    def broken():
        calls.append(1)
        raise peewee.OperationalError("disk I/O error")

    with pytest.raises(peewee.OperationalError):
        bulk.transaction(broken)
    assert len(calls) == 1
