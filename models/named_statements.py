"""Statements PostgreSQL parses and plans once per connection, as psycopg 3's prepare_threshold and asyncpg's cache do.

psycopg2 sends every statement as text with its values written in, and the server parses, analyses and plans
it each time: 18-20 µs of its CPU of the 63 a primary-key lookup took, on 2026-11-28 (a page's query, whose
rows cost the most, gained nothing). A text one connection has sent REPEAT times is prepared on it
(`PREPARE riskapi_7 AS ...`, its values $1, $2 ...) and from then on sent as `EXECUTE riskapi_7(...)`.

A PREPARE goes out only while its connection has no transaction open (a transaction's first statement, whose
BEGIN is still to go, or a statement outside one), as a message of its own: one the server refuses (a value
whose type only the text told, `%s IS NULL`) aborts nothing, and its text goes as text for good. PREPARE is not
transactional: a rollback keeps it. A text first repeated inside a transaction is prepared at its connection's
next such moment. A statement goes to EXECUTE only with values written as literals whose type the statement
decides, as it decides a parameter's: text, booleans, NULL, moments, and integers an `integer` column takes
(a wider one, a float, a list or JSON goes as text: `int_column = 3000000000` is false as text, an error as a
parameter of the column's type). A connection keeps at most KEPT; the one run longest ago is deallocated.
Each connection has its own (the server's are per session): a pooler in front must pool by session. One gone
stale (STALE) is answered by models.databases.PostgresqlPool: sent again as text outside a transaction, the
transaction retried inside one (riskapi.services.bulk_write), and every statement of the connection forgotten.
"""

import collections
import datetime
import re
from collections.abc import Sequence
from typing import Any

import psycopg2
import psycopg2.extensions

REPEAT = 5  # psycopg 3's prepare_threshold
KEPT = 100  # asyncpg's statement_cache_size
_SEEN = 2_000  # texts counted at most, then counted afresh (a list's filters make many shapes)

_INT32 = range(-(2**31), 2**31)
_PLACEHOLDER = re.compile(r"%s|%%")
IDLE = psycopg2.extensions.TRANSACTION_STATUS_IDLE
_PARAMETER_TYPES = frozenset((str, bool, type(None), datetime.datetime, datetime.date))

# What an EXECUTE meets when its statement went stale: invalid_sql_statement_name (the session lost its statements:
# DISCARD ALL from elsewhere) and feature_not_supported ("cached plan must not change result type": a migration
# added a column to a table a `SELECT t1.*` reads, while this process ran).
STALE = frozenset(("26000", "0A000"))


class Statements:
    """One connection's prepared statements, and how often each other text went out on it."""

    def __init__(self) -> None:
        self.names: collections.OrderedDict[str, str] = collections.OrderedDict()  # run longest ago first
        self.seen: dict[str, int] = {}
        self.due: list[str] = []
        self.refused: set[str] = set()
        self.stale: list[str] = []
        self.made = 0

    def text(self, connection: Any, sql: str, params: Sequence[Any], begins: bool) -> tuple[str, Sequence[Any]]:
        """Return what to send for a statement on this connection: its EXECUTE, or the statement as it is.

        `begins` tells that the statement opens a transaction (its BEGIN still to go): the connection is idle.
        """
        name = self.names.get(sql)
        if name is None and sql not in self.refused and ";" not in sql:
            count = self.seen.get(sql, 0) + 1
            if count < REPEAT:
                if len(self.seen) >= _SEEN:
                    self.seen.clear()
                self.seen[sql] = count
            else:
                self.seen.pop(sql, None)
                self.due.append(sql)
        if (self.due or self.stale) and (begins or connection.get_transaction_status() == IDLE):
            self._prepare(connection)
            name = self.names.get(sql)
        if name is None:
            return sql, params
        for value in params:
            kind = type(value)
            if kind not in _PARAMETER_TYPES and (kind is not int or value not in _INT32):
                return sql, params
        self.names.move_to_end(sql)
        return (f"EXECUTE {name}({', '.join(['%s'] * len(params))})" if params else f"EXECUTE {name}"), params

    def forget(self) -> None:
        """Forget every statement prepared (they went stale); each is deallocated when the connection is next idle,
        and prepared again once repeated."""
        self.stale.extend(self.names.values())
        self.names.clear()

    def _prepare(self, connection: Any) -> None:
        due, self.due = self.due, []
        stale, self.stale = self.stale, []
        with connection.cursor() as cursor:
            for name in stale:
                try:
                    cursor.execute(f"DEALLOCATE {name}")
                except psycopg2.Error:  # gone with the session's others (DISCARD ALL)
                    if connection.closed:
                        return
            for sql in due:
                if sql in self.names:
                    continue
                if len(self.names) >= KEPT:
                    _, oldest = self.names.popitem(last=False)
                    cursor.execute(f"DEALLOCATE {oldest}")
                name = f"riskapi_{self.made}"
                self.made += 1
                try:
                    cursor.execute(f"PREPARE {name} AS {_numbered(sql)}")
                except psycopg2.Error:
                    if connection.closed:  # the statement itself will say what happened
                        return
                    if len(self.refused) >= _SEEN:
                        self.refused.clear()
                    self.refused.add(sql)
                    continue
                self.names[sql] = name


def _numbered(sql: str) -> str:
    """Return a statement's text with its placeholders numbered ($1, $2 ...) and its doubled % single, as sent alone."""
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(0) == "%%":
            return "%"
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, sql)
