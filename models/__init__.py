"""Peewee models, bound late to the database named by DATABASE_URL: the database, its connections and the base models."""

import contextlib
import contextvars
import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

import peewee
from playhouse.db_url import connect as url_connect
from playhouse.db_url import parse as url_parse

from models.databases import SILENCE, PostgresqlPool, SqliteDatabase, driver_errors, times_as_text

db = peewee.DatabaseProxy()

# The errors that mean the database, not the request, failed (api.error_handlers answers them with a 503).
DATABASE_DOWN = (peewee.OperationalError, peewee.InterfaceError)
# A connection that raised any of the driver's errors is closed, not given back: it may be broken.
DATABASE_ERRORS = (peewee.DatabaseError, peewee.InterfaceError)


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


# The connection's life, in one place: a request (api.app), a relay pass, a recorder batch and every other
# unit of work take this thread's connection with check_out() and give it back with give_back(), or both at once
# with `with connection():`. A check-out inside another keeps the outer one's connection.


def check_out() -> bool:
    """Take this thread's connection (Peewee's pool checks it first); return whether it was taken now, not before.

    Raises peewee.OperationalError when the database does not answer: at once while PostgreSQL is known away
    (models.breaker), and a check-out that waited out a silent server opens the breaker.
    """
    if not db.is_closed():
        return False
    pool = db.obj
    if not isinstance(pool, PostgresqlPool):
        db.connect()
        return True
    pool.breaker.check()
    began = time.monotonic()
    try:
        db.connect()
    except DATABASE_DOWN:
        pool.breaker.failed(time.monotonic() - began)
        raise
    return True


def give_back(failed: BaseException | None = None, began: float | None = None) -> None:
    """Give this thread's connection back to the pool; after a database error, close it instead (it may be broken).

    `began` (time.monotonic()) tells the breaker how long the failed work waited: a silent server opens it.
    SQLite's connection stays with its thread, unless it failed: opening one costs more than a small request.
    """
    if db.is_closed():
        return
    pool = db.obj
    if isinstance(failed, DATABASE_ERRORS):
        with contextlib.suppress(peewee.PeeweeException):
            pool.manual_close() if isinstance(pool, PostgresqlPool) else db.close()
        if began is not None and isinstance(pool, PostgresqlPool):
            pool.breaker.failed(time.monotonic() - began)
    elif not is_sqlite():
        db.close()


@contextlib.contextmanager
def connection() -> Iterator[None]:
    """Hold this thread's connection for a block (check_out, give_back)."""
    began = time.monotonic()
    taken = check_out()
    try:
        yield
    except BaseException as exc:
        if taken or isinstance(exc, DATABASE_ERRORS):
            give_back(exc, began)
        raise
    if taken:
        give_back()


def answers() -> bool:
    """Tell whether the database answers a query now (readyz); never raise."""
    try:
        with connection():
            db.execute_sql("SELECT 1")
    except Exception:  # any failure to answer means not ready; the probe itself must never fail
        return False
    return True


def is_sqlite() -> bool:
    """Tell whether the bound database is SQLite."""
    return isinstance(db.obj, peewee.SqliteDatabase)


_Selecting = TypeVar("_Selecting", bound=peewee.Select)


def read_as_text(query: peewee.Query) -> Any:
    """Run a query and return its cursor, whose dates and times are the text the database sends (a DB-API cursor).

    For a read whose values are only written out again (services.render.fetch): no datetime is made
    to be turned back into text. SQLite's driver gives that text already; on PostgreSQL the cursor reads
    them so (models.databases.times_as_text), and everything else as every cursor does.
    """
    return run_as_text(*db.get_sql_context().sql(query).query())


def run_as_text(sql: str, params: list[Any]) -> Any:
    """Run a statement's text as read_as_text runs a query, and return its cursor."""
    if is_sqlite():
        return db.execute_sql(sql, params)
    with driver_errors():
        return times_as_text(db.cursor()).execute(sql, params)


@contextlib.contextmanager
def together() -> Iterator[None]:
    """Send the block's statements without waiting for each one's answer, where the driver can (psycopg 3's pipeline).

    Each statement still runs alone, with its own snapshot: under READ COMMITTED a read that follows a lock sees
    what the lock's holder committed. Reading a cursor's rows inside the block waits for what was sent before it.
    """
    if is_sqlite():
        yield
        return
    with driver_errors(), db.connection().pipeline():
        yield


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
    # SQLite (WAL): a read transaction keeps the snapshot of its first read.
    with db.atomic() if is_sqlite() else db.atomic(isolation_level="REPEATABLE READ"):
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
