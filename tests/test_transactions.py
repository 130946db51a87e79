"""models.databases.PostgresqlPool: a transaction's BEGIN goes out with its first statement, in one message.

Every message the pool sends is recorded by the connection's cursors (a PostgreSQL of the test's own, so this
runs in every pass): what a transaction sent, and what the server kept of it.
"""

import io
import threading

import peewee
import psycopg2.extensions
import pytest
from playhouse.db_url import parse

from models.databases import SILENCE, PostgresqlPool
from toolkit import postgres
from toolkit.serving import wait_until

pytestmark = pytest.mark.skipif(not postgres.available(), reason=f"needs PostgreSQL's initdb and pg_ctl in {postgres.BIN}")

Recording, SENT = postgres.recording_cursor()


@pytest.fixture(scope="module")
def pool():
    with postgres.OwnPostgres() as server:
        database = PostgresqlPool(**{**SILENCE, **parse(server.url)}, max_connections=4, cursor_factory=Recording)
        with database.connection_context():
            database.execute_sql("CREATE TABLE kept (n INTEGER PRIMARY KEY)")
        yield database
        database.close_all()


@pytest.fixture
def sent(pool):
    """The messages sent from here on, on a held connection of an emptied table."""
    with pool.connection_context():
        pool.execute_sql("DELETE FROM kept")
        SENT.clear()
        yield SENT


def kept(pool) -> list[int]:
    return [n for (n,) in pool.execute_sql("SELECT n FROM kept ORDER BY n").fetchall()]


def test_a_transaction_sends_its_begin_with_its_first_statement(pool, sent):
    with pool.atomic():
        pool.execute_sql("INSERT INTO kept VALUES (%s)", (1,))
        pool.execute_sql("INSERT INTO kept VALUES (%s)", (2,))
    assert sent == ["BEGIN; INSERT INTO kept VALUES (%s)", "INSERT INTO kept VALUES (%s)", "COMMIT"]
    assert kept(pool) == [1, 2]


def test_a_transaction_that_sends_nothing_sends_no_begin_and_no_commit(pool, sent):
    with pool.atomic():
        pass
    with pytest.raises(RuntimeError), pool.atomic():
        raise RuntimeError("before any statement")
    assert sent == []
    assert pool.connection().get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_IDLE


def test_a_rolled_back_transaction_keeps_nothing_and_leaves_the_connection_idle(pool, sent):
    with pytest.raises(RuntimeError), pool.atomic():
        pool.execute_sql("INSERT INTO kept VALUES (1)")
        raise RuntimeError("after a statement")
    assert sent == ["BEGIN; INSERT INTO kept VALUES (1)", "ROLLBACK"]
    assert pool.connection().get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_IDLE
    assert kept(pool) == []


def test_a_failing_first_statement_is_rolled_back_and_the_next_transaction_begins_anew(pool, sent):
    pool.execute_sql("INSERT INTO kept VALUES (1)")
    with pytest.raises(peewee.IntegrityError), pool.atomic():
        pool.execute_sql("INSERT INTO kept VALUES (1)")  # taken: the transaction is aborted
    with pool.atomic():
        pool.execute_sql("INSERT INTO kept VALUES (2)")
    assert sent[1:] == ["BEGIN; INSERT INTO kept VALUES (1)", "ROLLBACK", "BEGIN; INSERT INTO kept VALUES (2)", "COMMIT"]
    assert kept(pool) == [1, 2]


def test_a_savepoint_inside_keeps_the_outer_transaction(pool, sent):
    with pool.atomic():
        with pytest.raises(peewee.IntegrityError), pool.atomic():
            pool.execute_sql("INSERT INTO kept VALUES (1)")
            pool.execute_sql("INSERT INTO kept VALUES (1)")
        pool.execute_sql("INSERT INTO kept VALUES (3)")
    assert sent[0].startswith("BEGIN; SAVEPOINT ")
    assert kept(pool) == [3]


def test_a_statement_on_a_cursor_directly_is_preceded_by_the_begin_alone(pool, sent):
    with pool.atomic():
        pool.cursor().copy_expert("COPY kept (n) FROM STDIN", io.StringIO("4\n5\n"))
    assert sent == ["BEGIN", "COPY kept (n) FROM STDIN", "COMMIT"]
    assert kept(pool) == [4, 5]


def test_an_isolation_level_begins_with_the_first_statement(pool, sent):
    with pool.atomic(isolation_level=psycopg2.extensions.ISOLATION_LEVEL_REPEATABLE_READ):
        (level,) = pool.execute_sql("SHOW transaction_isolation").fetchone()
    assert level == "repeatable read"
    assert sent == ["BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ; SHOW transaction_isolation", "COMMIT"]


def test_statements_sent_together_go_in_one_message_and_each_reads_after_the_one_before(pool, sent):
    """A read sent with a lock, in one message, sees what the lock's holder committed while it waited (models.run_together)."""
    with pool.atomic():
        pool.execute_sql("INSERT INTO kept VALUES (1)")
    locked, release, answers = threading.Event(), threading.Event(), []

    def holder() -> None:
        with pool.connection_context(), pool.atomic():
            pool.execute_sql("SELECT n FROM kept WHERE n = 1 FOR UPDATE")
            pool.execute_sql("INSERT INTO kept VALUES (10)")
            locked.set()
            release.wait(60)

    def waiter() -> None:
        with pool.connection_context(), pool.atomic():
            lock, highest = ("SELECT n FROM kept WHERE n = %s FOR UPDATE", (1,)), ("SELECT MAX(n) FROM kept", ())
            answers.append(pool.execute_together([lock, highest]).fetchall())

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    assert locked.wait(60)
    threads.append(threading.Thread(target=waiter))
    threads[1].start()
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    assert wait_until(lambda: pool.execute_sql(waiting).fetchone()[0] == 1, timeout=60)
    release.set()
    for thread in threads:
        thread.join(60)
    assert answers == [[(10,)]]  # not the 1 its message's first snapshot would have read
    assert "BEGIN; SELECT n FROM kept WHERE n = %s FOR UPDATE; SELECT MAX(n) FROM kept" in sent
