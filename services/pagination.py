"""Keyset (cursor) pagination with Laravel's envelope; cursors are opaque and signed."""

import datetime
import functools
import hashlib
import hmac
import operator
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlencode

import cachetools
import itsdangerous
import orjson
import peewee

from foundation.exceptions import ValidationFailed
from foundation.messages import message
from models.prepared import HOLE, Prepared

BAD_CURSOR = {"cursor": [message("bad_cursor", "cursor")]}


class _ShortHMAC(itsdangerous.HMACAlgorithm):
    """HMAC-SHA256 cut to 16 bytes, which keeps cursors short; the keyed state is made once and copied per cursor."""

    def __init__(self, key: bytes) -> None:
        super().__init__(hashlib.sha256)
        self.key = key
        self.keyed = hmac.new(key, digestmod=hashlib.sha256)

    def get_signature(self, key: bytes, value: bytes) -> bytes:
        """Return the first 16 bytes of the HMAC of value."""
        mac = self.keyed.copy() if key == self.key else hmac.new(key, digestmod=hashlib.sha256)
        mac.update(value)
        return mac.digest()[:16]


@functools.lru_cache(maxsize=8)  # one secret per process, asked for on every page
def _signer(secret: bytes) -> itsdangerous.Signer:
    """Return the signer of cursors: the secret itself is the HMAC key, as before itsdangerous signed them."""
    # key_derivation="none" and the 16-byte HMAC keep the format cursors had, so links already handed out stay valid.
    return itsdangerous.Signer(secret, key_derivation="none", algorithm=_ShortHMAC(secret))


class Key:
    """One ordering column: its field, direction and whether it holds nulls."""

    def __init__(self, field: peewee.Field, desc: bool) -> None:
        self.field = field
        self.desc = desc
        self.nullable = field.null

    def order(self, flip: bool, source: Any = None) -> peewee.Ordering:
        """Return the ORDER BY term (on the same column of `source`, a subquery, if given); nulls sort as the smallest
        value on every database."""
        desc = self.desc != flip
        column = self.field if source is None else getattr(source.c, self.field.column_name)
        if not self.nullable:
            return column.desc() if desc else column.asc()
        return column.desc(nulls="LAST") if desc else column.asc(nulls="FIRST")

    def after(self, value: Any, flip: bool) -> peewee.Expression | None:
        """Rows strictly after value in this key's order."""
        col = self.field
        if self.desc != flip:
            if value is None:
                return None
            return (col < value) | col.is_null() if self.nullable else col < value
        if value is None:
            return col.is_null(False)
        return col > value

    def equal(self, value: Any) -> peewee.Expression:
        """Rows equal to value."""
        return self.field.is_null() if value is None else self.field == value

    def bound(self, value: Any, flip: bool) -> peewee.Expression | None:
        """An index-friendly range that contains every row at or after value."""
        col = self.field
        if value is None:
            return None
        if self.desc != flip:
            return (col <= value) | col.is_null() if self.nullable else col <= value
        return col >= value

    def load(self, raw: Any) -> Any:
        """Turn a cursor value back into the column's type, or raise ValueError."""
        if raw is None:
            if not self.nullable:
                raise ValueError("null")
            return None
        field = self.field
        if isinstance(field, peewee.DateTimeField):
            return datetime.datetime.fromisoformat(raw)
        if isinstance(field, peewee.DateField):
            return datetime.date.fromisoformat(raw)
        if isinstance(field, peewee.BooleanField):
            if not isinstance(raw, bool):
                raise ValueError(raw)
            return raw
        if isinstance(field, (peewee.IntegerField, peewee.AutoField)):
            if not isinstance(raw, int) or isinstance(raw, bool) or abs(raw) > 2**53:
                raise ValueError(raw)
            return raw
        if isinstance(field, peewee.UUIDField):
            return uuid.UUID(raw)
        if not isinstance(raw, (str, int, float)):
            raise ValueError(raw)
        return raw


def _dump(value: Any) -> Any:
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


# rows_after(cursor values or None, flip, limit): the page's rows in the order asked (flip: backwards), at most limit.
RowsAfter = Callable[[list | None, bool, int], list]


class Paginator:
    """Fetch one page of a query ordered by keys, in the direction a cursor says."""

    def __init__(self, keys: list[Key], signature: str, secret: bytes) -> None:
        self.keys = keys
        self.signature = signature
        self.signer = _signer(secret)

    def encode(self, row: dict, forward: bool) -> str:
        """Return the cursor pointing after (or before) a row."""
        values = [_dump(row[k.field.name]) for k in self.keys]
        payload = orjson.dumps({"s": self.signature, "v": values, "n": forward})
        # The signature is over the JSON, not its base64 text, as cursors always were.
        return (itsdangerous.base64_encode(payload) + b"." + self.signer.get_signature(payload)).decode()

    def decode(self, cursor: str) -> tuple[list, bool]:
        """Return (values, forward) of a cursor, or raise ValidationFailed."""
        try:
            if not cursor.isascii():  # base64_decode would drop such characters rather than fail
                raise ValueError("not ASCII")
            body, _, mac = cursor.partition(".")
            payload = itsdangerous.base64_decode(body)
            if not self.signer.verify_signature(payload, mac):
                raise ValueError("signature")
            data = orjson.loads(payload)
            if data["s"] != self.signature or len(data["v"]) != len(self.keys):
                raise ValueError("another list")
            values = [key.load(raw) for key, raw in zip(self.keys, data["v"], strict=False)]
            return values, bool(data["n"])
        except (itsdangerous.BadData, ValueError, TypeError, KeyError, AttributeError, orjson.JSONDecodeError):
            raise ValidationFailed(BAD_CURSOR) from None

    def _typed(self, row: dict) -> dict:
        """Return a row's key values as Peewee types them (fetch may give them as the database driver does)."""
        return {k.field.name: k.field.python_value(row[k.field.name]) for k in self.keys}

    def _position(self, values: list, flip: bool) -> peewee.ColumnBase:
        clauses: list[peewee.ColumnBase] = []
        equal: list[peewee.ColumnBase] = []
        for key, value in zip(self.keys, values, strict=False):
            after = key.after(value, flip)
            if after is not None:
                clauses.append(functools.reduce(operator.and_, equal + [after]) if equal else after)
            equal.append(key.equal(value))
        condition = functools.reduce(operator.or_, clauses) if clauses else peewee.SQL("1 = 0")
        bound = self.keys[0].bound(values[0], flip)
        return condition & bound if bound is not None else condition

    def page(
        self, query: "peewee.ModelSelect[Any]", per_page: int, cursor: str | None, fetch: Callable[[Any], list] = list
    ) -> tuple[list, str | None, str | None]:
        """Return (rows, next_cursor, prev_cursor); fetch(query) runs the query (by default through Peewee)."""

        def rows_after(values: list | None, flip: bool, limit: int) -> list:
            ordered = query.where(self._position(values, flip)) if values is not None else query
            return fetch(ordered.order_by(*[k.order(flip) for k in self.keys]).limit(limit))

        return self.page_from(rows_after, per_page, cursor)

    def page_from(self, rows_after: RowsAfter, per_page: int, cursor: str | None) -> tuple[list, str | None, str | None]:
        """Return (rows, next_cursor, prev_cursor) of the rows rows_after(values, flip, limit) reads."""
        values, forward = self.decode(cursor) if cursor else (None, True)
        flip = not forward
        rows = rows_after(values, flip, per_page + 1)
        more = len(rows) > per_page
        rows = rows[:per_page]
        if flip:
            rows.reverse()
        if not rows:
            return rows, None, None
        has_next = more if forward else True
        has_prev = (values is not None) if forward else more
        next_cursor = self.encode(self._typed(rows[-1]), True) if has_next else None
        prev_cursor = self.encode(self._typed(rows[0]), False) if has_prev else None
        return rows, next_cursor, prev_cursor


# The page shapes a list keeps written (PreparedPages).
SHAPES_KEPT = 256


class PreparedPages:
    """A list's page query written once per shape, then run with each page's values (models.prepared).

    Peewee wrote a drivers page's text on every request: 134 µs against the 5 µs of binding its values (2026-11-27).
    A shape is the sort, the direction, which of the cursor's values are null and whether filters narrow the page;
    base(scope) is the list's query of one scope (a risk profile's drivers), and run(text, values) runs a text
    (models.run_as_text, then the rows). Filters take too many shapes to write each once (a list of any length, a
    range open at either end): their condition alone is written with each request, into the text's HOLE.
    """

    def __init__(
        self,
        model: type[peewee.Model],
        base: Callable[[Any], "peewee.ModelSelect[Any]"],
        scope: peewee.Field,
        around: Callable[["peewee.ModelSelect[Any]", Callable[[Any], list]], peewee.Query] | None = None,
    ) -> None:
        self.model, self.base, self.scope, self.around = model, base, scope, around
        # A sort names up to 20 columns in any order and direction: the shapes a caller can ask for are
        # countless, so only the latest are kept (a text written again costs one request Peewee's 134 µs).
        self.written: cachetools.LRUCache[tuple, Prepared] = cachetools.LRUCache(maxsize=SHAPES_KEPT)
        self._lock = threading.Lock()  # LRUCache is not thread-safe: even a lookup reorders it

    def rows_after(
        self, paginator: Paginator, scope_id: Any, hole: tuple[str, list] | None, run: Callable[[str, list], list]
    ) -> RowsAfter:
        """Return the rows_after of Paginator.page_from reading one scope's rows through written texts, narrowed by
        hole, the filters' condition as models.prepared.condition writes it (None: unfiltered)."""
        keys = paginator.keys

        def rows_after(values: list | None, flip: bool, limit: int) -> list:
            nulls = None if values is None else tuple(value is None for value in values)
            shape = (paginator.signature, flip, nulls, hole is not None)
            with self._lock:
                prepared = self.written.get(shape)
                if prepared is None:
                    prepared = self.written[shape] = Prepared(functools.partial(self._build, paginator, *shape[1:]))
            # Each value as Peewee would bind it: through its field's db_value.
            after = [k.field.db_value(v) for k, v in zip(keys, values or (), strict=False) if v is not None]
            return run(*prepared.bound(self.scope.db_value(scope_id), after, limit, hole=hole))

        return rows_after

    def _build(
        self, paginator: Paginator, flip: bool, nulls: tuple | None, filtered: bool, scope: Any, after: list, limit: Any
    ) -> peewee.Query:
        query = self.base(scope)
        if filtered:
            query = query.where(HOLE)
        if nulls is not None:
            slots = iter(after)
            query = query.where(paginator._position([None if null else next(slots) for null in nulls], flip))
        query = query.order_by(*[k.order(flip) for k in paginator.keys]).limit(limit)
        if self.around is None:
            return query
        return self.around(query, lambda page: [k.order(flip, page) for k in paginator.keys])


def envelope(
    items: list, per_page: int, next_cursor: str | None, prev_cursor: str | None, base_url: str, args: Iterable[tuple[str, str]]
) -> dict:
    """Return Laravel's cursor paginator envelope; page URLs repeat every other parameter."""
    kept = [(k, v) for k, v in args if k not in {"cursor", "per_page"}]

    def url(cursor: str | None) -> str | None:
        if cursor is None:
            return None
        return base_url + "?" + urlencode(kept + [("per_page", per_page), ("cursor", cursor)])

    return {
        "data": items,
        "path": base_url,
        "per_page": per_page,
        "next_cursor": next_cursor,
        "next_page_url": url(next_cursor),
        "prev_cursor": prev_cursor,
        "prev_page_url": url(prev_cursor),
    }
