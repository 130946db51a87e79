"""The changes between two versions of the spec: what each is, whether it breaks a client, where it is."""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("added", "changed", "deprecated", "removed")
# How many of the places a change shows in (operations, events) a message lists.
SHOWN_CONTEXTS = 3


@dataclass(frozen=True)
class Change:
    """One change: its kind (KINDS), whether it breaks a client, its rule, what it concerns, and where."""

    kind: str
    breaking: bool
    rule: str
    detail: str
    where: str

    def line(self, contexts: list[str]) -> str:
        """Return the change in one line, naming its place and where it shows."""
        shown = "; ".join(contexts[:SHOWN_CONTEXTS])
        more = f"; and {len(contexts) - SHOWN_CONTEXTS} more" if len(contexts) > SHOWN_CONTEXTS else ""
        return f"{self.rule}: {self.detail} at `{self.where}`" + (f" (in {shown}{more})" if shown else "")


@dataclass
class Changes:
    """The changes found, each once, with every place it shows in (a shared schema shows in many)."""

    found: dict[Change, list[str]] = field(default_factory=dict)

    def add(self, kind: str, breaking: bool, rule: str, detail: str, where: str, context: str = "") -> None:
        """Record a change seen from one context (an operation's request or response, an event)."""
        contexts = self.found.setdefault(Change(kind, breaking, rule, detail, where), [])
        if context and context not in contexts:
            contexts.append(context)

    def breaking(self) -> list[str]:
        """Return a line per breaking change."""
        return [change.line(contexts) for change, contexts in self.found.items() if change.breaking]

    def of_kind(self, kind: str) -> list[str]:
        """Return a line per change of a kind that breaks nothing."""
        return [c.line(contexts) for c, contexts in self.found.items() if c.kind == kind and not c.breaking]

    def __bool__(self) -> bool:
        return bool(self.found)
