"""py-spy around a workload: record processes (the thread holding the GIL) and print where their time goes."""

import collections
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# The packages of this project: their modules get a line of their own in the table by module.
PROJECT = ("riskapi/", "api/", "handlers/", "services/", "webhooks/", "jobs/", "models/", "foundation/", "spec/")
_LINE = re.compile(r":\d+\)$")
# py-spy's frames for the process tree (--subprocesses) lead the stack; a command line may hold `;` but not `"`.
_PROCESSES = re.compile(r'((?:process \d+:"[^"]*";)*)(.*)')
_COMMAND = re.compile(r'process \d+:"([^"]*)";')


def executable() -> str:
    """Return py-spy: beside this interpreter (pip install py-spy), else on the PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if not found:
        raise RuntimeError("py-spy is not installed: pip install py-spy")
    return found


class Recording:
    """One `py-spy record --gil` of a process and its children, raw collapsed stacks to a file, until stop()."""

    def __init__(self, pid: int, out: Path, rate: int, seconds: float | None = None):
        argv = [executable(), "record", "-p", str(pid), "--subprocesses", "-r", str(rate), "-f", "raw", "-o", str(out),
                "--nonblocking", "-t", "--gil"]  # fmt: skip
        if seconds:
            argv += ["-d", str(max(1, round(seconds)))]
        self.out = out
        self.log = Path(tempfile.mkstemp(prefix="py-spy-", suffix=".log")[1])
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop(self, timeout: float = 60.0) -> Path:
        """Ask py-spy to write what it sampled (SIGINT, as Ctrl-C) unless it is done, and wait for it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        said = self.log.read_text(errors="replace")
        self.log.unlink(missing_ok=True)
        if not self.out.exists():
            raise RuntimeError(f"py-spy wrote no profile:\n{said[-2000:]}")
        return self.out


def role(command: str) -> str:
    """Name what a process does from its command line (py-spy's `process PID:"..."` frame)."""
    if "riskapi.sockets" in command or " serve" in command or "uvicorn" in command:
        return "api"
    if " worker" in command:
        return "worker"
    return "other"


def module_of(frame: str) -> str:
    """Return where a frame's code lives: a project module's path, else the top package or stdlib module."""
    inside = frame[frame.rfind(" (") + 2 : -1] if frame.endswith(")") else ""
    if inside.startswith(PROJECT):
        return inside.rsplit(":", 1)[0]
    return inside.split("/", 1)[0].removesuffix(".py") or "?"


class Profile:
    """Samples per role, with self and inclusive counts by function and by module."""

    def __init__(self):
        self.total: collections.Counter = collections.Counter()
        self.selfs: dict = collections.defaultdict(collections.Counter)
        self.incl: dict = collections.defaultdict(collections.Counter)
        self.modules: dict = collections.defaultdict(collections.Counter)
        self.module_incl: dict = collections.defaultdict(collections.Counter)
        self.project_incl: dict = collections.defaultdict(collections.Counter)

    def add(self, path: Path) -> "Profile":
        """Add the collapsed stacks of one raw py-spy file."""
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            processes, rest = _PROCESSES.match(stack).groups()
            commands = _COMMAND.findall(processes)
            who = role(commands[-1]) if commands else "other"
            frames = [_LINE.sub(")", frame) for frame in rest.split(";") if not frame.startswith("thread (")]
            if not frames:
                continue
            samples = int(count)
            self.total[who] += samples
            self.selfs[who][frames[-1]] += samples
            self.modules[who][module_of(frames[-1])] += samples
            for frame in set(frames):
                self.incl[who][frame] += samples
            ours = {frame for frame in frames if frame[frame.rfind(" (") + 2 :].startswith(PROJECT)}
            for frame in ours:
                self.project_incl[who][frame] += samples
            for module in {module_of(frame) for frame in ours}:
                self.module_incl[who][module] += samples
        return self

    def print(self, top: int = 25) -> None:
        """Print, for each role, the share of its samples by function and by module (self and inclusive)."""
        everything = sum(self.total.values())
        print(f"{everything} samples in all: " + ", ".join(f"{who} {n / everything:.0%}" for who, n in self.total.most_common()))
        for who, total in self.total.most_common():
            print(f"\n=== {who}: {total} samples (GIL held); shares of them")
            tables = [
                ("self, by function", self.selfs[who]),
                ("inclusive, by function", self.incl[who]),
                ("inclusive, by function of this project", self.project_incl[who]),
                ("self, by module (a project module, else its package)", self.modules[who]),
                ("inclusive, by project module", self.module_incl[who]),
            ]
            for title, counts in tables:
                print(f"--- {title}")
                for name, n in counts.most_common(top):
                    print(f"{100 * n / total:5.1f}% {name}")
