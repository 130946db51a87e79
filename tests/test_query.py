"""services.list_query: each kind of filter the spec declares narrows a list as documented; sorts become ordering keys."""

import datetime

import peewee
import pytest

from foundation.exceptions import ValidationFailed
from models.risk_data import Driver, Vehicle
from models.tenancy import Risk
from models.webhooks import Webhook, pack_events
from services.list_query import ListSpec, moment


def drivers_spec() -> ListSpec:
    """The list spec of GET .../drivers."""
    return ListSpec("listDrivers", Driver)


def add(profile, **values) -> Driver:
    """Store a driver numbered after the profile's last one."""
    return Driver.create(risk=profile.id, number=Driver.next_number(profile.id), **values)


def matching(profile, **filters) -> list[int]:
    """Return the numbers of the profile's drivers that the filters keep, in order."""
    query = Driver.select().where(Driver.risk == profile.id)
    return sorted(driver.number for driver in drivers_spec().apply(query, profile.id, filters))


def test_a_text_filter_is_a_case_insensitive_contains(profile):
    """A text filter keeps the rows whose column contains the value, whatever the case."""
    add(profile, first_name="Ada")
    add(profile, first_name="adam")
    add(profile, first_name="Bob")
    add(profile, first_name=None)
    assert matching(profile, first_name="AD") == [1, 2]
    assert matching(profile, first_name="b") == [3]
    assert matching(profile, first_name="zz") == []


def test_like_wildcards_in_a_text_filter_match_only_themselves(profile):
    """`%`, `_` and `\\` in a filter value are literal characters, not LIKE's wildcards."""
    add(profile, last_name="50%")
    add(profile, last_name="5000")
    add(profile, last_name="a_b")
    add(profile, last_name="axb")
    add(profile, last_name="c\\d")
    add(profile, last_name="cd")
    assert matching(profile, last_name="%") == [1]
    assert matching(profile, last_name="_") == [3]
    assert matching(profile, last_name="\\") == [5]


def test_search_looks_in_every_column_it_names(profile):
    """filter[search] matches first or last names (its x-search), and nothing else."""
    add(profile, first_name="Lee", last_name="Smith")
    add(profile, first_name="Sam", last_name="Lee")
    add(profile, first_name="Sam", last_name="Ortiz", notes="Lee")
    assert matching(profile, search="lee") == [1, 2]


def test_an_integer_filter_takes_a_list_meaning_any_of_them(profile):
    """`filter[year_licensed]=2001,2003` keeps either year."""
    for year in (2001, 2002, 2003, None):
        add(profile, year_licensed=year)
    assert matching(profile, year_licensed="2001,2003") == [1, 3]
    assert matching(profile, year_licensed="2002") == [2]


def test_an_enum_filter_is_exact(profile):
    """An enum filter matches whole values, not parts of them."""
    add(profile, license_state="TX")
    add(profile, license_state="CA")
    assert matching(profile, license_state="TX,NY") == [1]
    assert matching(profile, license_state="T") == []


@pytest.mark.parametrize(("value", "expected"), [("true", [1]), ("1", [1]), ("false", [2]), ("0", [2])])
def test_a_boolean_filter_reads_true_false_one_and_zero(profile, value, expected):
    """`true`/`1` keep true rows, `false`/`0` false ones; nulls match neither."""
    add(profile, is_employee=True)
    add(profile, is_employee=False)
    add(profile, is_employee=None)
    assert matching(profile, is_employee=value) == expected


def test_the_uuid_filter_takes_a_list_in_any_case(profile):
    """filter[uuid] keeps the listed objects, upper-case UUIDs included."""
    one, _, three = add(profile), add(profile), add(profile)
    assert matching(profile, uuid=f"{str(one.uuid).upper()},{three.uuid}") == [1, 3]


def test_a_reference_filter_takes_uuids_or_numbers_of_the_profile_only(profile):
    """filter[vehicle] names vehicles by UUID or number, in this risk profile alone."""
    first = Vehicle.create(risk=profile.id, number=1)
    second = Vehicle.create(risk=profile.id, number=2)
    add(profile, vehicle=first.id)
    add(profile, vehicle=second.id)
    add(profile, vehicle=None)
    other = Risk.create(agency=profile.agency_id, type="personal", name="Other")
    elsewhere = Vehicle.create(risk=other.id, number=7)
    assert matching(profile, vehicle=str(first.uuid).upper()) == [1]
    assert matching(profile, vehicle="2") == [2]
    assert matching(profile, vehicle=f"{first.uuid},2") == [1, 2]
    assert matching(profile, vehicle=f"{elsewhere.uuid},7") == []


def test_a_date_range_is_inclusive_and_either_bound_may_be_empty(profile):
    """`FROM,TO` keeps dates between both bounds inclusive; `FROM,` and `,TO` are open on one side."""
    for day in ("2024-01-01", "2024-01-15", "2024-01-31", "2024-02-01"):
        add(profile, license_expiration=datetime.date.fromisoformat(day))
    add(profile, license_expiration=None)
    assert matching(profile, license_expiration="2024-01-15,2024-01-31") == [2, 3]
    assert matching(profile, license_expiration="2024-01-31,") == [3, 4]
    assert matching(profile, license_expiration=",2024-01-01") == [1]
    assert matching(profile, license_expiration=",") == [1, 2, 3, 4, 5]


def test_an_upper_date_bound_of_a_timestamp_covers_its_whole_day(profile):
    """`,2024-03-01` on a timestamp keeps the last microsecond of March 1st and not midnight after it."""
    add(profile, created=datetime.datetime(2024, 3, 1, 0, 0))
    add(profile, created=datetime.datetime(2024, 3, 1, 23, 59, 59, 999999))
    add(profile, created=datetime.datetime(2024, 3, 2, 0, 0))
    assert matching(profile, created=",2024-03-01") == [1, 2]
    assert matching(profile, created="2024-03-01,2024-03-01") == [1, 2]
    assert matching(profile, created="2024-03-02,") == [3]


def test_a_timestamp_bound_with_an_offset_is_compared_in_utc(profile):
    """Bounds with an offset mean that instant: 02:00+02:00 is midnight UTC; a timestamp bound is inclusive."""
    add(profile, created=datetime.datetime(2024, 3, 1, 0, 0))
    add(profile, created=datetime.datetime(2024, 3, 1, 1, 0))
    assert matching(profile, created="2024-03-01T02:00:00+02:00,") == [1, 2]
    assert matching(profile, created="2024-03-01T02:30:00+02:00,") == [2]
    assert matching(profile, created=",2024-03-01T00:00:00Z") == [1]
    assert matching(profile, created=",2024-03-01 01:00:00") == [1, 2]


def test_filters_combine_with_and(profile):
    """Two filters keep only the rows both keep."""
    add(profile, first_name="Ada", license_state="TX")
    add(profile, first_name="Ada", license_state="CA")
    add(profile, first_name="Bob", license_state="TX")
    assert matching(profile, first_name="ada", license_state="TX") == [1]


def test_an_impossible_date_fails_with_the_filter_named(profile):
    """A bound that is no date raises ValidationFailed naming each bad filter, in Laravel's words."""
    with pytest.raises(ValidationFailed) as failed:
        matching(profile, license_expiration="2024-02-30,", created=",2024-13-01", first_name="x")
    assert failed.value.errors == {
        "filter[license_expiration]": [
            "The filter[license_expiration] field must be a valid date range. "
            "Allowed formats are `FROM,TO`, each empty or one of `YYYY-MM-DD`."
        ],
        "filter[created]": [
            "The filter[created] field must be a valid date range. Allowed formats are `FROM,TO`, "
            "each empty or one of `YYYY-MM-DD, YYYY-MM-DDTHH:MM:SS+HH:MM, YYYY-MM-DDTHH:MM:SSZ`."
        ],
    }


def test_webhook_filters_is_disabled_and_any_of_events(profile):
    """On webhooks, `is_disabled=false` keeps active ones (`true` all) and `events` matches any named event."""
    spec = ListSpec("listWebhooks", Webhook)

    def hook(events, disabled=None):
        return Webhook.create(
            agency=profile.agency_id,
            type="custom",
            url="https://hooks.example.com/",
            events=pack_events(events),
            secret="s",
            disabled=disabled,
        )

    active = hook(["driver.created", "driver.updated"])
    disabled = hook(["vehicle.created"], disabled=datetime.datetime(2024, 1, 1))
    other = hook(["driver.updated"])

    def kept(**filters):
        query = Webhook.select().where(Webhook.agency == profile.agency_id)
        return {row.id for row in spec.apply(query, profile.id, filters)}

    assert kept(is_disabled="false") == kept(is_disabled="0") == {active.id, other.id}
    assert kept(is_disabled="true") == kept(is_disabled="1") == {active.id, disabled.id, other.id}
    assert kept(events="driver.created,vehicle.created") == {active.id, disabled.id}
    assert kept(events="driver.updated") == {active.id, other.id}
    assert kept(events="driver") == set()  # whole names only


def test_the_default_sort_is_the_number_alone_as_it_is_unique():
    """Without a sort, rows go by number, which needs no tiebreaker within a risk profile."""
    keys = drivers_spec().keys(None)
    assert [(key.field.name, key.desc) for key in keys] == [("number", False)]
    assert [(key.field.name, key.desc) for key in drivers_spec().keys(["-number"])] == [("number", True)]


def test_a_sort_on_a_column_with_ties_ends_with_the_id():
    """A sort on a column that repeats or holds nulls gets the id as tiebreaker; repeated names count once."""
    keys = drivers_spec().keys(["-last_name", "first_name", "last_name"])
    assert [(key.field.name, key.desc) for key in keys] == [("last_name", True), ("first_name", False), ("id", False)]


def test_the_signature_tells_orderings_apart():
    """Cursors of one ordering are not valid for another: the default and its explicit form are the same one."""
    spec = drivers_spec()
    assert spec.signature_of(None) == spec.signature_of(["number"])
    assert spec.signature_of(["number"]) != spec.signature_of(["-number"])
    assert spec.signature_of(["number"]) != ListSpec("listVehicles", Vehicle).signature_of(["number"])


def test_moment_parses_dates_and_timestamps_for_their_column():
    """moment() gives a date for a date column and naive UTC for a timestamp one; an upper date is the next midnight."""
    assert moment("2024-02-29", Driver.license_expiration, True) == datetime.date(2024, 2, 29)
    assert moment("2024-02-29", Driver.created, False) == datetime.datetime(2024, 2, 29)
    assert moment("2024-02-29", Driver.created, True) == datetime.datetime(2024, 3, 1)
    assert moment("2024-02-29T10:00:00-05:00", Driver.created, False) == datetime.datetime(2024, 2, 29, 15)
    with pytest.raises(ValueError):
        moment("2023-02-29", Driver.created, False)


def test_moment_clamps_bounds_past_the_ends_of_time():
    """Bounds that would leave datetime's range clamp to its ends instead of failing."""
    assert moment("9999-12-31", Driver.created, True) == datetime.datetime.max
    assert moment("9999-12-31T23:00:00-05:00", Driver.created, False) == datetime.datetime.max
    assert moment("0001-01-01T00:00:00+05:00", Driver.created, True) == datetime.datetime.min
    # Year 0000 (the spec's patterns take it) is before anything stored, as a date and as a timestamp.
    assert moment("0000-02-29", Driver.license_expiration, True) == datetime.date.min
    assert moment("0000-12-31T23:00:00-05:00", Driver.created, False) == datetime.datetime.min


def test_a_field_name_is_the_model_column():
    """field() returns the model's column of a filter or sort name."""
    assert isinstance(drivers_spec().field("license_expiration"), peewee.DateField)
    assert drivers_spec().field("vehicle") is Driver.vehicle
