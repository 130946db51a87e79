"""ARCHITECTURE.md names what exists, and names every module.

How names are read (kept simple on purpose):
- Only inline code spans count: text between single backticks, outside fenced ``` blocks.
- A span is a name when it is a dotted Python name whose first part is one of the roots
  (riskapi, api, handlers, services, webhooks, jobs, models, foundation, spec), e.g. `api.app`, `jobs.relay`,
  `services.listing.page`, `models.atomic`; a trailing `()` is dropped (`spec.resolved()`).
  Anything else (`spec/openapi.yaml`, `RISKAPI_THREADS`, `handlers.*`, `Retry-After`) is prose.
- A name exists when its longest prefix that is a module has a file (name.py or
  name/__init__.py), and the parts after it name something bound at that module's top level
  (a function, a class, a constant, an import), then, for a third part, inside that class.
- A module is named when a name equals it or starts with it and a dot (`jobs.relay.Relay` names
  `jobs.relay`; `api.app` names `api` and `riskapi`). Migration scripts, whose
  file names start with a digit, are loaded by path, never imported by name: they need no mention.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOTS = ("riskapi", "api", "handlers", "services", "webhooks", "jobs", "models", "foundation", "spec")
DOCUMENT = ROOT / "ARCHITECTURE.md"
NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def named() -> set[str]:
    """Return the names the document gives in backticks."""
    text = re.sub(r"^```.*?^```", "", DOCUMENT.read_text(encoding="utf-8"), flags=re.M | re.S)
    names = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        span = span.removesuffix("()")
        if NAME.fullmatch(span) and span.split(".")[0] in ROOTS:
            names.add(span)
    return names


def modules() -> dict[str, Path]:
    """Map every module of the five roots to its file."""
    found = {}
    for root in ROOTS:
        for path in (ROOT / root).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def top_level(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """Return the names a module or class body binds, outside functions (into if/try/with blocks)."""
    bound: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        bound[leaf.id] = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bound[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, ast.If | ast.Try | ast.With):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [handler.body for handler in getattr(node, "handlers", [])]
            for block in blocks:
                bound.update(top_level(block))
    return bound


def exists(name: str, known: dict[str, Path]) -> bool:
    """Tell whether a dotted name is a module, or a name bound in one (or in one of its classes)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if module not in known:
            continue
        rest = parts[end:]
        scope = top_level(ast.parse(known[module].read_text(encoding="utf-8")).body)
        for index, part in enumerate(rest):
            node = scope.get(part)
            if node is None:
                return False
            if index + 1 < len(rest):
                if not isinstance(node, ast.ClassDef):
                    return False
                scope = top_level(node.body)
        return True
    return False


def test_every_name_the_architecture_gives_exists():
    known = modules()
    unknown = sorted(name for name in named() if not exists(name, known))
    assert not unknown, "ARCHITECTURE.md names what the code does not have:\n  " + "\n  ".join(unknown)


def test_every_module_is_named_in_the_architecture():
    names = named()
    missing = sorted(
        module
        for module in modules()
        if module.split(".")[-1].isidentifier() and not any(name == module or name.startswith(module + ".") for name in names)
    )
    assert not missing, "ARCHITECTURE.md does not name these modules:\n  " + "\n  ".join(missing)
