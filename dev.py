"""Bootstrap: make a private virtualenv with tox, then run tox, or riskapi in tox's run environment.

    python3 dev.py serve   -> riskapi serve       (the service on the embedded defaults)
    python3 dev.py test    -> tox                 (tests, lint, spec check, fuzzing)
    python3 dev.py riskapi ARGS -> riskapi ARGS   (the `riskapi` command line, e.g. `agency create --name Acme`)

`serve` and `riskapi` share one environment (.tox/run, made or brought up to date by `tox -e run
--notest` first) holding the runtime dependencies alone; the tests and benches install theirs in
tox's other environments.

dev.py is a well-behaved parent: the SIGINT (Ctrl-C) or SIGTERM it gets reaches the command it runs,
it exits with that command's status (0 for a `serve` or a `listen` stopped by either), and nothing
it started outlives it.

Extra arguments go to tox, e.g. `python3 dev.py test -e postgres`.
"""

import ctypes
import os
import pathlib
import signal
import subprocess
import sys
import types
import venv
from collections.abc import Callable

ROOT = pathlib.Path(__file__).resolve().parent
VENV = ROOT / ".venv-tox"
TOX = "tox==4.67.15"
RUN_ENV = ROOT / ".tox" / "run"
BIN = "Scripts" if os.name == "nt" else "bin"
# Measured on a fresh clone with two cores (the pull request of issue 32 gives the figures); said, not promised.
FIRST_RUN = "riskapi: first run: installing tox and riskapi's runtime environment in .tox/run (about 30 s; later runs reuse it)"
POSIX = os.name == "posix"
# The signals dev.py passes on, and as what. A closed terminal (SIGHUP, which no longer reaches the child, in a
# process group of its own) asks for the same orderly stop as SIGTERM.
FORWARDED: dict[int, int] = {signal.SIGINT: signal.SIGINT, signal.SIGTERM: signal.SIGTERM}
if POSIX:
    FORWARDED[signal.SIGHUP] = signal.SIGTERM


def _find_prctl() -> Callable[..., int] | None:
    """Return libc's prctl, or None where there is none (not Linux)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, TypeError):  # TypeError: Windows, which loads no library by None
        return None


# Looked up here, not in the forked child (jobs.runtime.embedded_redis does the same; dev.py runs before any
# dependency is installed, so it cannot import it).
_PRCTL = _find_prctl()


def _die_with_parent() -> None:
    """In the forked child: have Linux SIGTERM it if dev.py dies without passing a stop on (a SIGKILL)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def tox_python() -> pathlib.Path:
    """Return the bootstrap venv's python, creating it with tox on first use."""
    python = VENV / BIN / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
        subprocess.run([str(python), "-m", "pip", "install", "-q", TOX], check=True)
    return python


def installed() -> bool:
    """Tell whether .tox/run was set up after the last change to what declares the package and its dependencies."""
    info = RUN_ENV / ".tox-info.json"  # tox writes it when it makes the environment or changes its dependencies
    if not info.exists():
        return False
    made = info.stat().st_mtime
    return all((ROOT / name).stat().st_mtime < made for name in ("setup.cfg", "pyproject.toml"))


class Parent:
    """Runs one child at a time in a process group of its own, and passes it the SIGINT and SIGTERM dev.py gets.

    In a group of its own, the child hears a stop once, from dev.py, whether the stop was a `kill` of dev.py
    (a process manager, a script) or the terminal's Ctrl-C, which the terminal sends to dev.py's group only.
    (In dev.py's group it would hear Ctrl-C twice, and uvicorn takes a second SIGINT as "skip the graceful stop".)
    The signal goes to the child alone, not its group: `serve` stops what it started in order (the worker, then
    the embedded Redis, which shares its group), and tox interrupts its own command. What is left in the group
    once the child has exited is killed.
    """

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.stopped: int | None = None  # the signal that asked dev.py to stop, if one did

    def __enter__(self) -> "Parent":
        # Installed even over an inherited SIG_IGN (a background job of a script): a stop asked of dev.py is always passed on.
        self.previous = {signum: signal.signal(signum, self._forward) for signum in FORWARDED}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def run(self, command: list[str], env: dict[str, str] | None = None) -> int:
        """Run a command and return its exit status (128 + N for a child killed by signal N, as a shell says)."""
        if self.stopped is not None:
            return 128 + self.stopped  # asked to stop before this step began: it does not begin
        child = subprocess.Popen(
            command, cwd=ROOT, env=env, process_group=0 if POSIX else None, preexec_fn=_die_with_parent if POSIX else None
        )
        self.child = child
        if self.stopped is not None:
            self._signal(child, self.stopped)  # it came while the child was being started
        try:
            code = child.wait()
        finally:
            self.child = None
            if POSIX:
                # What the child left in its group (tox's pip, say) goes with it: nothing started here outlives dev.py.
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        return 128 - code if code < 0 else code

    def _forward(self, signum: int, frame: types.FrameType | None) -> None:
        self.stopped = signum
        if self.child is not None:
            self._signal(self.child, signum)

    @staticmethod
    def _signal(child: subprocess.Popen, signum: int) -> None:
        # Windows' console sends Ctrl-C to every process attached to it, the child included; there,
        # send_signal(SIGTERM) is terminate().
        if POSIX or signum != signal.SIGINT:
            child.send_signal(FORWARDED[signum])  # nothing, once the child has been reaped


def main(argv: list[str]) -> int:
    """Run tox for a command, or riskapi in tox's run environment."""
    if not argv or argv[0] not in {"serve", "test", "riskapi"}:
        print(__doc__)
        return 2
    rest = argv[1:]
    with Parent() as parent:
        tox = [str(tox_python()), "-m", "tox", "-c", str(ROOT / "tox.ini")]
        if argv[0] == "test":
            return parent.run([*tox, *rest])
        # `dev.py serve --port 9000` and `dev.py serve -- --port 9000` both reach `riskapi serve`.
        args = ["serve", *(rest[1:] if rest[:1] == ["--"] else rest)] if argv[0] == "serve" else rest
        if not installed():
            if not RUN_ENV.exists():
                # On stderr: a `riskapi` command's stdout stays its JSON alone.
                print(FIRST_RUN, file=sys.stderr, flush=True)
            # Quiet for `riskapi`: only the command's own output (its JSON) reaches stdout.
            quiet = ["-qq"] if argv[0] == "riskapi" else []
            code = parent.run([*tox, *quiet, "-e", "run", "--notest"])
            if code != 0:
                return code
        # The environment made, riskapi runs without tox in between: tox would add its start, its teardown lines
        # after a Ctrl-C, and a stop of its own (SIGTERM 0.3 s after its SIGINT, SIGKILL 0.2 s later) that cuts
        # short serve's orderly stop of its worker and Redis. Its environment variables are as `activate` sets them.
        bin_dir = RUN_ENV / BIN
        env = dict(os.environ, VIRTUAL_ENV=str(RUN_ENV), PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
        return parent.run([str(bin_dir / "riskapi"), *args], env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
