"""Peewee models, bound late to the database named by DATABASE_URL: the database, its connections and the base models."""

import contextlib
import contextvars
import datetime
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import peewee
import psycopg2.extensions
from playhouse.db_url import connect as url_connect
from playhouse.db_url import parse as url_parse

from models import breaker
from models.databases import SILENCE, PostgresqlPool, SqliteDatabase

db = peewee.DatabaseProxy()

# PostgreSQL's date (OID 1082) and timestamp (1114) read as text, for a read that only writes them out again
# (models.read_as_text); psycopg2 keeps the server's DateStyle ISO, the form SQLite's text has too.
_TIMES_AS_TEXT = psycopg2.extensions.new_type((1082, 1114), "TIMES_AS_TEXT", lambda value, cursor: value)


def utcnow() -> datetime.datetime:
    """Return the current UTC time, naive, as stored in the database."""
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def timestamp(value: datetime.datetime) -> str:
    """Format a stored UTC time as ISO 8601 with a +00:00 suffix, as every answer and event shows it."""
    if value.tzinfo is None:  # as stored: the suffix is all replace(tzinfo=UTC) would add, without a new datetime
        return value.isoformat() + "+00:00"
    return value.replace(tzinfo=datetime.UTC).isoformat()


def bind(database_url: str) -> peewee.Database:
    """Open the database named by a URL and bind every model to it."""
    if database_url.startswith("sqlite"):
        pragmas = {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 10000, "synchronous": "normal"}
        if database_url.startswith("sqlite://"):
            database = SqliteDatabase(**url_parse(database_url), pragmas=pragmas, check_same_thread=False)
        else:  # Peewee's other SQLite schemes (sqliteext://, ...)
            database = url_connect(database_url, pragmas=pragmas, check_same_thread=False)
    else:
        pool = {"max_connections": 32, "stale_timeout": 300, "autorollback": True}
        scheme, _, rest = database_url.partition("://")
        if scheme in {"postgresql", "postgres", "postgresql+pool"}:
            database = PostgresqlPool(**{**SILENCE, **url_parse("postgresql://" + rest)}, **pool)
        else:  # Peewee's other schemes, as they are
            database = url_connect(database_url, **pool)
    db.initialize(database)
    return database


def ensure_connection() -> None:
    """Open this thread's connection, replacing a pooled PostgreSQL one the server has dropped.

    A pooled connection can be cut while idle (a restart, `pg_terminate_backend`, a failover) and
    only says so when used. One round trip up front lets a request find a live connection instead
    of failing on its first query. Raises peewee.OperationalError when the database does not answer,
    at once while PostgreSQL is known away (models.breaker).
    """
    if is_sqlite():
        db.connect(reuse_if_open=True)
        return
    if isinstance(db.obj, PostgresqlPool):
        db.obj.breaker.check()
    began = time.monotonic()
    try:
        _check_out_live()
    except (peewee.OperationalError, peewee.InterfaceError):
        connection_failed(time.monotonic() - began)
        raise


def _check_out_live() -> None:
    if db.is_closed():
        # A check-out: the pool checks the connection first (PostgresqlPool._is_closed) and replaces a
        # dropped one, so a ping here would only cost a round trip.
        db.connect()
        return
    pool = db.obj
    if isinstance(pool, PostgresqlPool) and getattr(pool.held, "connection", None) is db.connection():
        # Kept from this thread's last request (keep_connection): checked as a check-out would check it.
        if not pool.sound(pool.held.connection):
            discard_connection()
            db.connect()
        return
    began = time.monotonic()
    try:
        db.execute_sql("SELECT 1")
    except (peewee.OperationalError, peewee.InterfaceError):
        discard_connection()
        if time.monotonic() - began >= breaker.SLOW:
            raise  # the server went silent, not away and back: a new connection would wait as long again
        db.connect()


# A handler thread keeps its pooled connection from one request to the next (riskapi.api.app): a check-out and a
# return cost a request more CPU than its page's queries (the pool's lock, heap and condition, Peewee's state). It
# gives the connection back now and then, so that the pool's stale_timeout still renews it.
HELD_FOR = 60.0


def keep_connection() -> None:
    """Keep this thread's open connection for its next request; give it back to the pool once held HELD_FOR seconds."""
    pool = db.obj
    if not isinstance(pool, PostgresqlPool):
        db.close()
        return
    held, connection, now = pool.held, db.connection(), time.monotonic()
    if getattr(held, "connection", None) is not connection:
        held.connection, held.since = connection, now
    elif now - held.since > HELD_FOR:
        held.connection = None
        db.close()


def connection_failed(took: float) -> None:
    """Tell the database's breaker (models.breaker) that a connection failed after `took` seconds."""
    if isinstance(db.obj, PostgresqlPool):
        db.obj.breaker.failed(took)


@contextlib.contextmanager
def live_connection() -> Iterator[None]:
    """Hold a live connection for a block; a broken one is discarded afterwards, not pooled."""
    ensure_connection()
    try:
        yield
    except (peewee.OperationalError, peewee.InterfaceError):
        discard_connection()
        raise
    finally:
        if not db.is_closed():
            db.close()


def discard_connection() -> None:
    """Close this thread's connection without returning it to the pool (it may be broken)."""
    if db.is_closed():
        return
    try:
        if hasattr(db.obj, "manual_close"):
            db.obj.manual_close()
        else:
            db.close()
    except peewee.PeeweeException:
        pass


def is_sqlite() -> bool:
    """Tell whether the bound database is SQLite."""
    return isinstance(db.obj, peewee.SqliteDatabase)


_Selecting = TypeVar("_Selecting", bound=peewee.Select)


def read_as_text(query: peewee.Query) -> Any:
    """Run a query and return its cursor, whose dates and times are the text the database sends (a DB-API cursor).

    For a read whose values are only written out again (riskapi.services.render.fetch): no datetime is made
    to be turned back into text. SQLite's driver gives that text already; on PostgreSQL the cursor reads
    them so, and everything else as every cursor does.
    """
    if is_sqlite():
        return db.execute(query)
    return run_as_text(*db.get_sql_context().sql(query).query())


def run_as_text(sql: str, params: list[Any]) -> Any:
    """Run a statement's text as read_as_text runs a query, and return its cursor."""
    if is_sqlite():
        return db.execute_sql(sql, params)
    return db.obj.execute_reading(sql, params, (_TIMES_AS_TEXT,))


def run_together(statements: Sequence[tuple[str, Sequence[Any]]]) -> list[tuple[Any, ...]]:
    """Run statements one after another, in one round trip where the database takes several; return the last's rows."""
    if not statements:
        return []
    if is_sqlite():
        for sql, params in statements:
            cursor = db.execute_sql(sql, params)
    else:
        cursor = db.obj.execute_together(statements)
    return list(cursor.fetchall()) if cursor.description is not None else []


def locking(query: _Selecting) -> _Selecting:
    """Return a query that locks the rows it reads until the transaction ends, where such a lock holds anything.

    On PostgreSQL inside a transaction: FOR UPDATE. Outside one (a dry-run's checks) the lock would end with
    the statement and only make the read wait for the writers holding it; SQLite's writer lock already
    serialises the writes.
    """
    return query.for_update() if locks_rows() else query


def locks_rows() -> bool:
    """Tell whether a read that locks its rows (models.locking) holds anything here: on PostgreSQL, in a write's transaction."""
    return not is_sqlite() and db.in_transaction() and not _REHEARSING.get()


# Whether this thread's transaction is a dry-run's, to be rolled back (models.rehearsal).
_REHEARSING: contextvars.ContextVar[bool] = contextvars.ContextVar("rehearsing", default=False)


@contextlib.contextmanager
def rehearsal() -> Iterator[None]:
    """Open a write transaction for a dry-run, which its caller rolls back: it takes no row lock (models.locking).

    A dry-run commits nothing for a lock to guard: holding one would only make it wait for the writes in
    progress on its rows (a create for its profile's numbering), and make them wait for it. On SQLite it
    still takes the writer lock, as every write transaction there does.
    """
    token = _REHEARSING.set(True)
    try:
        with atomic():
            yield
    finally:
        _REHEARSING.reset(token)


@contextlib.contextmanager
def snapshot() -> Iterator[None]:
    """Read in one snapshot: every query of the block sees the database as the first one did.

    For a read of several statements whose rows must agree (a delivery and its attempts), which a write
    committed between them would otherwise split. Opens a transaction: not inside another one.
    """
    with db.atomic():  # SQLite (WAL): a read transaction keeps the snapshot of its first read
        if not is_sqlite():
            db.execute_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def atomic() -> contextlib.AbstractContextManager[Any]:
    """Open a write transaction; SQLite takes its write lock up front to avoid upgrade deadlocks."""
    if isinstance(db.obj, SqliteDatabase):
        return _in_turn(db.obj)
    if is_sqlite():
        return db.atomic("IMMEDIATE")
    return db.atomic()


@contextlib.contextmanager
def _in_turn(database: SqliteDatabase) -> Iterator[None]:
    with database.write_turns, database.atomic("IMMEDIATE"):
        yield


class BaseModel(peewee.Model):
    """Base of every model: bound to the late database proxy."""

    class Meta:
        database = db
        legacy_table_names = False


class PublicModel(BaseModel):
    """A model with a public UUID and created/updated timestamps."""

    id = peewee.AutoField()  # what Peewee adds by itself, declared so that a type checker knows it
    uuid = peewee.UUIDField(unique=True, default=uuid.uuid4)
    created = peewee.DateTimeField(default=utcnow, index=True)
    updated = peewee.DateTimeField(default=utcnow, index=True)


def tuples(query: peewee.BaseQuery) -> Iterator[tuple[Any, ...]]:
    """Iterate a query's rows as tuples (Peewee's stubs type `.tuples()` rows as model instances)."""
    return iter(query.tuples())


def dicts(query: peewee.BaseQuery) -> Iterator[dict[str, Any]]:
    """Iterate a query's rows as dicts (Peewee's stubs type `.dicts()` rows as model instances)."""
    return iter(query.dicts())
