"""Versioned schema migrations: numbered modules (`0001_initial.py`, ...) applied in order, each once.

Each module defines `up(migrator, database)`: `migrator` is playhouse.migrate's SchemaMigrator for
the database, `database` the peewee Database. Applied versions are rows of `schema_migration`.
peewee-migrate 2.3.0 was tried with the pinned Peewee and not chosen: its generated migrations name
indexes differently from the tables `upgrade()` made (`appkey_name`, not `app_key_name`), its diff
of this project's models emits a migration that fails (drop of that index), and it lists
migrations only from a directory of files it execs, not from a package.

A migration and its version row commit in one transaction, so a migration that fails leaves the
schema as it was (PostgreSQL and SQLite both have transactional DDL; see docs/operations.md, "Migrations").
A migration therefore cannot use statements that refuse a transaction (CREATE INDEX CONCURRENTLY,
VACUUM). Hosts that start at once serialise on an advisory lock (PostgreSQL) or SQLite's write
lock, and whoever comes second finds the version applied and skips it.
"""

import contextlib
import importlib
import pkgutil
import re
import types
from collections.abc import Iterator
from typing import Any

import peewee
from playhouse.migrate import SchemaMigrator, make_index_name

from models import BaseModel, db, tuples, utcnow
from models.idempotency import IdempotencyKey
from models.risk_data import Address, Building, Driver, Premise, Vehicle
from models.tenancy import Agency, AppKey, Risk, Token
from models.webhooks import WEBHOOK_MODELS

NAME = re.compile(r"^\d{4}_\w+$")
LOCK_KEY = 0x7269736B617069  # "riskapi": one advisory lock for every host upgrading one PostgreSQL database


class MigrationError(Exception):
    """A migration failed; its transaction was rolled back."""


class SchemaMigration(BaseModel):
    """One applied migration."""

    name = peewee.CharField(max_length=255, primary_key=True)
    applied = peewee.DateTimeField(default=utcnow)


def all_models() -> list[type[BaseModel]]:
    """Return every model class in creation order, the version table first."""
    # The version table too: dropping every table (toolkit.tenants) then leaves an empty database.
    ordered: list[type[BaseModel]] = [SchemaMigration, AppKey, Agency, Token, Risk, Vehicle, Premise, Driver, Address, Building]
    return ordered + list(WEBHOOK_MODELS) + [IdempotencyKey]


def discover(package: str = __name__) -> list[tuple[str, types.ModuleType]]:
    """Return the migration modules of a package as (name, module), in the order they apply."""
    path = importlib.import_module(package).__path__
    names = sorted(info.name for info in pkgutil.iter_modules(path) if NAME.match(info.name))
    return [(name, importlib.import_module(f"{package}.{name}")) for name in names]


def status(modules: list[tuple[str, types.ModuleType]] | None = None) -> list[dict[str, Any]]:
    """List every migration with when it was applied (None: pending); read only, creates nothing.

    Versions recorded but unknown to this release (a newer one ran here) are listed after, marked.
    """
    modules = discover() if modules is None else modules
    with db.connection_context():
        applied = dict(tuples(SchemaMigration.select(SchemaMigration.name, SchemaMigration.applied))) if _has_table() else {}
    rows = [{"migration": name, "applied": applied.pop(name, None)} for name, _ in modules]
    return rows + [{"migration": name, "applied": when, "unknown": True} for name, when in sorted(applied.items())]


def upgrade(modules: list[tuple[str, types.ModuleType]] | None = None) -> list[str]:
    """Apply the pending migrations in order; return the names of those applied here.

    A database an earlier `models.upgrade()` made has the tables but no version table: the first
    migrations are written to find what is already there (tables, columns, indexes) and add only
    what is missing, so they run on it like on an empty one and no row is touched.
    """
    modules = discover() if modules is None else modules
    database = db.obj
    ran: list[str] = []
    with db.connection_context():
        with _transaction(database):
            SchemaMigration.create_table(safe=True)
        done = {name for (name,) in tuples(SchemaMigration.select(SchemaMigration.name))}
        for name, module in modules:
            if name not in done and _apply(database, name, module):
                ran.append(name)
    return ran


def _apply(database: peewee.Database, name: str, module: types.ModuleType) -> bool:
    """Apply one migration and record it in one transaction; False if another process did first."""
    sqlite = isinstance(database, peewee.SqliteDatabase)
    # SQLite's table rebuilds (playhouse's drop_column, alter_column_type...) drop and recreate a
    # table: with foreign keys on, that would cascade-delete child rows. The pragma only takes effect
    # outside a transaction; the keys are checked before commit instead. (The SQLite database whose
    # keys are off meanwhile, or None.)
    foreign_keys = database if isinstance(database, peewee.SqliteDatabase) and database.pragma("foreign_keys") else None
    if foreign_keys is not None:
        foreign_keys.pragma("foreign_keys", 0)
    try:
        with _transaction(database):
            if SchemaMigration.get_or_none(SchemaMigration.name == name) is not None:
                return False
            module.up(SchemaMigrator.from_database(database), database)
            if sqlite and database.execute_sql("PRAGMA foreign_key_check").fetchone():
                raise MigrationError("it leaves rows whose foreign key points at nothing")
            SchemaMigration.create(name=name, applied=utcnow())
    except Exception as exc:
        raise MigrationError(f"migration {name} failed, nothing of it was applied: {exc}") from exc
    finally:
        if foreign_keys is not None:
            foreign_keys.pragma("foreign_keys", 1)
    return True


@contextlib.contextmanager
def _transaction(database: peewee.Database) -> Iterator[None]:
    """A write transaction that holds the migration lock until it ends."""
    if isinstance(database, peewee.SqliteDatabase):
        with database.atomic("IMMEDIATE"):  # the write lock up front: no upgrade deadlock between processes
            yield
        return
    with database.atomic():
        database.execute_sql("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        yield


def _has_table() -> bool:
    return db.table_exists(SchemaMigration._meta.table_name)


# ---- helpers for migrations that must also find their effect already there ---------------------


def add_missing_columns(migrator: SchemaMigrator, database: peewee.Database, table: str, **fields: peewee.Field) -> None:
    """Add the columns (and the index of an indexed one) a table lacks; leave those it has."""
    present = {column.name for column in database.get_columns(table)}
    for column, field in fields.items():
        if column not in present:
            plain = field.clone()
            plain.index = plain.unique = False
            migrator.add_column(table, column, plain).run()
        if field.index or field.unique:
            add_missing_index(migrator, database, table, (column,), unique=field.unique)


def add_missing_index(
    migrator: SchemaMigrator, database: peewee.Database, table: str, columns: tuple[str, ...], unique: bool = False
) -> None:
    """Create an index under peewee's name for it unless one of that name exists."""
    name = make_index_name(table, columns)
    if name not in {index.name for index in database.get_indexes(table)}:
        migrator.add_index(table, columns, unique).run()
