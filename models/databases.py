"""The two databases the models bind to (models.bind): SQLite taking write turns, and PostgreSQL through psycopg 3 in
Peewee's own pool; and the settings that keep a silent PostgreSQL from holding a request (SILENCE)."""

import contextlib
import select
import threading
from typing import Any

import peewee
import psycopg
from playhouse.pool import PooledPostgresqlDatabase
from psycopg.types.string import TextLoader

from models import breaker

# psycopg 3 prepares a statement on its connection once it has run it this often (its own default, said here), and
# keeps the most recent `prepared_max` (100) of them: the server then parses and plans each only once a connection.
PREPARE_THRESHOLD = 5

# The uuid type read as the text the server sends: the service only writes each one out again (an answer, an event, a
# cursor), and a UUIDField makes its object from the text, as on SQLite. A connection's adapters, not the process's.
READING = psycopg.adapt.AdaptersMap(psycopg.adapters)
READING.register_loader("uuid", TextLoader)


def times_as_text(cursor: psycopg.Cursor) -> psycopg.Cursor:
    """Return a cursor that reads dates and times as the text the server sends (DateStyle ISO, as SQLite's text).

    For a read that only writes them out again (models.read_as_text): the cursor's adapters, not its connection's.
    """
    for name in ("date", "timestamp"):
        cursor.adapters.register_loader(name, TextLoader)
    return cursor


def driver_errors() -> contextlib.AbstractContextManager[None]:
    """Raise the driver's errors as Peewee's, as execute_sql does, around a call made on a connection or cursor directly."""
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


class Psycopg3Adapter(peewee.Psycopg3Adapter):
    """psycopg 3 as Peewee drives it (its adapter, the extension point playhouse.postgres_ext uses), with a pooled
    connection checked at check-out without a round trip.

    Peewee's own check sends `SELECT 1` at every check-out (each request's): a round trip before any work, and on a
    server gone silent a wait of tcp_user_timeout for each pooled connection in turn, then a connect's. An idle
    connection the server has let go (restart, crash, `pg_terminate_backend`, idle timeout) has its last message or
    its end of stream waiting on the socket, so one with anything to read is discarded; one whose host vanished
    without a word passes, and its first query then fails as the ping would have (a 503, and the breaker opens).
    """

    def is_connection_closed(self, conn: Any) -> bool:
        if self.txn_status(conn) != self.txn_idle:
            return bool(super().is_connection_closed(conn))  # unknown: closed; left in a transaction: rolled back
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except (OSError, ValueError, psycopg.Error):
            return True
        return bool(readable)


class PostgresqlPool(PooledPostgresqlDatabase):
    """Peewee's pool of psycopg 3 connections, each checked at check-out without a round trip, with a breaker."""

    psycopg3_adapter = Psycopg3Adapter

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, prefer_psycopg3=True, prepare_threshold=PREPARE_THRESHOLD, context=READING, **kwargs)
        self.breaker = breaker.Breaker(self.probe)

    def probe(self) -> None:
        """Open a connection of its own (outside the pool), ask the server one thing, and close it."""
        try:
            with psycopg.connect(dbname=self.database, **self.connect_params) as connection:
                connection.execute("SELECT 1")
        except psycopg.Error as exc:
            raise peewee.OperationalError(str(exc)) from exc


# A server that does not answer (a link gone silent, not a crash: nothing refuses, nothing resets) would hold a
# connect for good, and every request with it: libpq gives up after connect_timeout (2 s, its least);
# tcp_user_timeout drops a connection whose sent query goes unacknowledged for 1.5 s (without it the kernel
# retransmits for about 15 minutes; a long query is not cut: the server's kernel acknowledges it at once); and
# keepalives find an idle pooled connection whose host went silent. The other way round, the server's side of
# each session finds its client gone silent within about 2 s whatever the session is doing: keepalives after
# 1 s of quiet and tcp_user_timeout (a result unacknowledged for 0.5 s) close the socket, and
# client_connection_check_interval notices it while a statement runs or waits for a lock. A process cut off
# mid-transaction would otherwise hold its row locks, and stall every other host's writes to that risk profile,
# until the server's default keepalives noticed (hours). The idle-in-transaction timeout (3 s) is for a client
# alive but silent mid-transaction; a transaction here never waits on its client (nothing slow runs between its
# statements: no HTTP, no Redis). A URL's own parameters win (?connect_timeout=10).
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
