"""Where PostgreSQL's time goes under the soak: `pg_stat_statements` of a server of its own (`python -m bench.statements -h`).

Starts a throw-away PostgreSQL (toolkit.postgres: initdb, a free port, fsync on as deployed) with the
`pg_stat_statements` extension loaded, runs the soak (`python -m bench.soak`, this checkout's load against
`--root`'s code; what follows `--` is passed on) against a database of it, then prints the soak's summary,
the statement time in all, the WAL written (in all, and per delivery made), the statements that took most
of it (calls, total and mean ms, the normalised text: `$1` for a value, and a statement psycopg 3 prepared
counted with its runs before under that text), and the relay's polls of waiting deliveries. A statement's
time is the server's wall time for it: a `SELECT ... FOR UPDATE` that waits for a lock counts its wait, and
a `COPY` counts the time the client takes to stream its rows. The shared PostgreSQL is never touched: the
extension needs the server started with it.

    python -m bench.statements --seconds 30
    python -m bench.statements --seconds 30 --root /path/to/old-checkout
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

import psycopg

from toolkit import ROOT, postgres

DATABASE = "soak"
# The relay's polls (jobs.relay): the waiting deliveries, the index `delivery_waiting` reads.
RELAY = '%"relayed" IS NULL%'
_TOP = """
    SELECT calls, total_exec_time, mean_exec_time, query FROM pg_stat_statements
    JOIN pg_database ON pg_database.oid = dbid WHERE datname = %s AND query LIKE %s ORDER BY total_exec_time DESC LIMIT %s
"""
_TOTAL = """
    SELECT coalesce(sum(total_exec_time), 0), coalesce(sum(calls), 0) FROM pg_stat_statements
    JOIN pg_database ON pg_database.oid = dbid WHERE datname = %s
"""


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line; what follows `--` goes to the soak."""
    argv = sys.argv[1:] if argv is None else argv
    ours, soak = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(
        prog="python -m bench.statements", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of the soak's load (default 30)")
    parser.add_argument("--root", type=Path, default=ROOT, metavar="DIR", help="serve checkout DIR's code (default: this one)")
    parser.add_argument("--top", type=int, default=30, help="statements to list (default 30)")
    parser.add_argument("--width", type=int, default=160, help="characters of each statement's text shown (default 160)")
    args = parser.parse_args(ours)
    args.soak = soak
    return args


def shown(query: str, width: int) -> str:
    """Return a statement's text on one line, cut to width.

    A prepared statement is psycopg 3's: a connection prepares a statement it has run prepare_threshold (5) times,
    in the protocol, and pg_stat_statements counts it with its earlier runs under its `$1` text, shown as it is.
    A checkout from before psycopg 3 (`--root`) prepared with SQL, `PREPARE riskapi_<n> AS ...`, counted apart
    under the text of the PREPARE that first made it: shown as "[prepared]" and the statement, whichever name it had.
    """
    line = re.sub(r"^PREPARE riskapi_\d+ AS ", "[prepared] ", re.sub(r"\s+", " ", query).strip())
    return line if len(line) <= width else line[: width - 1] + "…"


def table(rows: list[tuple[int, float, float, str]], width: int) -> list[str]:
    """Return the lines of (calls, total ms, mean ms, query) rows, the largest total first as given."""
    lines = [f"{'calls':>8} {'total ms':>10} {'mean ms':>9}  statement"]
    lines += [f"{calls:>8} {total:>10.1f} {mean:>9.3f}  {shown(query, width)}" for calls, total, mean, query in rows]
    return lines


def written(wal: float, url: str) -> str:
    """Say how much WAL the soak wrote, in all and per delivery it made (what each row and index entry cost to write)."""
    with psycopg.connect(url) as connection, connection.cursor() as cursor:  # the block's end closes the connection
        cursor.execute("SELECT count(*) FROM delivery")
        (deliveries,) = cursor.fetchone()
    each = f", {wal / deliveries / 1000:.2f} kB per delivery made ({deliveries})" if deliveries else ""
    return f"WAL written: {wal / 1e6:.1f} MB{each}"


def measure(args: argparse.Namespace) -> int:
    """Start the server, run the soak against it, print what the statements cost; return the soak's exit code."""
    server = postgres.OwnPostgres()
    with open(server.data / "postgresql.conf", "a") as conf:
        conf.write("\nshared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = all\n")
    server.start()
    try:
        admin = psycopg.connect(server.url, autocommit=True)
        with admin.cursor() as cursor:
            cursor.execute("CREATE EXTENSION pg_stat_statements")
            cursor.execute(f"CREATE DATABASE {DATABASE}")
            cursor.execute("SELECT pg_stat_statements_reset()")
            cursor.execute("SELECT pg_current_wal_lsn()")
            (began,) = cursor.fetchone()
        url = server.url.rsplit("/", 1)[0] + "/" + DATABASE
        soak = [sys.executable, "-m", "bench.soak", "--seconds", f"{args.seconds:g}", "--database-url", url]
        done = subprocess.run([*soak, "--root", str(args.root), *args.soak], cwd=ROOT, check=False)
        with admin.cursor() as cursor:
            cursor.execute(_TOTAL, (DATABASE,))
            total, calls = cursor.fetchone()
            print(f"\nstatements: {total:.0f} ms in {calls} calls ({args.seconds:g} s of load and the soak's set-up and drain)")
            cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (began,))
            (wal,) = cursor.fetchone()
            print(written(float(wal), url))
            cursor.execute(_TOP, (DATABASE, "%", args.top))
            print("\n".join(table(cursor.fetchall(), args.width)))
            cursor.execute(_TOP, (DATABASE, RELAY, 10))
            print("\nthe relay's polls of waiting deliveries:")
            print("\n".join(table(cursor.fetchall(), args.width)))
        admin.close()
        return done.returncode
    finally:
        server.close()


if __name__ == "__main__":
    if not postgres.available():
        sys.exit(f"bench.statements: no initdb and pg_ctl in {postgres.BIN} (RISKAPI_PG_BIN names another folder)")
    sys.exit(measure(options()))
