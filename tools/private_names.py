"""Find the product's reads and overrides of libraries' private names (`_x`, not `__x__`).

`python -m tools.private_names` prints each finding by library and fails (exit 1) if there is any; `--libraries
peewee,psycopg` fails only on those libraries' findings; `--report` only prints. One ast pass over every .py under
riskapi/, api/, handlers/, services/, webhooks/, jobs/, models/ and foundation/; nothing is imported, and names, not
types, are compared. The issue's rule:
an attribute with a leading underscore that the product never defines is a library's private name.
- The product defines its functions', classes' and parameters' names (keyword ones too), the names it assigns at
  module or class level, its import aliases (`import x as _y`), the names in its `__slots__`, and the attributes it
  assigns on `self`/`cls` or on a class of its own (`Cache._x = ...`).
- A class is based on a library when a base is imported from outside the product (`peewee.Model`, `from rq import
  SimpleWorker`) or is a product class (by name) based on a library. There a private method, class attribute or
  `self._x = ...` is an *override*, unless the product defines the name outside such classes, or uses it itself
  and never through `super()`: a helper the library neither has nor calls (so a library attribute the product both
  sets and reads on `self` passes for its own).
- A *read* is `x._x` or `getattr`/`hasattr(x, "_x")` of a name the product does not define, and `from lib import
  _x`; `x._x = ...` (x not `self`/`cls`), `setattr` and `delattr` are overrides. On a receiver that plainly is a
  library's (a name imported from it, a parameter annotated with one of its third-party classes, `super()` in a
  class based on it) a name counts even when the product defines it.
- PUBLIC allows, whatever the receiver, the names a library documents as public despite the underscore, each with
  the page that says so. Nothing undocumented goes in it.
A finding's library (a top-level package, or the one PART_OF says ships it) is, for an override in a class based on
a library, the base's; for any other, its receiver's (as above, or `self`/`cls` in a class based on a library), else
the one third-party library its module imports, else "unknown". `--libraries` fails on the findings of those
libraries, and on the "unknown" ones of modules that import one of them.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("riskapi", "api", "handlers", "services", "webhooks", "jobs", "models", "foundation")
OWN_PACKAGES = frozenset({*PRODUCT, "spec"})  # the project's import names: no library
PART_OF = {"playhouse": "peewee"}  # Peewee's extensions, shipped in the peewee distribution
PUBLIC = {  # name -> (library, the page documenting it as public)
    "_meta": ("peewee", "https://docs.peewee-orm.com/en/latest/peewee/models.html#model-options-and-table-metadata"),
}
REFLECTION = {"getattr": "read", "hasattr": "read", "setattr": "override", "delattr": "override"}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPES = (*FUNCTIONS, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True, order=True)
class Finding:
    """One read or override of a library's private name."""

    library: str
    path: str
    line: int
    name: str
    kind: str
    imports: frozenset[str] = field(default=frozenset(), compare=False, repr=False)  # the libraries its module imports


@dataclass
class Module:
    """One product module: its tree, each node's parent, and the library (None: the product) of each imported name."""

    path: str
    tree: ast.Module
    parents: dict[ast.AST, ast.AST]
    imports: dict[str, str | None]

    @property
    def libraries(self) -> frozenset[str]:
        """Return the libraries the module imports."""
        return frozenset(filter(None, self.imports.values()))

    def enclosing(self, node: ast.AST, kinds: tuple[type, ...] = SCOPES) -> ast.AST | None:
        """Return the nearest enclosing node of the given kinds, None at module level."""
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, kinds):
                return node
        return None


def is_private(name: str) -> bool:
    """Tell whether a name is private (`_x`, not `__x__`)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def library_of(module: str) -> str | None:
    """Return the library a dotted module name belongs to, None for the project's own."""
    top = module.partition(".")[0]
    return None if top in OWN_PACKAGES else PART_OF.get(top, top)


def load(path: Path, root: Path) -> Module:
    """Parse one module and map the names it imports to their libraries."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    imports: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.update({a.asname or a.name.partition(".")[0]: library_of(a.name) for a in node.names})
        elif isinstance(node, ast.ImportFrom):
            imports.update({a.asname or a.name: None if node.level else library_of(node.module or "") for a in node.names})
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    return Module(path.relative_to(root).as_posix(), tree, parents, imports)


def use_of(node: ast.AST) -> tuple[str, str, ast.expr] | None:
    """Return the private name a node reads or overrides, how, and on what receiver; None if it uses none."""
    name: object = ""
    kind, receiver = "read", None
    if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
        name, kind, receiver = node.attr, "read" if isinstance(node.ctx, ast.Load) else "override", node.value
    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):  # a store on self/cls: a definition
        name, receiver = node.attr, node.value
    elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in REFLECTION and len(node.args) > 1:
        name, kind, receiver = getattr(node.args[1], "value", None), REFLECTION[getattr(node.func, "id", "")], node.args[0]
    return (name, kind, receiver) if isinstance(name, str) and is_private(name) and receiver is not None else None


class Product:
    """The product's modules, the names it defines, and the private names it defines in classes based on libraries."""

    def __init__(self, modules: list[Module]) -> None:
        self.modules = modules
        self.classes: dict[str, list[tuple[Module, ast.ClassDef]]] = {}
        for m in modules:
            for cls in (n for n in ast.walk(m.tree) if isinstance(n, ast.ClassDef)):
                self.classes.setdefault(cls.name, []).append((m, cls))
        self.based: dict[ast.ClassDef, str | None] = {}
        self.own: set[str] = set()
        self.candidates: list[tuple[Module, int, str, str]] = []  # (module, line, name, library): maybe overrides
        self.super_used: dict[str, bool] = {}  # attribute the product reads -> whether ever through super()
        for m in modules:
            for node in ast.walk(m.tree):
                self.define(m, node)
        names = {name for _, _, name, _ in self.candidates}
        self.overridden = {name for name in names - self.own if self.super_used.get(name, True)}
        self.own |= names - self.overridden

    def class_library(self, m: Module, node: ast.AST | None) -> str | None:
        """Return the library a class is based on (directly or through product classes), None if none."""
        if not isinstance(node, ast.ClassDef):
            return None
        if node not in self.based:
            self.based[node] = None  # a cycle of names ends here
            for base in node.bases:
                root = base.value if isinstance(base, ast.Subscript) else base
                while isinstance(root, ast.Attribute):
                    root = root.value
                name = base.attr if isinstance(base, ast.Attribute) else getattr(root, "id", "")
                inherited = (self.class_library(*c) for c in self.classes.get(name, []))
                self.based[node] = m.imports.get(getattr(root, "id", "")) or next(filter(None, inherited), None)
                if self.based[node]:
                    break
        return self.based[node]

    def define(self, m: Module, node: ast.AST) -> None:
        """Note what one node defines or may override, and whether it reads an attribute through super()."""
        if isinstance(node, ast.arg | ast.alias):
            self.own.add(node.arg if isinstance(node, ast.arg) else node.asname or "")
            return
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            through_super = isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "super"
            self.super_used[node.attr] = self.super_used.get(node.attr, False) or through_super
            return
        receiver = getattr(getattr(node, "value", None), "id", None) if isinstance(node, ast.Attribute) else None
        if receiver in ("self", "cls"):
            name, lib = getattr(node, "attr", ""), self.class_library(m, m.enclosing(node, (ast.ClassDef,)))
        elif receiver in self.classes and receiver not in m.imports:  # a class of the product's own
            name, lib = getattr(node, "attr", ""), None
        elif isinstance(node, (*FUNCTIONS, ast.ClassDef)) or (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)):
            scope = m.enclosing(node)
            if isinstance(node, ast.Name) and scope is not None and not isinstance(scope, ast.ClassDef):
                return  # a local variable
            name, lib = getattr(node, "name", getattr(node, "id", "")), self.class_library(m, scope)
        else:
            return  # a store on anything else defines nothing: it is found as an override
        if name == "__slots__":
            value = getattr(m.parents[node], "value", None) or ast.Pass()
            self.own.update(c.value for c in ast.walk(value) if isinstance(c, ast.Constant) and isinstance(c.value, str))
        if lib and is_private(name):
            self.candidates.append((m, getattr(node, "lineno", 0), name, lib))
        else:
            self.own.add(name)

    def trace(self, m: Module, receiver: ast.expr, at: ast.AST) -> tuple[str | None, bool]:
        """Return the library a receiver belongs to, and whether it plainly does."""
        while isinstance(receiver, ast.Attribute | ast.Subscript | ast.Call):
            if isinstance(receiver, ast.Call) and getattr(receiver.func, "id", "") == "super":
                lib = self.class_library(m, m.enclosing(at, (ast.ClassDef,)))
                return lib, lib is not None
            receiver = receiver.func if isinstance(receiver, ast.Call) else receiver.value
        if not isinstance(receiver, ast.Name):
            return None, False
        if receiver.id in ("self", "cls"):
            return self.class_library(m, m.enclosing(at, (ast.ClassDef,))), False
        function = m.enclosing(at, FUNCTIONS)
        while isinstance(function, FUNCTIONS):
            for arg in (a for a in ast.walk(function.args) if isinstance(a, ast.arg) and a.arg == receiver.id):
                names = (n.id for n in ast.walk(arg.annotation or ast.Pass()) if isinstance(n, ast.Name))
                lib = next((lib for lib in map(m.imports.get, names) if lib and lib not in sys.stdlib_module_names), None)
                return lib, lib is not None  # a parameter, plainly the library's if annotated with a third-party class
            function = m.enclosing(function, FUNCTIONS)
        lib = m.imports.get(receiver.id)
        return lib, lib is not None

    def findings(self) -> list[Finding]:
        """Return every read and override of a library's private name, sorted by library."""
        found = {Finding(lib, m.path, line, name, "override", m.libraries) for m, line, name, lib in self.candidates}
        found = {f for f in found if f.name in self.overridden}
        for m in self.modules:
            third_party = sorted(lib for lib in m.libraries if lib not in sys.stdlib_module_names)
            fallback = third_party[0] if len(third_party) == 1 else "unknown"
            for node in ast.walk(m.tree):
                if isinstance(node, ast.ImportFrom) and not node.level and (lib := library_of(node.module or "")):
                    found |= {
                        Finding(lib, m.path, node.lineno, a.name, "read", m.libraries) for a in node.names if is_private(a.name)
                    }
                elif (use := use_of(node)) and use[0] not in PUBLIC:
                    lib, plain = self.trace(m, use[2], node)
                    if plain or use[0] not in self.own:
                        found.add(Finding(lib or fallback, m.path, getattr(node, "lineno", 0), use[0], use[1], m.libraries))
        return sorted(found)


def build(root: Path = ROOT, folders: tuple[str, ...] = PRODUCT) -> list[Finding]:
    """Read every module under the product's folders and return the findings."""
    paths = sorted(path for folder in folders for path in (root / folder).rglob("*.py"))
    return Product([load(path, root) for path in paths]).findings()


def check(findings: list[Finding], libraries: set[str] | None = None, out: TextIO = sys.stdout) -> list[Finding]:
    """Print the findings by library; return those that fail: all, or those of the libraries asked for."""
    print(f"private names of libraries read or overridden: {len(findings)}", file=out)
    for library in sorted({f.library for f in findings}):
        group = [f for f in findings if f.library == library]
        reads = sum(f.kind == "read" for f in group)
        print(f"  {library}: {len(group)} ({reads} reads, {len(group) - reads} overrides)", file=out)
        for f in group:
            print(f"    {f.path}:{f.line} {f.name} ({f.kind})", file=out)
    if libraries is None:
        return findings
    failing = [f for f in findings if f.library in libraries or (f.library == "unknown" and f.imports & libraries)]
    print(f"of {', '.join(sorted(libraries))} (or unknown, in modules importing one): {len(failing)}", file=out)
    return failing


def main(argv: list[str] | None = None) -> int:
    """Run the check; exit 1 on a finding in scope, unless only a report is asked for."""
    parser = argparse.ArgumentParser(prog="python -m tools.private_names", description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="print the findings only; never fail")
    parser.add_argument("--libraries", help="comma-separated top-level packages: fail only on their findings")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository to read (default: this one)")
    options = parser.parse_args(argv)
    libraries = None if options.libraries is None else {PART_OF.get(n, n) for n in options.libraries.split(",") if n}
    failing = check(build(options.root.resolve()), libraries)
    if options.report or not failing:
        return 0
    print(f"private names: FAILED: {len(failing)} reads or overrides of libraries' private names in scope", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
