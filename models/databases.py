"""The two databases the models bind to (models.bind): SQLite taking write turns, PostgreSQL pooled, checked
without a round trip and preparing what each connection repeats (models.named_statements); and the settings that
keep a silent PostgreSQL from holding a request (SILENCE)."""

import contextlib
import logging
import select
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import peewee
import psycopg2
import psycopg2.extensions
from playhouse.pool import PooledPostgresqlDatabase

from models import breaker, named_statements

_QUERIES = logging.getLogger("peewee")  # where Peewee logs each statement it runs, at DEBUG

# PostgreSQL's uuid type (OID 2950) read as the text the server sends. Peewee registers psycopg2's UUID
# caster at import, which makes a uuid.UUID of every value; the service then writes each one out again
# (an answer, an event, a cursor), and a UUIDField still makes its object from the text, as on SQLite.
_UUID_AS_TEXT = psycopg2.extensions.new_type((2950,), "UUID_AS_TEXT", lambda value, cursor: value)


def driver_errors() -> contextlib.AbstractContextManager[None]:
    """Raise the driver's errors as Peewee's, as execute_sql does, around a call made on a cursor directly.

    The service's error mapping and retries know Peewee's classes (IntegrityError, OperationalError), not
    psycopg2's or sqlite3's.
    """
    return peewee.ExceptionWrapper(peewee.EXCEPTIONS)  # type: ignore[attr-defined]  # the stubs leave EXCEPTIONS out


class SqliteDatabase(peewee.SqliteDatabase):
    """SQLite, whose write transactions in one process take turns on a lock of their own before the file's.

    SQLite has one writer at a time, and a connection that finds the file locked sleeps in SQLite's busy
    handler, in steps of up to 100 ms, whenever the writer lets go. Threads of one process (the API's
    handlers; a worker's relay, claims and recorder) that wait on a lock start the moment the one before
    them commits; only writers in other processes still meet the busy handler.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.write_turns = threading.RLock()  # reentrant: atomic() inside atomic() is a savepoint


class PostgresqlPool(PooledPostgresqlDatabase):
    """Pooled PostgreSQL connections, each checked at check-out without a round trip, reading UUIDs as text.

    Peewee's pool sends `SELECT 1` on every check-out (a request, a relay pass, a recorder batch): a
    round trip, with its cost on both ends, before any work. An idle connection the server has let go
    (restart, crash, `pg_terminate_backend`, idle timeout) has its last message or its end of stream
    waiting on the socket, so a connection with anything to read, or in an unknown state, is
    discarded and a new one opened instead; only a connection whose host vanished without a word
    (no FIN) passes, and its first query then fails as the ping would have: slowly, then a 503.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.breaker = breaker.Breaker(self.probe)
        self.held = threading.local()  # each thread's connection kept between requests (keep_connection)
        self.statements: weakref.WeakKeyDictionary[Any, named_statements.Statements] = weakref.WeakKeyDictionary()

    def probe(self) -> None:
        """Open a connection of its own (outside the pool), ask the server one thing, and close it."""
        try:
            connection = psycopg2.connect(database=self.database, **self.connect_params)
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")
            finally:
                connection.close()
        except psycopg2.Error as exc:
            raise peewee.OperationalError(str(exc)) from exc

    # A transaction's BEGIN goes out with its first statement, in one message ("BEGIN; SELECT ..."): Peewee sends it
    # alone, a round trip of its own on every write (a small create's seven became six), with its cost on both ends.
    # A transaction that sends nothing sends no BEGIN and no COMMIT or ROLLBACK either. A statement made on a cursor
    # directly (a COPY) is preceded by the BEGIN alone, as before.
    def begin(self, isolation_level: Any = None) -> None:
        if self.is_closed():  # Peewee's own path: it connects (autoconnect) or says why not
            super().begin(isolation_level)
            return
        level = self._isolation_level if isolation_level is None else isolation_level
        statement = f"BEGIN TRANSACTION ISOLATION LEVEL {self._adapter.isolation_level_str(level)}" if level else "BEGIN"
        self._state.deferred_begin = (self._state.conn, statement)

    def execute_sql(self, sql: Any, params: Any = None) -> Any:
        return self.execute_reading(sql, params)

    # A statement repeated on a connection is prepared on it and sent as EXECUTE (models.named_statements). The log
    # keeps the statement's own text, as Peewee's execute_sql logs it, and Peewee's errors are raised, as it raises them.
    def execute_reading(self, sql: str, params: Any = None, casters: tuple[Any, ...] = ()) -> Any:
        """Run a statement as execute_sql does, on a cursor that reads values with these psycopg2 casters as well."""
        return self._send([(sql, params or ())], casters)

    def execute_together(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> Any:
        """Run statements one after another in one message (one round trip); return the cursor of the last one's rows.

        Each takes its own snapshot, as if sent alone: under READ COMMITTED a read that follows a lock sees
        what the lock's holder before committed. The first error ends the message, as it would a transaction.
        """
        return self._send(statements, ())

    def _send(self, statements: Sequence[tuple[str, Sequence[Any]]], casters: tuple[Any, ...]) -> Any:
        begin = self._take_begin()
        if _QUERIES.isEnabledFor(logging.DEBUG):
            for number, (sql, params) in enumerate(statements):
                _QUERIES.debug((sql if begin is None or number else f"{begin}; {sql}", params))
        with driver_errors():
            cursor = self.cursor()
            for caster in casters:
                psycopg2.extensions.register_type(caster, cursor)
            connection = self._state.conn
            named = self.statements.get(connection)
            sent = statements
            if named is not None:
                sent = [named.text(connection, sql, values, begin is not None) for sql, values in statements]
            try:
                cursor.execute(*_joined(sent, begin))
            except psycopg2.Error as exc:
                if named is None or exc.pgcode not in named_statements.STALE or sent == statements:
                    raise
                # A statement gone stale (named_statements.STALE): outside a transaction nothing was aborted, so it goes
                # again as text; inside one the transaction is aborted, and its caller's retry finds them forgotten.
                named.forget()
                if begin is not None or connection.get_transaction_status() != named_statements.IDLE:
                    raise
                cursor.execute(*_joined(statements, None))
        return cursor

    def cursor(self, named_cursor: Any = None) -> Any:
        begin = self._take_begin()
        cursor = super().cursor()
        if begin is not None:
            with driver_errors():
                cursor.execute(begin)
        return cursor

    def commit(self) -> None:
        if self._take_begin() is None:
            super().commit()

    def rollback(self) -> None:
        if self._take_begin() is None:
            super().rollback()

    def _take_begin(self) -> str | None:
        """Return the BEGIN this thread's transaction has yet to send, once; None when it went out (or none is due)."""
        state = self._state
        deferred = getattr(state, "deferred_begin", None)
        if deferred is None:
            return None
        state.deferred_begin = None
        connection, statement = deferred
        return statement if connection is state.conn else None  # a BEGIN due on a connection since closed is void

    def _initialize_connection(self, conn: Any) -> None:
        super()._initialize_connection(conn)
        if conn not in self.statements:  # a check-out initializes its connection again: its statements stay
            self.statements[conn] = named_statements.Statements()
        # Per connection, not process-wide: other clients in the process keep psycopg2's defaults.
        if isinstance(conn, psycopg2.extensions.connection):
            psycopg2.extensions.register_type(_UUID_AS_TEXT, conn)

    def _is_closed(self, conn: Any) -> bool:
        return not self.sound(conn)

    def sound(self, conn: Any) -> bool:
        """Tell whether a connection may be used, as a check-out checks it: no round trip (a transaction left open is
        rolled back)."""
        return not self._unsound(conn)

    def _unsound(self, conn: Any) -> bool:
        if conn.closed:
            return True
        adapter = self._adapter
        status = adapter.txn_status(conn)
        if status == adapter.txn_unknown:
            return True
        if status != adapter.txn_idle:  # left in a transaction: roll it back, as Peewee's own check does
            try:
                adapter.rollback(conn)
            except Exception:  # any failure means the connection is not to be reused
                return True
            return False
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)


def _joined(statements: Sequence[tuple[str, Sequence[Any]]], begin: str | None) -> tuple[str, list[Any]]:
    """Return the one message that sends these statements (after a BEGIN), and its values in order."""
    texts = [sql for sql, _ in statements] if begin is None else [begin, *(sql for sql, _ in statements)]
    return "; ".join(texts), [value for _, values in statements for value in values]


# A server that does not answer (a link gone silent, not a crash: nothing refuses, nothing resets) would hold a
# connect for good, and every request with it: libpq gives up after connect_timeout (2 s, its least);
# tcp_user_timeout drops a connection whose sent query goes unacknowledged for 1.5 s (without it the kernel
# retransmits for about 15 minutes; a long query is not cut: the server's kernel acknowledges it at once); and
# keepalives find an idle pooled connection whose host went silent. The other way round, the server's side of
# each session finds its client gone silent within about 2 s whatever the session is doing: keepalives after
# 1 s of quiet and tcp_user_timeout (a result unacknowledged for 0.5 s) close the socket, and
# client_connection_check_interval notices it while a statement runs or waits for a lock. A process cut off
# mid-transaction would otherwise hold its row locks, and stall every other host's writes to that risk profile,
# until the server's default keepalives noticed (hours); the idle-in-transaction timeout alone (2 s, its first
# mend) ended a cut-off host's transactions queued on one lock one after another, each once it had the lock
# and 2 s of idleness: another host's write waited 4 and 6 s behind two and three of them. It stays (3 s) for
# a client alive but silent mid-transaction; a transaction here never waits on its client (nothing slow runs
# between its statements: no HTTP, no Redis). A URL's own parameters win (?connect_timeout=10).
SILENCE = {
    "options": " ".join(
        f"-c {name}={value}"
        for name, value in {
            "idle_in_transaction_session_timeout": 3000,
            "tcp_user_timeout": 500,
            "tcp_keepalives_idle": 1,
            "tcp_keepalives_interval": 1,
            "tcp_keepalives_count": 1,
            "client_connection_check_interval": 250,
        }.items()
    ),
    "connect_timeout": 2,
    "tcp_user_timeout": 1500,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}
