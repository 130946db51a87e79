"""models.prepared: a query's text written once per shape, each call's values bound in the order the text asks for."""

import pytest

import models
from models.prepared import Prepared, padded
from models.tenancy import Agency


def test_values_are_bound_where_the_text_wants_them_whatever_order_they_were_given_in(connection):
    Agency.create(name="prepared-a", webhook_limit=3)
    Agency.create(name="prepared-b", webhook_limit=7)

    def build(floor, names, label):
        # The text has the select list (label) first, then the where (names, floor): the reverse of the slots' order.
        where = Agency.name.in_(names) & (Agency.webhook_limit > floor)
        return Agency.select(Agency.name, label).where(where).order_by(Agency.id)

    query = Prepared(build)
    assert query.rows(0, ["prepared-a", "prepared-b"], 1) == [("prepared-a", 1), ("prepared-b", 1)]
    assert query.rows(5, ["prepared-b"], 2) == [("prepared-b", 2)]
    assert query.rows(5, ["prepared-a", "prepared-b", "none"], 3) == [("prepared-b", 3)]
    assert len(query.texts) == 3  # one text per length of the list
    assert query.rows(0, ["prepared-a"], 4) == [("prepared-a", 4)] and len(query.texts) == 3


def test_a_query_binding_a_value_of_its_own_is_refused(connection):
    with pytest.raises(ValueError, match="binds only its slots"):
        Prepared(lambda name: Agency.select().where((Agency.name == name) & (Agency.webhook_limit > 3))).rows("x")
    with pytest.raises(ValueError, match="must write each of its slots"):
        Prepared(lambda name, unused: Agency.select().where(Agency.name == name)).rows("x", "y")


def test_a_slot_written_twice_is_bound_at_each_place(connection):
    Agency.create(name="prepared-twice", webhook_limit=4)
    limit = Agency.webhook_limit
    query = Prepared(lambda value: Agency.select(Agency.name).where((limit >= value) & (limit <= value)))
    assert query.rows(4) == [("prepared-twice",)]
    text, values = query.bound(4)
    assert values == [4, 4] and text.count(" /*slot") == 0


def test_a_hole_takes_its_condition_between_the_values_before_and_after_it(connection):
    from models.prepared import HOLE, condition

    Agency.create(name="hole-a", webhook_limit=5)
    Agency.create(name="hole-b", webhook_limit=6)

    def build(floor, limit):
        return Agency.select(Agency.name).where(Agency.webhook_limit >= floor).where(HOLE).order_by(Agency.id).limit(limit)

    query = Prepared(build)
    held = condition(Agency, Agency.name.in_(["hole-a", "hole-b"]) & (Agency.webhook_limit != 5))
    text, values = query.bound(1, 10, hole=held)
    assert values == [1, "hole-a", "hole-b", 5, 10] and "/*" not in text
    assert [row for (row,) in models.db.execute_sql(text, values).fetchall()] == ["hole-b"]
    with pytest.raises(ValueError, match="needs its condition"):
        query.bound(1, 10)
    with pytest.raises(ValueError, match="without a hole"):
        Prepared(lambda name: Agency.select().where(Agency.name == name)).bound("x", hole=held)


def test_an_update_runs_by_its_text_and_says_how_many_rows_it_changed(connection):
    for name in ("changed-a", "changed-b", "changed-c"):
        Agency.create(name=name, webhook_limit=1)
    raise_to = Prepared(lambda limit, names: Agency.update(webhook_limit=limit).where(Agency.name.in_(names)))
    assert raise_to.changed(9, padded(["changed-a", "changed-c", "none"])) == 2  # the padding's NULL matches nothing
    assert raise_to.changed(9, padded(["none"])) == 0
    assert sorted(a.name for a in Agency.select().where(Agency.webhook_limit == 9)) == ["changed-a", "changed-c"]


def test_lists_are_padded_to_a_power_of_two_with_nulls():
    assert [len(padded(list(range(n)))) for n in range(1, 10)] == [1, 2, 4, 4, 8, 8, 8, 8, 16]
    assert padded([5, 6, 7]) == [5, 6, 7, None] and padded([]) == []
