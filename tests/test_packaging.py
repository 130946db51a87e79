"""Packaging: the wheel installs nine top-level names (riskapi, api, handlers, services, webhooks, jobs, models,
foundation, spec); nothing else claims them."""

import importlib.metadata
import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL = {"riskapi", "api", "handlers", "services", "webhooks", "jobs", "models", "foundation", "spec"}
# Generic names another distribution could also install; riskapi is ours by name.
GENERIC = {"api", "handlers", "services", "webhooks", "jobs", "models", "foundation", "spec"}


def test_the_wheel_installs_the_nine_top_level_packages_and_nothing_else(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("riskapi-*.whl")
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == TOP_LEVEL, tops
    [top_level] = [name for name in names if name.endswith(".dist-info/top_level.txt")]
    assert set(archive.read(top_level).decode().split()) == TOP_LEVEL
    # Every module of the repository's nine folders is in the wheel (setup.cfg lists the packages one by one).
    sources = {path.relative_to(ROOT).as_posix() for top in TOP_LEVEL for path in (ROOT / top).rglob("*.py")}
    assert sorted(sources - names) == []
    assert "spec/openapi.yaml" in names


def provided_top_level_names(distribution: importlib.metadata.Distribution) -> set[str]:
    """Return the top-level modules and packages a distribution installs: its top_level.txt and its RECORD."""
    names = set((distribution.read_text("top_level.txt") or "").split())
    for file in distribution.files or ():
        first = file.parts[0]
        if first in ("..", "__pycache__") or first.endswith((".dist-info", ".egg-info", ".data")):
            continue
        if len(file.parts) > 1:
            names.add(first)  # a package's folder
        elif file.suffix in (".py", ".so", ".pyd"):
            names.add(file.name.split(".")[0])  # a single-file module, an extension module
    return names


def test_no_other_installed_distribution_provides_our_generic_top_level_names():
    clashes = {}
    for distribution in importlib.metadata.distributions():
        if (distribution.metadata["Name"] or "").lower() == "riskapi":
            continue
        claimed = provided_top_level_names(distribution) & (GENERIC | {"riskapi"})
        if claimed:
            clashes[f"{distribution.metadata['Name']} {distribution.version}"] = sorted(claimed)
    assert clashes == {}, "another distribution installs a top-level name of ours: " + json.dumps(clashes, indent=1)


def test_our_top_level_names_resolve_to_this_repositorys_folders(tmp_path):
    # From another directory, so that the installed environment answers, not the repository root on sys.path.
    code = f"import json, importlib; print(json.dumps({{n: importlib.import_module(n).__file__ for n in {sorted(TOP_LEVEL)!r}}}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    found = {name: Path(path) for name, path in json.loads(out.stdout.splitlines()[-1]).items()}
    assert found == {name: ROOT / name / "__init__.py" for name in TOP_LEVEL}
    # Nothing else on the path holds one of them (a module found earlier on sys.path would shadow ours).
    shadows = []
    for entry in map(Path, filter(None, sys.path)):
        if entry.resolve() == ROOT or not entry.is_dir():
            continue
        for name in TOP_LEVEL:
            if (entry / name / "__init__.py").exists() or (entry / f"{name}.py").exists():
                shadows.append(str(entry / name))
    assert shadows == []


def test_an_editable_install_is_a_path_entry_not_an_import_hook():
    # Static tools (pyright, mypy, editors) read .pth path entries but not import hooks (setuptools'
    # editable finder), which served the old package_dir mapping and hid every layer from them.
    # The installed distribution records how it was installed (an egg-info a build left at the root does not).
    [distribution] = [
        d
        for d in importlib.metadata.distributions()
        if (d.metadata["Name"] or "").lower() == "riskapi" and d.read_text("direct_url.json")
    ]
    if not json.loads(distribution.read_text("direct_url.json") or "{}").get("dir_info", {}).get("editable"):
        return  # installed from a wheel: nothing to serve from the repository
    site = Path(distribution.locate_file(""))
    assert not list(site.glob("__editable___riskapi*finder.py")), "the editable install serves an import hook"
    [pth] = site.glob("__editable__.riskapi*.pth")
    assert [Path(line) for line in pth.read_text().split()] == [ROOT]
