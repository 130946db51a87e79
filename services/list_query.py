"""Filters, sorts and includes of a list operation, read from its parameters in the spec."""

import dataclasses
import datetime
import functools
import operator
import threading
from collections.abc import Callable
from typing import Any, TypeVar, overload

import cachetools
import peewee

import models
import spec
from foundation.exceptions import ValidationFailed
from foundation.messages import listing, message
from models.prepared import condition as written_condition
from models.risk_data import InRisk
from models.webhooks import Delivery, Webhook, shares_channel
from services.pagination import Key
from services.render import Model

Listed = TypeVar("Listed", bound=peewee.Model)


@dataclasses.dataclass(frozen=True)
class ListRequest:
    """What a list request asks beyond its named parameters, handed to its handler as `list_request`.

    Its filters (`filter[<name>]`: one parameter each in the spec, too many to name in a signature), and the query as
    sent and the URL without it, which the page's links repeat. api.request_validation makes it.
    """

    operation: str  # the handler's dotted name (handlers.risk_data.list_drivers): a list's cursors are signed for it alone
    filters: dict[str, str]  # {name: value} of the `filter[<name>]` parameters given; of repeats the last
    query: list[tuple[str, str]]
    url: str


def _contains(field: peewee.ColumnBase, text: str) -> peewee.Expression:
    """Case-insensitive "contains", with LIKE's wildcards taken literally."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    pattern = peewee.NodeList((peewee.Value(f"%{escaped}%"), peewee.SQL("ESCAPE '\\'")))
    return peewee.Expression(peewee.fn.LOWER(field), peewee.OP.ILIKE, pattern)


@overload
def moment(text: str, field: peewee.DateTimeField, upper: bool) -> datetime.datetime: ...


@overload
def moment(text: str, field: peewee.Field, upper: bool) -> datetime.date: ...


def moment(text: str, field: peewee.Field, upper: bool) -> datetime.date:
    """Parse a range bound for a date or timestamp column; an upper date bound covers its whole day.

    A bound past the ends of Python's datetime (9999-12-31 plus a day, or an offset that crosses
    year 1 or 9999) is clamped to that end: it still means "no earlier" or "no later" than anything stored.
    So is year 0000, which the spec's pattern takes (ISO 8601's year before year 1) and Python has not.
    """
    if text.startswith("0000-"):
        return datetime.datetime.min if isinstance(field, peewee.DateTimeField) else datetime.date.min
    if isinstance(field, peewee.DateTimeField):
        if len(text) == 10:
            day = datetime.datetime.combine(datetime.date.fromisoformat(text), datetime.time())
            if upper:
                return day + datetime.timedelta(days=1) if day.date() < datetime.date.max else datetime.datetime.max
            return day
        value = datetime.datetime.fromisoformat(text.replace(" ", "T", 1))
        if value.tzinfo is not None:
            try:
                value = value.astimezone(datetime.UTC).replace(tzinfo=None)
            except OverflowError:
                # A negative offset pushes past 9999, a positive one before year 1.
                offset = value.utcoffset()  # never None here: value has a tzinfo
                return datetime.datetime.max if offset is not None and offset < datetime.timedelta(0) else datetime.datetime.min
        return value
    return datetime.date.fromisoformat(text)


# The filter sets and sorts a list keeps what it made of (ListSpec.written, ListSpec.keys). A client paging through a
# list, or polling one, sends the same set again and again: Peewee wrote its condition each time (about 5 % of the
# API's CPU in bench.soak, whose reads are all filtered). A set or sort asked again after its eviction is made again.
KEPT = 1024


class ListSpec:
    """What one list operation can filter, sort and include, as its spec declares."""

    def __init__(self, operation_id: str, model: Model) -> None:
        self.model = model
        self.filters = spec.filters(operation_id)
        sort_schema = spec.parameter(operation_id, "sort")["schema"]
        self.sorts = {name.lstrip("-") for name in sort_schema["items"]["enum"]}
        self.default_sort = list(sort_schema["default"])
        self.signature = operation_id
        # LRUCache is not thread-safe: even a lookup reorders it.
        self._kept: cachetools.LRUCache[tuple, Any] = cachetools.LRUCache(maxsize=KEPT)
        self._lock = threading.Lock()

    def _recall(self, key: tuple, make: Callable[[], Any]) -> Any:
        with self._lock:
            hit = self._kept.get(key)
        if hit is None:
            hit = (make(),)  # a 1-tuple: a value of None is kept too
            with self._lock:
                self._kept[key] = hit
        return hit[0]

    def field(self, name: str) -> peewee.Field:
        """Return the model column behind a filter or sort name."""
        return self.model._meta.fields[name]

    def only(self, kind: type[Listed]) -> type[Listed]:
        """Return the listed model as the one kind the spec gives a filter to; any other is a spec error."""
        if not issubclass(self.model, kind):
            raise TypeError(f"{self.signature}: this filter belongs to a list of {kind.__name__}")
        return self.model

    def keys(self, sort: list | None) -> list[Key]:
        """Return the ordering keys of a sort, ended by the unique id."""
        names = tuple(sort or self.default_sort)
        return list(self._recall(("keys", names), lambda: self._keys(names)))

    def _keys(self, names: tuple[str, ...]) -> tuple[Key, ...]:
        keys: list[Key] = []
        seen: set[str] = set()
        for name in names:
            bare = name.lstrip("-")
            if bare not in seen:
                seen.add(bare)
                keys.append(Key(self.field(bare), name.startswith("-")))
        if not self._unique(keys[-1].field):
            keys.append(Key(self.model.id, False))
        return tuple(keys)

    def _unique(self, field: peewee.Field) -> bool:
        """Tell whether a column is already a total order within a risk profile (no tiebreaker needed)."""
        if field.null:
            return False
        if field.unique or field is self.model._meta.primary_key:
            return True
        # Meta's (columns, unique) pairs; an index added as a ModelIndex (a partial one) orders nothing here.
        pairs = [index for index in self.model._meta.indexes if isinstance(index, tuple)]
        return any(unique and set(names) == {"risk", field.name} for names, unique in pairs)

    def signature_of(self, sort: list | None) -> str:
        """Name the ordering so a cursor cannot be replayed on another one."""
        return self.signature + ":" + ",".join(sort or self.default_sort)

    def apply(self, query: "peewee.ModelSelect[Any]", risk_id: int, filters: dict) -> "peewee.ModelSelect[Any]":
        """Return the query narrowed by every filter."""
        where = self.condition(risk_id, filters)
        return query if where is None else query.where(where)

    def condition(self, risk_id: int, filters: dict) -> peewee.ColumnBase | None:
        """Return the condition of every filter together (None: no filter); raise ValidationFailed for a bad value."""
        errors: dict[str, list[str]] = {}
        clauses = []
        for name, value in filters.items():
            definition = self.filters[name]
            try:
                clauses.append(self._clause(name, definition, value, risk_id))
            except ValueError:
                formats = listing(definition.get("x-formats", ()))
                errors[f"filter[{name}]"] = [message("date_range", f"filter[{name}]", formats=formats)]
        if errors:
            raise ValidationFailed(errors)
        return functools.reduce(operator.and_, clauses) if clauses else None

    def written(self, risk_id: int, filters: dict) -> tuple[str, list] | None:
        """Return the condition of every filter written for a written text's HOLE (models.prepared.condition), or None.

        Raise ValidationFailed for a bad value, as condition does. The text is the same for the same database, risk
        profile and filter values (no filter reads the clock or the data), so each set is written once while kept.
        """
        key = ("written", type(models.db.obj), risk_id, tuple(filters.items()))

        def write() -> tuple[str, list] | None:
            where = self.condition(risk_id, filters)
            return None if where is None else written_condition(self.model, where)

        try:
            hash(key)
        except TypeError:  # a value Connexion passed unparsed (a list): written for this request alone
            return write()
        return self._recall(key, write)

    def _clause(self, name: str, definition: dict, value: str, risk_id: int) -> peewee.ColumnBase:
        """Return the condition of one filter: a text search, the uuid list, or the one of its `x-filter` kind."""
        kind = definition["x-filter"]
        if "x-search" in definition:
            return _any([_contains(self.field(f), value) for f in definition["x-search"]])
        if name == "uuid":
            return self.model.uuid.in_([v.lower() for v in value.split(",")])
        # Any kind without a builder of its own is a range.
        return self._BY_KIND.get(kind, ListSpec._range)(self, name, value, risk_id)

    def _is_disabled(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Narrow to active rows on `false`; `true` includes disabled ones too, so it narrows nothing."""
        # The spec gives this filter to the webhooks list alone.
        return self.only(Webhook).disabled.is_null() if value in {"false", "0"} else peewee.SQL("1 = 1")

    def _any_of(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Match rows naming any of the comma-separated values."""
        # The column stores names as `,a,b,`.
        return _any([_contains(self.field(name), f",{v},") for v in value.split(",") if v])

    def _channel(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Match rows whose packed channels name any of the comma-separated channels, exactly."""
        return shares_channel(self.field("channels"), value.split(","))

    def _text(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Match a case-insensitive substring of the column."""
        return _contains(self.field(name), value)

    def _boolean(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Match the column: `true` or `1` means true, any other value false."""
        return self.field(name) == (value in {"true", "1"})

    def _delivery_status(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Match deliveries showing any of the comma-separated statuses (some are read from more than the column)."""
        # The spec gives this filter to the delivery list alone.
        return self.only(Delivery).status_in(value.split(","))

    def _response_status(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Match deliveries whose last attempt was answered with any of the comma-separated codes or classes."""
        # The spec gives this filter to the delivery list alone.
        return self.only(Delivery).last_response_in(value.split(","))

    def _exact(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Match any of the comma-separated values exactly (in the column `x-field` names, or the filter's own)."""
        field = self.field(self.filters[name].get("x-field", name))
        parts: list[str] | list[int] = value.split(",")
        if isinstance(field, peewee.IntegerField):
            parts = [int(p) for p in parts]
        return field.in_(parts)

    def _reference(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Match rows referring to any of the comma-separated uuids or numbers of the referenced kind."""
        field = self.field(name)
        target = self.only(InRisk).REFERENCES[name]  # the spec gives reference filters to risk data alone
        uuids = [v.lower() for v in value.split(",") if "-" in v]
        numbers = [int(v) for v in value.split(",") if "-" not in v]
        match = target.select(target.id).where((target.risk == risk_id) & (target.uuid.in_(uuids) | target.number.in_(numbers)))
        return field.in_(match)

    def _range(self, name: str, value: str, risk_id: int) -> peewee.ColumnBase:
        """Match `low,high` inclusively (either may be empty); an upper date bound of a timestamp covers its whole day."""
        field = self.field(name)
        low, _, high = value.partition(",")
        clause: peewee.ColumnBase = peewee.SQL("1 = 1")
        if low:
            clause &= field >= moment(low, field, False)
        if high:
            bound = moment(high, field, True)
            clause &= (field < bound) if isinstance(field, peewee.DateTimeField) and len(high) == 10 else (field <= bound)
        return clause

    # The builders of each `x-filter` kind, all called as (self, name, value, risk_id).
    _BY_KIND = {
        "is_disabled": _is_disabled,
        "any-of": _any_of,
        "channel": _channel,
        "contains": _text,
        "boolean": _boolean,
        "exact": _exact,
        "reference": _reference,
        "delivery-status": _delivery_status,
        "response-status": _response_status,
    }


def _any(clauses: list[peewee.ColumnBase]) -> peewee.ColumnBase:
    result = clauses[0]
    for clause in clauses[1:]:
        result |= clause
    return result


class WithChildren:
    """A list page whose rows (dicts) are read with their children (children(ids) -> {id: [...]}) in one snapshot.

    One snapshot: a child written between the two reads would show beside its parent's state from before it.
    Only these two reads: a write the request makes (the cursor key's first use) stays out of it, and SQLite's
    writers are not held.
    """

    def __init__(self, children: Callable[[list[int]], dict[int, list[dict]]], render_row: Callable[[dict, list[dict]], dict]):
        self.children = children
        self.render_row = render_row
        self.found: dict[int, list[dict]] = {}

    def fetch(self, query: Any) -> list[dict]:
        """Read the page's rows and their children as of one moment."""
        with models.snapshot():
            page = list(query)
            self.found.update(self.children([row["id"] for row in page]))
        return page

    def render(self, page: list[dict]) -> list[dict]:
        """Render each row of the page with its children."""
        return [self.render_row(row, self.found[row["id"]]) for row in page]
