"""models.named_statements: a statement repeated on a connection is prepared once on it, then sent as EXECUTE.

Every message the pool sends is recorded by the connection's cursors, on a PostgreSQL of the test's own (so this
runs in every pass), with what the server holds (pg_prepared_statements) and what each statement answered.
"""

import peewee
import psycopg2.extensions
import pytest
from playhouse.db_url import parse

from models.databases import SILENCE, PostgresqlPool
from models.named_statements import KEPT, REPEAT
from toolkit import postgres

pytestmark = pytest.mark.skipif(not postgres.available(), reason=f"needs PostgreSQL's initdb and pg_ctl in {postgres.BIN}")

Recording, SENT = postgres.recording_cursor()


@pytest.fixture(scope="module")
def server():
    with postgres.OwnPostgres() as own:
        yield own


@pytest.fixture
def pool(server):
    """A pool whose one connection is new (it has prepared nothing), on a table of the rows 1, 2 and 3."""
    database = PostgresqlPool(**{**SILENCE, **parse(server.url)}, max_connections=1, cursor_factory=Recording)
    with database.connection_context():
        database.execute_sql("DROP TABLE IF EXISTS kept")
        database.execute_sql("CREATE TABLE kept (n INTEGER PRIMARY KEY, note TEXT)")
        database.execute_sql("INSERT INTO kept VALUES (1, 'one'), (2, 'two'), (3, 'three')")
        SENT.clear()
        yield database
    database.close_all()


def held(pool) -> list[tuple[str, str]]:
    """Return the statements the session holds prepared, as (name, text), read on a cursor of its own."""
    with pool.connection().cursor(cursor_factory=psycopg2.extensions.cursor) as cursor:
        cursor.execute("SELECT name, statement FROM pg_prepared_statements ORDER BY prepare_time, name")
        return cursor.fetchall()


def test_a_statement_is_prepared_when_repeated_then_executed_with_the_same_answers(pool):
    query = "SELECT note FROM kept WHERE n = %s"
    answers = [pool.execute_sql(query, (n % 3 + 1,)).fetchall() for n in range(REPEAT + 2)]
    assert answers == [[(("one", "two", "three")[n % 3],)] for n in range(REPEAT + 2)]
    assert SENT == [query] * (REPEAT - 1) + [
        "PREPARE riskapi_0 AS SELECT note FROM kept WHERE n = $1",
        "EXECUTE riskapi_0(%s)",
        "EXECUTE riskapi_0(%s)",
        "EXECUTE riskapi_0(%s)",
    ]
    assert held(pool) == [("riskapi_0", "PREPARE riskapi_0 AS SELECT note FROM kept WHERE n = $1")]


def test_a_statement_repeated_inside_transactions_is_prepared_before_the_next_one_begins(pool):
    update = "UPDATE kept SET note = %s WHERE n = %s"
    for round_ in range(REPEAT + 1):
        with pool.atomic():
            pool.execute_sql("SELECT n FROM kept WHERE n = 1 FOR UPDATE")
            pool.execute_sql(update, (f"round {round_}", 1))
    last = SENT[SENT.index("PREPARE riskapi_1 AS UPDATE kept SET note = $1 WHERE n = $2") :]
    # The lock's text was repeated first, at a transaction's start: prepared there, its BEGIN sent with its EXECUTE.
    assert SENT.count("PREPARE riskapi_0 AS SELECT n FROM kept WHERE n = 1 FOR UPDATE") == 1
    assert last == [
        "PREPARE riskapi_1 AS UPDATE kept SET note = $1 WHERE n = $2",
        "BEGIN; EXECUTE riskapi_0",
        "EXECUTE riskapi_1(%s, %s)",
        "COMMIT",
    ]
    assert pool.execute_sql("SELECT note FROM kept WHERE n = 1").fetchall() == [(f"round {REPEAT}",)]


def test_a_statement_the_server_will_not_prepare_runs_as_text_and_aborts_nothing(pool):
    # The server cannot tell a lone parameter's type: as text the literal's own type decides.
    query = "SELECT %s IS NULL"
    with pool.atomic():
        pool.execute_sql("INSERT INTO kept VALUES (%s, %s)", (4, "four"))
        answers = [pool.execute_sql(query, (None if n % 2 else "x",)).fetchall() for n in range(REPEAT + 2)]
    assert answers == [[(n % 2 == 1,)] for n in range(REPEAT + 2)]
    answers = [pool.execute_sql(query, ("x",)).fetchall() for _ in range(REPEAT)]
    assert answers == [[(False,)]] * REPEAT
    assert [m for m in SENT if m.startswith("PREPARE")] == ["PREPARE riskapi_0 AS SELECT $1 IS NULL"]
    assert not any(m.startswith("EXECUTE") for m in SENT)
    assert pool.execute_sql("SELECT n FROM kept ORDER BY n").fetchall() == [(1,), (2,), (3,), (4,)]


@pytest.mark.parametrize(
    ("value", "matched"),
    [
        (2, [(2,)]),
        (1.6, []),  # as a parameter of the column's type it would be rounded to 2, and match
        (3_000_000_000, []),  # as a parameter of the column's type: "integer out of range"
        ("2", [(2,)]),
    ],
)
def test_a_value_whose_type_the_text_decides_goes_as_text(pool, value, matched):
    query = "SELECT n FROM kept WHERE n = %s"
    for _ in range(REPEAT):
        assert pool.execute_sql(query, (2,)).fetchall() == [(2,)]
    assert pool.execute_sql(query, (value,)).fetchall() == matched
    literal = type(value) is str or value == 2
    assert SENT[-1] == ("EXECUTE riskapi_0(%s)" if literal else query)


def test_what_was_prepared_outlives_a_rollback(pool):
    query = "SELECT note FROM kept WHERE n = %s"
    for _ in range(REPEAT):
        pool.execute_sql(query, (1,))
    with pytest.raises(RuntimeError), pool.atomic():
        assert pool.execute_sql(query, (3,)).fetchall() == [("three",)]
        raise RuntimeError("roll back")
    assert pool.execute_sql(query, (2,)).fetchall() == [("two",)]
    assert SENT[-3:] == ["BEGIN; EXECUTE riskapi_0(%s)", "ROLLBACK", "EXECUTE riskapi_0(%s)"]


def test_a_connection_keeps_its_most_recent_statements_and_deallocates_the_oldest(pool):
    for k in range(KEPT + 1):
        for _ in range(REPEAT):
            assert pool.execute_sql(f"SELECT {k} + n FROM kept WHERE n = %s", (1,)).fetchall() == [(k + 1,)]
    names = [name for name, _ in held(pool)]
    assert len(names) == KEPT
    assert "riskapi_0" not in names and f"riskapi_{KEPT}" in names
    newest = f"PREPARE riskapi_{KEPT} AS SELECT {KEPT} + n FROM kept WHERE n = $1"
    assert SENT.index("DEALLOCATE riskapi_0") == SENT.index(newest) - 1
    # The first text, deallocated, goes as text again until repeated again.
    assert pool.execute_sql("SELECT 0 + n FROM kept WHERE n = %s", (3,)).fetchall() == [(3,)]
    assert SENT[-1] == "SELECT 0 + n FROM kept WHERE n = %s"


def test_statements_the_session_lost_are_sent_as_text_and_prepared_again(pool):
    query = "SELECT note FROM kept WHERE n = %s"
    for _ in range(REPEAT):
        pool.execute_sql(query, (1,))
    with pool.connection().cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # as a pooler's DISCARD ALL would
    # Outside a transaction nothing is aborted: the statement goes again as text, and answers.
    assert pool.execute_sql(query, (2,)).fetchall() == [("two",)]
    assert SENT[-2:] == ["EXECUTE riskapi_0(%s)", query]
    # Inside one the transaction is aborted (a write's retry runs it again: riskapi.services.bulk_write).
    for _ in range(REPEAT):
        pool.execute_sql(query, (1,))
    with pool.connection().cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    with pytest.raises(peewee.DatabaseError), pool.atomic():
        pool.execute_sql(query, (3,))
    with pool.atomic():
        assert pool.execute_sql(query, (3,)).fetchall() == [("three",)]
    assert SENT[-2:] == [f"BEGIN; {query}", "COMMIT"]


def test_the_log_shows_each_statement_s_own_text(pool, caplog):
    query = "SELECT note FROM kept WHERE n = %s"
    with caplog.at_level("DEBUG", logger="peewee"):
        for _ in range(REPEAT + 1):
            pool.execute_sql(query, (1,))
    assert SENT[-1] == "EXECUTE riskapi_0(%s)"
    assert [record.msg for record in caplog.records if record.name == "peewee"] == [(query, (1,))] * (REPEAT + 1)


def test_a_statement_read_with_casters_is_prepared_alike_and_read_with_them(pool):
    # models.run_as_text reads a page so (dates as the server's text), through the same statements.
    as_text = psycopg2.extensions.new_type((1082,), "DATE_AS_TEXT", lambda value, cursor: value)
    query = "SELECT %s::date + n FROM kept WHERE n = %s"
    answers = [pool.execute_reading(query, ("2026-11-28", 1), (as_text,)).fetchall() for _ in range(REPEAT + 1)]
    assert answers == [[("2026-11-29",)]] * (REPEAT + 1)
    prepared = "PREPARE riskapi_0 AS SELECT $1::date + n FROM kept WHERE n = $2"
    assert SENT[-3:] == [prepared, "EXECUTE riskapi_0(%s, %s)", "EXECUTE riskapi_0(%s, %s)"]
    assert pool.execute_sql(query, ("2026-11-28", 2)).fetchall()[0][0].isoformat() == "2026-11-30"


def test_a_statement_whose_table_changed_shape_goes_as_text_then_is_deallocated(pool):
    query = "SELECT * FROM kept WHERE n = %s"
    for _ in range(REPEAT):
        assert pool.execute_sql(query, (1,)).fetchall() == [(1, "one")]
    # A migration run while this process serves: the prepared `*` would now answer a row of another shape.
    with pool.connection().cursor() as cursor:
        cursor.execute("ALTER TABLE kept ADD COLUMN extra TEXT DEFAULT 'x'")
    assert pool.execute_sql(query, (1,)).fetchall() == [(1, "one", "x")]
    assert SENT[-2:] == ["EXECUTE riskapi_0(%s)", query]
    with pool.atomic():  # the connection's next idle moment deallocates the stale statement
        assert pool.execute_sql(query, (2,)).fetchall() == [(2, "two", "x")]
    assert SENT[-3:] == ["DEALLOCATE riskapi_0", f"BEGIN; {query}", "COMMIT"]
    assert held(pool) == []


def test_statements_sent_together_are_prepared_each_and_go_in_one_message(pool):
    lock, read = "SELECT n FROM kept WHERE n = %s FOR UPDATE", "SELECT note FROM kept WHERE n = %s"
    for n in range(REPEAT + 1):
        with pool.atomic():
            assert pool.execute_together([(lock, (1,)), (read, (n % 3 + 1,))]).fetchall() == [(("one", "two", "three")[n % 3],)]
    assert SENT[-2:] == ["BEGIN; EXECUTE riskapi_0(%s); EXECUTE riskapi_1(%s)", "COMMIT"]
    assert [text for _, text in held(pool)] == [
        f"PREPARE riskapi_{k} AS {t.replace('%s', '$1')}" for k, t in enumerate((lock, read))
    ]
    # Gone stale outside a transaction, they go again together as text.
    with pool.connection().cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    assert pool.execute_together([(lock, (2,)), (read, (2,))]).fetchall() == [("two",)]
    assert SENT[-2:] == ["EXECUTE riskapi_0(%s); EXECUTE riskapi_1(%s)", f"{lock}; {read}"]
