"""Bootstrap: make a private virtualenv with tox, then run tox.

    python3 dev.py serve   -> tox -e run -- serve (the service on the embedded defaults)
    python3 dev.py test    -> tox                 (tests, lint, spec check, fuzzing)
    python3 dev.py riskapi ARGS -> tox -e run -- ARGS (the `riskapi` command line, e.g. `agency create --name Acme`)

`serve` and `riskapi` share one environment (.tox/run) holding the runtime dependencies alone;
the tests and benches install theirs in tox's other environments.

Extra arguments go to tox, e.g. `python3 dev.py test -e postgres`.
"""

import os
import pathlib
import subprocess
import sys
import venv

ROOT = pathlib.Path(__file__).resolve().parent
VENV = ROOT / ".venv-tox"
TOX = "tox==4.67.15"
RUN_ENV = ROOT / ".tox" / "run"
# Measured on a fresh clone with two cores (the pull request of issue 32 gives the figures); said, not promised.
FIRST_RUN = "riskapi: first run: installing tox and riskapi's runtime environment in .tox/run (about 30 s; later runs reuse it)"


def tox_python() -> pathlib.Path:
    """Return the bootstrap venv's python, creating it with tox on first use."""
    python = VENV / ("Scripts" if os.name == "nt" else "bin") / "python"
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


def main(argv: list[str]) -> int:
    """Run tox for a command."""
    if not argv or argv[0] not in {"serve", "test", "riskapi"}:
        print(__doc__)
        return 2
    rest = argv[1:]
    if argv[0] == "riskapi":
        # Quiet: only the command's own output (its JSON) reaches the terminal.
        args = ["-qq", "-e", "run", "--", *rest]
    elif argv[0] == "serve":
        # `dev.py serve --port 9000` and `dev.py serve -- --port 9000` both reach `riskapi serve`.
        args = ["-e", "run", "--", "serve", *(rest[1:] if rest[:1] == ["--"] else rest)]
    else:
        args = rest
    if argv[0] != "test" and not RUN_ENV.exists():
        # On stderr: a `riskapi` command's stdout stays its JSON alone.
        print(FIRST_RUN, file=sys.stderr, flush=True)
    elif argv[0] != "test" and installed():
        # The install is editable (a path entry to this folder): tox's rebuild of it would change nothing,
        # and takes half of every command's start.
        args = ["--skip-pkg-install", *args]
    return subprocess.call([str(tox_python()), "-m", "tox", "-c", str(ROOT / "tox.ini"), *args], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
