"""Compare two versions of a schema as a client sees it: what it may send (request) or must read (response).

A request schema breaks a client when the new one accepts less than the old: a property removed
or newly required, a type, format, pattern, length, range or enum narrowed, null refused. A
response schema (an event payload too: its subscriber reads it) breaks a client when the new one
may produce what the old never did: a property removed, made optional or nullable, retyped, an
enum widened unless the schema says clients must accept unknown values (`x-open-enum: true`).
`oneOf: [X, NullValue]` is read as X, nullable; the branches of `allOf` as one object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tools.spec_changes import Changes
from tools.spec_doc import deref, escape

LOWER_BOUNDS = ("minimum", "minLength", "minItems", "minProperties")
UPPER_BOUNDS = ("maximum", "maxLength", "maxItems", "maxProperties")
EXACT = ("format", "pattern", "multipleOf")
# JSON Schema's formats each of whose values the second takes too (an IRI may be any URI, and more).
WIDER_FORMATS = {("uri", "iri"), ("uri-reference", "iri-reference"), ("email", "idn-email"), ("hostname", "idn-hostname")}


@dataclass
class View:
    """What a schema lets through, whatever its spelling."""

    pointer: str
    types: set[str] | None = None  # None: any type
    nullable: bool = False
    enum: list | None = None
    open_enum: bool = False
    props: dict[str, tuple[Any, str]] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    closed: bool = False  # additionalProperties: false
    items: tuple[Any, str] | None = None
    alternatives: list[tuple[Any, str]] = field(default_factory=list)
    bounds: dict[str, Any] = field(default_factory=dict)
    deprecated: bool = False


def _null_only(schema: Any) -> bool:
    return isinstance(schema, dict) and (schema.get("enum") == [None] or schema.get("type") == "null")


def view(doc: dict, node: Any, pointer: str, depth: int = 0) -> View:
    """Return the view of a schema ($refs followed, allOf merged, a nullable oneOf/anyOf read as its one branch)."""
    node, pointer = deref(doc, node, pointer)
    seen = View(pointer)
    if not isinstance(node, dict) or depth > 32:
        return seen
    kind = node.get("type")
    if kind is not None:
        kinds = {kind} if isinstance(kind, str) else set(kind)
        seen.nullable = "null" in kinds
        seen.types = kinds - {"null"}
    seen.nullable = seen.nullable or node.get("nullable") is True
    seen.enum = node.get("enum")
    seen.open_enum = node.get("x-open-enum") is True
    if seen.enum is not None and None in seen.enum:
        seen.nullable, seen.enum = True, [value for value in seen.enum if value is not None]
    seen.props = {name: (sub, f"{pointer}/properties/{escape(name)}") for name, sub in (node.get("properties") or {}).items()}
    seen.required = set(node.get("required") or [])
    seen.closed = node.get("additionalProperties") is False
    seen.items = (node["items"], f"{pointer}/items") if isinstance(node.get("items"), dict) else None
    seen.bounds = {key: node[key] for key in (*LOWER_BOUNDS, *UPPER_BOUNDS, *EXACT, "uniqueItems") if key in node}
    seen.deprecated = node.get("deprecated") is True
    for index, branch in enumerate(node.get("allOf") or []):
        part = view(doc, branch, f"{pointer}/allOf/{index}", depth + 1)
        seen.props = {**seen.props, **part.props}
        seen.required |= part.required
        seen.types = seen.types if seen.types is not None else part.types
        seen.closed = seen.closed or part.closed
        seen.bounds = {**part.bounds, **seen.bounds}
    for key in ("oneOf", "anyOf"):
        branches = node.get(key) or []
        for index, branch in enumerate(branches):
            if _null_only(deref(doc, branch, "#")[0]):
                seen.nullable = True
            else:
                seen.alternatives.append((branch, f"{pointer}/{key}/{index}"))
    if len(seen.alternatives) == 1 and seen.types is None and not seen.props:
        (branch, where), nullable = seen.alternatives[0], seen.nullable
        seen = view(doc, branch, where, depth + 1)
        seen.nullable = seen.nullable or nullable
    return seen


_GROUP = re.compile(r"\(([^()]*)\)")


def _alternatives_added(old: Any, new: Any) -> bool:
    """Whether a new pattern is the old one with alternatives added to its groups (`(a|b)` -> `(a|b|c)`), so wider."""
    if not isinstance(old, str) or not isinstance(new, str):
        return False
    if _GROUP.sub("()", old) != _GROUP.sub("()", new):
        return False
    pairs = zip(_GROUP.findall(old), _GROUP.findall(new), strict=True)
    return all(set(before.split("|")) <= set(after.split("|")) for before, after in pairs)


def _types(types: set[str] | None) -> str:
    return "any" if types is None else "|".join(sorted(types))


def _within(inner: set[str] | None, outer: set[str] | None) -> bool:
    """Whether every value of the types `inner` is one of `outer` (an integer is a number)."""
    if outer is None:
        return True
    if inner is None:
        return False
    return all(t in outer or (t == "integer" and "number" in outer) for t in inner)


@dataclass
class Walk:
    """Two documents compared from one context: an operation's request or response, an event's payload."""

    old_doc: dict
    new_doc: dict
    changes: Changes
    request: bool
    context: str
    enum_noun: str = "enum value"  # `sort` and `include` parameters name their values so
    stack: set = field(default_factory=set)

    def add(self, kind: str, breaking: bool, rule: str, detail: str, where: str, path: str) -> None:
        side = "request" if self.request else "response"
        self.changes.add(kind, breaking, rule.format(side=side), detail, where, f"{self.context} `{path or '(body)'}`")

    def compare(self, old: Any, old_pointer: str, new: Any, new_pointer: str, path: str = "") -> None:
        """Record the changes between two schemas at a body path."""
        before, after = view(self.old_doc, old, old_pointer), view(self.new_doc, new, new_pointer)
        key = (before.pointer, after.pointer, path)
        if key in self.stack:
            return
        self.stack.add(key)
        self._scalar(before, after, path)
        self._enum(before, after, path)
        self._properties(before, after, path)
        if before.items and after.items:
            self.compare(*before.items, *after.items, f"{path}[]")
        if len(before.alternatives) == len(after.alternatives):
            for (o, op), (n, np) in zip(before.alternatives, after.alternatives, strict=True):
                self.compare(o, op, n, np, path)
        elif (len(after.alternatives) < len(before.alternatives)) == self.request:
            counts = f"{len(before.alternatives)} → {len(after.alternatives)}"
            self.add("changed", True, "{side} alternatives changed", counts, after.pointer, path)
        if after.deprecated and not before.deprecated:
            self.add("deprecated", False, "deprecated", f"`{path.rsplit('.', 1)[-1] or '(body)'}`", after.pointer, path)
        self.stack.discard(key)

    def _scalar(self, before: View, after: View, path: str) -> None:
        where, types = after.pointer, f"{_types(before.types)} → {_types(after.types)}"
        # Named by the property alone: one change of a shared schema reads the same from every context.
        name = f"`{path.rsplit('.', 1)[-1] or '(body)'}`"
        if self.request:
            if not _within(before.types, after.types):
                self.add("changed", True, "request type narrowed", types, where, path)
            if before.nullable and not after.nullable:
                self.add("changed", True, "request no longer accepts null", name, where, path)
            for key in (*EXACT, *LOWER_BOUNDS, *UPPER_BOUNDS):
                old_bound, new_bound = before.bounds.get(key), after.bounds.get(key)
                if new_bound is None or old_bound == new_bound:
                    continue
                # A changed format, pattern or multipleOf, a lower bound raised, an upper bound lowered, or one added.
                looser = old_bound is not None and (
                    (key in LOWER_BOUNDS and new_bound < old_bound) or (key in UPPER_BOUNDS and new_bound > old_bound)
                )
                looser = looser or (key == "pattern" and _alternatives_added(old_bound, new_bound))
                if key == "format" and (old_bound, new_bound) in WIDER_FORMATS:
                    self.add("changed", False, "request format widened", f"{old_bound!r} → {new_bound!r}", where, path)
                elif not looser:
                    self.add("changed", True, f"request {key} narrowed", f"{old_bound!r} → {new_bound!r}", where, path)
            if after.bounds.get("uniqueItems") and not before.bounds.get("uniqueItems"):
                self.add("changed", True, "request items now unique", name, where, path)
            if after.closed and not before.closed:
                self.add("changed", True, "request no longer accepts other properties", name, where, path)
        else:
            if not _within(after.types, before.types):
                self.add("changed", True, "response retyped", types, where, path)
            if after.nullable and not before.nullable:
                self.add("changed", True, "response made nullable", name, where, path)
            if before.bounds.get("format") is not None and before.bounds.get("format") != after.bounds.get("format"):
                formats = f"{before.bounds.get('format')} → {after.bounds.get('format') or 'none'}"
                self.add("changed", True, "response retyped (format)", formats, where, path)

    def _enum(self, before: View, after: View, path: str) -> None:
        old, new, where = before.enum, after.enum, after.pointer
        if old is None and new is None:
            return
        gone = [v for v in old or [] if new is not None and v not in new]
        came = [v for v in new or [] if old is not None and v not in old]
        noun = self.enum_noun
        if self.request:
            if old is None:
                self.add("changed", True, f"request now limited to an enum ({noun}s)", repr(new), where, path)
            if gone:
                self.add("removed", True, f"{noun} removed from a request", ", ".join(map(repr, gone)), where, path)
            if came:
                self.add("added", False, f"{noun} added to a request", ", ".join(map(repr, came)), where, path)
            return
        if new is None or came:
            widened = "any value" if new is None else ", ".join(map(repr, came))
            self.add("added", not after.open_enum, "response enum widened", widened, where, path)
        if gone:
            self.add("removed", False, "response enum value removed", ", ".join(map(repr, gone)), where, path)

    def _properties(self, before: View, after: View, path: str) -> None:
        def at(name: str) -> str:
            return f"{path}.{name}" if path else name

        for name, (_schema, pointer) in before.props.items():
            if name not in after.props:
                self.add("removed", True, "{side} property removed", f"`{name}`", pointer, at(name))
        for name, (schema, pointer) in after.props.items():
            if name not in before.props:
                required = self.request and name in after.required
                rule = "new required request property" if required else "{side} property added"
                self.add("added", required, rule, f"`{name}`", pointer, at(name))
            else:
                self.compare(*before.props[name], schema, pointer, at(name))
        for name in sorted(after.required - before.required):
            if self.request and name in before.props:
                self.add("changed", True, "request property newly required", f"`{name}`", after.pointer, at(name))
        for name in sorted(before.required - after.required):
            if not self.request and name in after.props:
                self.add("changed", True, "response property made optional", f"`{name}`", after.pointer, at(name))
