"""Bootstrap: make a private virtualenv with tox, then run tox.

    python3 dev.py serve   -> tox -e serve (the service on the embedded defaults)
    python3 dev.py test    -> tox          (tests, lint, spec check, fuzzing)
    python3 dev.py riskapi ARGS -> the `riskapi` command line (e.g. `agency create --name Acme`)

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


def tox_python() -> pathlib.Path:
    """Return the bootstrap venv's python, creating it with tox on first use."""
    python = VENV / ("Scripts" if os.name == "nt" else "bin") / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
        subprocess.run([str(python), "-m", "pip", "install", "-q", TOX], check=True)
    return python


def main(argv: list[str]) -> int:
    """Run tox for a command."""
    if not argv or argv[0] not in {"serve", "test", "riskapi"}:
        print(__doc__)
        return 2
    rest = argv[1:]
    if argv[0] == "riskapi":
        # Quiet: only the command's own output (its JSON) reaches the terminal.
        args = ["-qq", "-e", "cli", "--", *rest]
    elif argv[0] == "serve":
        # `dev.py serve --port 9000` and `dev.py serve -- --port 9000` both reach `riskapi serve`.
        args = ["-e", "serve", "--", *(rest[1:] if rest[:1] == ["--"] else rest)]
    else:
        args = rest
    return subprocess.call([str(tox_python()), "-m", "tox", "-c", str(ROOT / "tox.ini"), *args], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
