"""No index of the schema repeats the first columns of another on its table (issue 35).

Every insert, and every update that is not HOT, writes an entry into each index of its table: an index whose
columns lead another's serves no read the other does not, and costs every write. A unique index (a constraint)
and a partial one (a small index of its own rows) are not repeats. Read from the schema the migrations make
(`riskapi db upgrade`, a SQLite file; tests/test_migrations.py shows it the same as PostgreSQL's and the models').
"""

import os
import sqlite3
import subprocess
import sys


def indexes(path: str) -> dict[str, list[tuple[str, tuple[str, ...], bool]]]:
    """Return each table's indexes as (name, columns, a repeat may be kept: unique or partial)."""
    connection = sqlite3.connect(path)
    found: dict[str, list[tuple[str, tuple[str, ...], bool]]] = {}
    try:
        tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for _, name, unique, _origin, partial in connection.execute(f"PRAGMA index_list('{table}')"):
                columns = tuple(column for _, _, column in connection.execute(f"PRAGMA index_info('{name}')"))
                found.setdefault(table, []).append((name, columns, bool(unique) or bool(partial)))
    finally:
        connection.close()
    return found


def repeats(found: dict[str, list[tuple[str, tuple[str, ...], bool]]]) -> list[str]:
    """Return 'table: index repeats index' for each index whose columns lead another index's of its table."""
    out = []
    for table, listed in found.items():
        for name, columns, kept in listed:
            for other, wider, _ in listed:
                if not kept and other != name and len(wider) >= len(columns) and wider[: len(columns)] == columns:
                    out.append(f"{table}: {name} {columns} repeats {other} {wider}")
    return sorted(out)


def test_the_rule_finds_a_repeat_and_leaves_unique_and_partial_indexes():
    found = {
        "t": [("t_a", ("a",), False), ("t_a_b", ("a", "b"), False), ("t_b", ("b",), True), ("t_b_c", ("b", "c"), False)],
        "u": [("u_a", ("a",), False), ("u_b_a", ("b", "a"), False)],
    }
    assert repeats(found) == ["t: t_a ('a',) repeats t_a_b ('a', 'b')"]


def test_no_index_of_the_migrated_schema_repeats_another(tmp_path):
    path = tmp_path / "schema.db"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{path}"}
    subprocess.run([sys.executable, "-m", "riskapi", "db", "upgrade"], env=env, check=True, capture_output=True)
    found = indexes(str(path))
    assert {"delivery", "driver", "event"} <= set(found)  # the schema was read
    assert repeats(found) == []
