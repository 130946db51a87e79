"""models.together on PostgreSQL: a write's statements sent without waiting for each answer (psycopg 3's pipeline).

On a PostgreSQL of the test's own, so this runs in every pass; the models are bound to it for the module.
"""

import threading

import peewee
import psycopg
import pytest
from playhouse.db_url import parse

import models
from models.databases import SILENCE, PostgresqlPool
from toolkit import postgres
from toolkit.serving import wait_until

pytestmark = pytest.mark.skipif(not postgres.available(), reason=f"needs PostgreSQL's initdb and pg_ctl in {postgres.BIN}")


@pytest.fixture(scope="module")
def pool():
    bound = models.db.obj
    with postgres.OwnPostgres() as server:
        database = PostgresqlPool(**{**SILENCE, **parse(server.url)}, max_connections=4)
        models.db.initialize(database)
        try:
            with models.connection():
                database.execute_sql("CREATE TABLE kept (n INTEGER PRIMARY KEY)")
            yield database
        finally:
            database.close_all()
            models.db.initialize(bound)


@pytest.fixture
def held(pool):
    """A held connection of an emptied table."""
    with models.connection():
        pool.execute_sql("DELETE FROM kept")
        yield pool


def kept(pool) -> list[int]:
    return [n for (n,) in pool.execute_sql("SELECT n FROM kept ORDER BY n").fetchall()]


def test_statements_sent_together_go_in_a_pipeline_and_are_all_written(held):
    with models.atomic(), models.together():
        assert held.connection().pgconn.pipeline_status == psycopg.pq.PipelineStatus.ON
        for n in range(5):
            held.execute_sql("INSERT INTO kept VALUES (%s)", (n,))
    assert held.connection().pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
    assert kept(held) == [0, 1, 2, 3, 4]


def test_a_failing_statement_together_is_peewees_error_and_rolls_the_transaction_back(held):
    held.execute_sql("INSERT INTO kept VALUES (1)")
    with pytest.raises(peewee.IntegrityError), models.atomic(), models.together():
        held.execute_sql("INSERT INTO kept VALUES (2)")
        held.execute_sql("INSERT INTO kept VALUES (1)")  # taken: the transaction is aborted
        held.execute_sql("INSERT INTO kept VALUES (3)")
    assert held.connection().pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with models.atomic():
        held.execute_sql("INSERT INTO kept VALUES (4)")
    assert kept(held) == [1, 4]


def test_statements_sent_together_each_read_after_the_one_before(held):
    """A read sent with a lock sees what the lock's holder committed while it waited (models.risk_data's numbering)."""
    with models.atomic():
        held.execute_sql("INSERT INTO kept VALUES (1)")
    locked, release, answers = threading.Event(), threading.Event(), []

    def holder() -> None:
        with models.connection(), models.atomic():
            held.execute_sql("SELECT n FROM kept WHERE n = 1 FOR UPDATE")
            held.execute_sql("INSERT INTO kept VALUES (10)")
            locked.set()
            release.wait(60)

    def waiter() -> None:
        with models.connection(), models.atomic():
            with models.together():
                held.execute_sql("SELECT n FROM kept WHERE n = %s FOR UPDATE", (1,))
                highest = held.execute_sql("SELECT MAX(n) FROM kept")
            answers.append(highest.fetchall())

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    assert locked.wait(60)
    threads.append(threading.Thread(target=waiter))
    threads[1].start()
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    assert wait_until(lambda: held.execute_sql(waiting).fetchone()[0] == 1, timeout=60)
    release.set()
    for thread in threads:
        thread.join(60)
    assert answers == [[(10,)]]  # not the 1 a snapshot taken before the lock was granted would have read


def test_a_statement_run_often_is_prepared_by_psycopg(held):
    for _ in range(models.databases.PREPARE_THRESHOLD + 1):
        held.execute_sql("SELECT n FROM kept WHERE n = %s", (1,))
    prepared = held.execute_sql("SELECT statement FROM pg_prepared_statements").fetchall()
    assert ("SELECT n FROM kept WHERE n = $1",) in prepared
