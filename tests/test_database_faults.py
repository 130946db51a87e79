"""The database goes away: no 500, 503 with Retry-After while it is gone, recovery by itself (PostgreSQL)."""

import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import psycopg
import pytest
from playhouse.db_url import parse as url_parse

from tests.support import make_tenant
from tests.test_error_examples import example
from toolkit import ROOT
from toolkit.serving import free_port, wait_until
from toolkit.tenants import items

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="cutting server connections needs PostgreSQL (CI's postgres pass runs these)",
    ),
]


def terminate_backends() -> int:
    """Cut every other connection to the test database, as a restart or failover would.

    From a connection of its own, outside the pool: a pooled one may be the very connection the server
    used (on a busy machine eight requests at once can all be served in turn on one), and it spares itself.
    """
    with psycopg.connect(os.environ["DATABASE_URL"]) as own, own.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_cut_connections_are_replaced_without_an_error(server, tenant):
    def call(i):
        with httpx.Client(base_url=server.url + "/api/v1", timeout=30) as http:
            if i % 2:
                return http.get(tenant.url("/drivers"), headers=tenant.headers)
            return http.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)

    for _ in range(3):
        # Several requests at once leave several connections in the pool, all of which die below.
        threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert terminate_backends() >= 1
        responses = [call(i) for i in range(12)]
        assert [r.status_code for r in responses] == [201, 200] * 6, [r.text for r in responses]


class Proxy:
    """A TCP relay to PostgreSQL that the test can take down (every connection cut, new ones refused) and bring back."""

    def __init__(self, target=("127.0.0.1", 5432)):
        self.target = target
        self.port = free_port()
        self.sockets: list = []
        self.listener = None

    def up(self) -> "Proxy":
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()
        return self

    def down(self) -> None:
        # shutdown() wakes the thread blocked in accept(); close() alone leaves it accepting on Linux.
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self.sockets.clear()

    def _accept(self, listener) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def test_database_down_answers_503_then_recovers(server, settings, tmp_path):
    tenant = make_tenant()
    proxy = Proxy().up()
    port = free_port()
    database = settings.database_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    assert database != settings.database_url
    env = dict(os.environ, DATABASE_URL=database, RISKAPI_VALIDATE_RESPONSES="1")
    command = [sys.executable, "-m", "uvicorn", "api.app:asgi", "--factory", "--port", str(port)]
    log = tmp_path / "api.log"
    api = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", timeout=30) as http:

            def ask(i):
                if i % 2:
                    return http.get(tenant.url("/drivers"), headers=tenant.headers)
                return http.post(tenant.url("/drivers"), json=items("driver", {}), headers=tenant.headers)

            def answers():
                try:
                    return ask(1).status_code == 200
                except httpx.TransportError:
                    return False

            assert wait_until(answers, timeout=30)
            proxy.down()
            started = time.monotonic()
            while time.monotonic() - started < 3:
                response = ask(int(time.monotonic() * 10))
                assert response.status_code == 503, response.text
                assert response.json() == example("Unavailable", "database")
                assert response.headers["Retry-After"] == "1"
            proxy.up()
            statuses = [ask(i).status_code for i in range(10)]
            assert statuses == [201, 200] * 5
    finally:
        api.terminate()
        api.wait(15)
        proxy.down()
    text = log.read_text()
    assert "Traceback" not in text, text[-2000:]
    # One line when the database goes, not one per request.
    assert text.count("database unavailable") == 1, text[-2000:]


@pytest.fixture
def watcher(settings):
    """Yield an autocommit cursor of its own on the test database, for pg_stat_activity and pg_terminate_backend."""
    # Autocommit: inside a transaction pg_stat_activity would be read from the snapshot of its first query.
    with psycopg.connect(settings.database_url, autocommit=True) as connection:
        yield connection.cursor()


@pytest.fixture
def last_query(watcher):
    """Return last_query(pid): the last statement a backend ran ("" once it is gone)."""

    def last_query(pid: int) -> str:
        watcher.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,))
        row = watcher.fetchone()
        return row[0] if row else ""

    return last_query


def test_a_pooled_connection_is_checked_out_without_a_round_trip_and_a_cut_one_is_replaced(settings, watcher, last_query):
    import models

    pool = models.PostgresqlPool(**url_parse(settings.database_url), max_connections=2)
    with pool.connection_context():
        pid = pool.execute_sql("SELECT pg_backend_pid()").fetchone()[0]
        pool.execute_sql("SELECT 'the last words before check-in'")
    assert last_query(pid) == "SELECT 'the last words before check-in'"
    with pool.connection_context():
        # Checked out again: nothing was sent to see that it lives.
        assert last_query(pid) == "SELECT 'the last words before check-in'"
        assert pool.execute_sql("SELECT pg_backend_pid()").fetchone()[0] == pid
    watcher.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert wait_until(lambda: last_query(pid) == "", timeout=30)
    with pool.connection_context():
        # The cut one said so on its socket: discarded at check-out, a new one opened, no error.
        assert pool.execute_sql("SELECT pg_backend_pid()").fetchone()[0] != pid
    pool.close_all()


def test_a_request_takes_a_pooled_connection_and_gives_it_back_and_a_broken_one_is_closed(settings, watcher, last_query):
    import models

    models.bind(settings.database_url)

    def request(sql: str) -> int:
        # What api.app does around a request: check_out before, give_back after.
        models.check_out()
        pid = models.db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]
        models.db.execute_sql(sql)
        models.give_back()
        return pid

    try:
        pid = request("SELECT 'the first request'")
        assert models.db.is_closed()  # back in the pool
        assert request("SELECT 'the second request'") == pid
        assert models.check_out()
        assert not models.check_out()  # already held: a check-out inside another keeps it
        with models.db.atomic():  # a request's transaction ends with it
            models.db.execute_sql("SELECT 1")
        models.give_back()

        watcher.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert wait_until(lambda: last_query(pid) == "", timeout=30)
        # The cut one said so on its socket: replaced before the next request's first query, no error.
        new_pid = request("SELECT 'after the cut'")
        assert new_pid != pid

        # A connection whose work failed on the database's side is closed, not pooled again.
        with pytest.raises(models.peewee.DatabaseError), models.connection():
            models.db.execute_sql("SELECT 1/0")
        assert models.db.is_closed()
        assert wait_until(lambda: last_query(new_pid) == "", timeout=30)
    finally:
        models.give_back()
