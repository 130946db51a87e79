"""Check the import graph of the project's own modules: no cycles, few imports inside functions, no private names.

`python -m tools.import_graph` prints the figures and fails (exit 1) when a rule breaks;
`--report` only prints them. Every import statement counts, wherever it is: at module top,
inside a function, under `if TYPE_CHECKING:`. An import names the most specific module it can
(`from api import app` names `api.app`; `from spec import resolved` names
`spec`); the parent packages Python also runs on the way are not counted, as in grimp.

Rules (ARCHITECTURE.md, "Layout"):
- no cycle in the module graph;
- no cycle in the folder graph (a folder is a directory holding modules: `riskapi/` and
  `api/` are two folders; an import from a module in one to a module in another is an
  edge between them);
- at most MAX_FUNCTION_IMPORTS imports of the project's own modules inside functions, each with
  a comment on its line or the line before saying why;
- no module imports, or reads through a module, another module's private (`_underscore`) name;
- no folder holds more than MAX_FOLDER_MODULES modules (a wider one is split into subpackages); the
  folders of bench/, toolkit/ and tools/ are counted too, though they are not in the graphs.
Cycles are counted as strongly connected groups: each group is one or more cycles tangled together.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Import name -> folder, relative to the repository root; import names mirror the folders.
PACKAGES = {name: name for name in ("riskapi", "api", "handlers", "services", "webhooks", "jobs", "models", "foundation", "spec")}
MAX_FUNCTION_IMPORTS = 5
# A folder a reader takes in at a glance (ARCHITECTURE.md); `__init__` counts as a module.
MAX_FOLDER_MODULES = 15
# Held to the same width, though outside the import graphs (scripts and helpers around the service): their
# .py files are counted per folder. Not tests/: one flat folder with a test file per feature is pytest's
# convention, and it grows with the features.
SIZED_ONLY = ("bench", "toolkit", "tools")
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


@dataclass
class Use:
    """One use of another module by a module: an import, or a private name it reads."""

    importer: str
    path: str
    line: int
    target: str
    commented: bool = False
    statement: ast.AST | None = field(default=None, repr=False, compare=False)


@dataclass
class Graph:
    """The project's modules, where each lives, and what each imports."""

    folders: dict[str, str] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)
    in_functions: list[Use] = field(default_factory=list)
    private: list[Use] = field(default_factory=list)
    sized_only: dict[str, int] = field(default_factory=dict)  # folder -> modules, for the folders of SIZED_ONLY


def discover(root: Path, packages: dict[str, str]) -> dict[str, Path]:
    """Map each module's dotted name to its file."""
    modules = {}
    for name, folder in packages.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([name, *parts])] = path
    return modules


def commented_lines(source: str) -> set[int]:
    """Return the numbers of the lines that carry a comment."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {token.start[0] for token in tokens if token.type == tokenize.COMMENT}


def known(name: str, modules: dict[str, Path]) -> str | None:
    """Return the longest prefix of a dotted name that is one of the project's modules."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in modules:
            return prefix
    return None


def dotted(node: ast.expr) -> str | None:
    """Return `a.b.c` for a chain of attribute reads on a name, None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def is_private(name: str) -> bool:
    """Tell whether a name is private (`_x`, not `__x__`)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def scan_module(module: str, path: Path, modules: dict[str, Path], root: Path, graph: Graph) -> None:
    """Add one module's imports and private reads to the graph."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    comments = commented_lines(source)
    relpath = path.relative_to(root).as_posix()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    parents: dict[ast.AST, ast.AST] = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    bound: dict[str, str] = {}  # local name -> the module it stands for

    def in_function(node: ast.AST) -> bool:
        while node in parents:
            node = parents[node]
            if isinstance(node, FUNCTIONS):
                return True
        return False

    def use(node: ast.stmt, target: str) -> None:
        if target == module:
            return
        graph.edges[module].add(target)
        if not in_function(node):
            return
        # One statement is one import, however many names it brings.
        if graph.in_functions and graph.in_functions[-1].statement is node:
            if target not in graph.in_functions[-1].target.split(", "):
                graph.in_functions[-1].target += f", {target}"
            return
        said = node.lineno in comments or node.lineno - 1 in comments
        graph.in_functions.append(Use(module, relpath, node.lineno, target, said, node))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = known(alias.name, modules)
                if target is None:
                    continue
                use(node, target)
                local = alias.asname or alias.name.partition(".")[0]
                bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            source_module = known(base, modules)
            if source_module is None:
                continue
            for alias in node.names:
                child = f"{base}.{alias.name}"
                if child in modules:
                    use(node, child)
                    bound[alias.asname or alias.name] = child
                    continue
                use(node, source_module)
                if is_private(alias.name) and source_module != module:
                    graph.private.append(Use(module, relpath, node.lineno, f"{source_module}.{alias.name}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            chain = dotted(node.value)
            if chain is None:
                continue
            head, _, rest = chain.partition(".")
            if head not in bound:
                continue
            owner = ".".join(filter(None, [bound[head], rest]))
            if owner in modules and owner != module:
                graph.private.append(Use(module, relpath, node.lineno, f"{owner}.{node.attr}"))


def folder_sizes(root: Path, tops: tuple[str, ...]) -> dict[str, int]:
    """Count the modules (.py files) of each folder under the given top-level folders."""
    sizes: dict[str, int] = {}
    for top in tops:
        for path in (root / top).rglob("*.py"):
            folder = path.parent.relative_to(root).as_posix() + "/"
            sizes[folder] = sizes.get(folder, 0) + 1
    return sizes


def build(root: Path = ROOT, packages: dict[str, str] = PACKAGES, sized_only: tuple[str, ...] = SIZED_ONLY) -> Graph:
    """Read every module under the packages' folders; count the modules of the folders only sized."""
    modules = discover(root, packages)
    graph = Graph(sized_only=folder_sizes(root, sized_only))
    for module, path in modules.items():
        graph.folders[module] = path.parent.relative_to(root).as_posix() + "/"
        graph.edges[module] = set()
    for module, path in modules.items():
        scan_module(module, path, modules, root, graph)
    return graph


def tangles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected groups of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def one_cycle(group: list[str], edges: dict[str, set[str]]) -> list[str]:
    """Return a shortest cycle through the group's first node, as a path back to it."""
    start = group[0]
    members = set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges[node] & members):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    return group


def folder_edges(graph: Graph) -> dict[str, set[str]]:
    """Lift the module graph to folders."""
    edges: dict[str, set[str]] = {folder: set() for folder in graph.folders.values()}
    for module, targets in graph.edges.items():
        for target in targets:
            if graph.folders[target] != graph.folders[module]:
                edges[graph.folders[module]].add(graph.folders[target])
    return edges


def check(graph: Graph, out=sys.stdout) -> list[str]:
    """Print the figures and return the rules broken."""
    broken = []
    module_groups = tangles(graph.edges)
    folders = folder_edges(graph)
    folder_groups = tangles(folders)
    print(f"module cycles: {len(module_groups)} ({sum(map(len, module_groups))} modules)", file=out)
    for group in module_groups:
        print(f"  {' -> '.join(one_cycle(group, graph.edges))}  [{len(group)} modules tangled: {', '.join(group)}]", file=out)
    print(f"folder cycles: {len(folder_groups)}", file=out)
    for group in folder_groups:
        cycle = one_cycle(group, folders)
        print(f"  {' -> '.join(cycle)}  [{len(group)} folders tangled: {', '.join(group)}]", file=out)
        for before, after in zip(cycle, cycle[1:], strict=False):
            why = sorted(
                f"{m} -> {t}"
                for m, ts in graph.edges.items()
                for t in ts
                if (graph.folders[m], graph.folders[t]) == (before, after)
            )
            print(f"    {before} -> {after}: {', '.join(why)}", file=out)
    uncommented = [use for use in graph.in_functions if not use.commented]
    print(
        f"imports of own modules inside functions: {len(graph.in_functions)} "
        f"(at most {MAX_FUNCTION_IMPORTS}; {len(uncommented)} without a comment saying why)",
        file=out,
    )
    for use in graph.in_functions:
        print(f"  {use.path}:{use.line} {use.target}{'' if use.commented else '  (no comment)'}", file=out)
    print(f"private names imported across modules: {len(graph.private)}", file=out)
    for use in graph.private:
        print(f"  {use.path}:{use.line} {use.target}", file=out)
    sizes: dict[str, int] = {}
    for folder in graph.folders.values():
        sizes[folder] = sizes.get(folder, 0) + 1
    widest = max(sorted(sizes), key=sizes.__getitem__)
    print(f"widest folder: {widest} ({sizes[widest]} modules); {len(graph.folders)} modules in {len(sizes)} folders", file=out)
    if graph.sized_only:
        others = max(sorted(graph.sized_only), key=graph.sized_only.__getitem__)
        print(
            f"widest folder outside the graphs: {others} ({graph.sized_only[others]} modules); "
            f"{sum(graph.sized_only.values())} modules in {len(graph.sized_only)} folders",
            file=out,
        )
    if module_groups:
        broken.append("a cycle in the module graph")
    if folder_groups:
        broken.append("a cycle in the folder graph")
    if len(graph.in_functions) > MAX_FUNCTION_IMPORTS:
        broken.append(f"more than {MAX_FUNCTION_IMPORTS} imports of own modules inside functions")
    if uncommented:
        broken.append("an import inside a function without a comment saying why")
    if graph.private:
        broken.append("a private name imported across modules")
    crowded = sorted(folder for folder, size in {**sizes, **graph.sized_only}.items() if size > MAX_FOLDER_MODULES)
    if crowded:
        broken.append(f"more than {MAX_FOLDER_MODULES} modules in {', '.join(crowded)}")
    return broken


def main(argv: list[str] | None = None) -> int:
    """Run the check; exit 1 when a rule breaks, unless only a report is asked for."""
    parser = argparse.ArgumentParser(prog="python -m tools.import_graph", description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="print the figures only; never fail")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository to read (default: this one)")
    options = parser.parse_args(argv)
    broken = check(build(options.root.resolve()))
    if options.report or not broken:
        return 0
    print("import graph: FAILED: " + "; ".join(broken), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
