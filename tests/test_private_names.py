"""tools.private_names: libraries' private names read or overridden, on made-up trees and on the product itself."""

import io
import textwrap
from pathlib import Path

from tools import private_names

DATABASE = """\
import peewee


class Database(peewee.Database):
    def _is_closed(self, conn):
        return conn.closed


class Cache:
    def __init__(self):
        self._kept = {}

    def _helper(self):
        return self._kept


def closed(conn, cache: Cache):
    cache._helper()
    return conn._state.closed


def columns(model):
    return model._meta.fields
"""

POOL = """\
import peewee
from playhouse.pool import PooledDatabase
from rq.scheduler import RQScheduler


class Pool(PooledDatabase):
    def _initialize_connection(self, conn):
        super()._initialize_connection(conn)
        self._checked = self._check(conn)

    def _check(self, conn):
        return self._checked or conn


def forget(scheduler: RQScheduler):
    scheduler._process = None


def anything(thing):
    return thing._secret
"""


def write(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(source))


def line(source: str, text: str) -> int:
    return next(number for number, row in enumerate(source.splitlines(), 1) if text in row)


def found(root: Path) -> list[tuple[str, int, str, str, str]]:
    return [(f.path, f.line, f.name, f.kind, f.library) for f in private_names.build(root)]


def test_a_library_private_read_and_override_are_found_and_the_products_own_names_are_not(tmp_path):
    write(tmp_path, {"models/database.py": DATABASE})
    assert found(tmp_path) == [
        ("models/database.py", line(DATABASE, "def _is_closed"), "_is_closed", "override", "peewee"),
        ("models/database.py", line(DATABASE, "conn._state"), "_state", "read", "peewee"),
    ]
    out = io.StringIO()
    failing = private_names.check(private_names.build(tmp_path), out=out)
    assert len(failing) == 2
    assert out.getvalue().splitlines() == [
        "private names of libraries read or overridden: 2",
        "  peewee: 2 (1 reads, 1 overrides)",
        f"    models/database.py:{line(DATABASE, 'def _is_closed')} _is_closed (override)",
        f"    models/database.py:{line(DATABASE, 'conn._state')} _state (read)",
    ]


def test_findings_are_attributed_to_their_library_and_scoped_by_it(tmp_path):
    write(tmp_path, {"jobs/pool.py": POOL})
    assert found(tmp_path) == [
        ("jobs/pool.py", line(POOL, "def _initialize_connection"), "_initialize_connection", "override", "peewee"),
        ("jobs/pool.py", line(POOL, "super()._initialize_connection"), "_initialize_connection", "read", "peewee"),
        ("jobs/pool.py", line(POOL, "scheduler._process"), "_process", "override", "rq"),
        ("jobs/pool.py", line(POOL, "thing._secret"), "_secret", "read", "unknown"),
    ]
    findings = private_names.build(tmp_path)
    failing = private_names.check(findings, {"peewee"}, out=io.StringIO())
    assert [(f.name, f.library) for f in failing] == [
        ("_initialize_connection", "peewee"),
        ("_initialize_connection", "peewee"),
        ("_secret", "unknown"),  # in a module that imports peewee
    ]
    assert private_names.check(findings, {"psycopg"}, out=io.StringIO()) == []
    assert private_names.main(["--root", str(tmp_path), "--libraries", "psycopg"]) == 0
    assert private_names.main(["--root", str(tmp_path), "--libraries", "peewee"]) == 1
    assert private_names.main(["--root", str(tmp_path), "--report"]) == 0


def test_the_product_reads_no_private_name_of_its_database_libraries(capsys):
    code = private_names.main(["--libraries", "peewee,psycopg"])
    assert code == 0, capsys.readouterr().out
