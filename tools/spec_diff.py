"""Compare two versions of the whole document: operations, parameters (filters, sorts, includes), bodies, responses, events.

No generic diff tool reads this spec's events (the `x-event-types` catalogue and the `callbacks`,
oasdiff#1160/#1161) or knows that `filter[x]` is a filter: these rules are the project's own. Each
schema is compared by tools.spec_schema_diff, as a request (what a client sends) or as a response
(what a client, or a webhook's receiver, reads).
"""

from __future__ import annotations

from typing import Any

from tools import spec_doc
from tools.spec_changes import Changes
from tools.spec_doc import deref, escape
from tools.spec_schema_diff import Walk


def _parameters(doc: dict, shared: list, op: dict, pointer: str) -> dict[tuple[str, str], tuple[dict, str]]:
    """Return {(in, name): (parameter, pointer)} of an operation, its own overriding its path's."""
    found = {}
    for index, param in enumerate(shared):
        param, where = deref(doc, param, f"{pointer.rsplit('/', 1)[0]}/parameters/{index}")
        found[(param["in"], param["name"])] = (param, where)
    for index, param in enumerate(op.get("parameters") or []):
        param, where = deref(doc, param, f"{pointer}/parameters/{index}")
        found[(param["in"], param["name"])] = (param, where)
    return found


def _noun(name: str) -> tuple[str, str]:
    """Return what a query parameter is to a client (filter, sort, include or parameter) and its name."""
    match = spec_doc.FILTER.match(name)
    return ("filter", match.group(1)) if match else ("parameter", name)


class Diff:
    """The comparison of an old and a new document."""

    def __init__(self, old: dict, new: dict) -> None:
        self.old, self.new, self.changes = old, new, Changes()

    def walk(self, request: bool, context: str, enum_noun: str = "enum value") -> Walk:
        return Walk(self.old, self.new, self.changes, request, context, enum_noun)

    def run(self) -> Changes:
        """Compare everything; return the changes."""
        before = {(path, method): (op, shared) for path, method, op, shared in spec_doc.operations(self.old)}
        after = {(path, method): (op, shared) for path, method, op, shared in spec_doc.operations(self.new)}
        for (path, method), (op, _shared) in before.items():
            if (path, method) not in after:
                label = f"{method.upper()} {path}"
                self.changes.add(
                    "removed", True, "operation removed", f"{op.get('operationId', label)} ({label})", pointer_of(path, method)
                )
        for (path, method), (op, shared) in after.items():
            where = pointer_of(path, method)
            if (path, method) not in before:
                self.changes.add("added", False, "operation added", f"{op.get('operationId')} ({method.upper()} {path})", where)
                continue
            old_op, old_shared = before[(path, method)]
            name = op.get("operationId") or f"{method.upper()} {path}"
            if op.get("deprecated") and not old_op.get("deprecated"):
                self.changes.add("deprecated", False, "operation deprecated", name, where)
            self.parameters(name, _parameters(self.old, old_shared, old_op, where), _parameters(self.new, shared, op, where))
            self.request_body(name, old_op, op, where)
            self.responses(name, old_op, op, where)
            self.callbacks(name, old_op, op, where)
        self.events()
        return self.changes

    def parameters(self, name: str, before: dict, after: dict) -> None:
        for key, (param, where) in before.items():
            if key not in after:
                noun, shown = _noun(param["name"])
                self.changes.add("removed", True, f"{noun} removed from a request", f"`{shown}` ({param['in']})", where, name)
        for key, (param, where) in after.items():
            noun, shown = _noun(param["name"])
            if key not in before:
                required = bool(param.get("required"))
                rule = f"new required {noun}" if required else f"{noun} added"
                self.changes.add("added", required, rule, f"`{shown}` ({param['in']})", where, name)
                continue
            old, old_where = before[key]
            if param.get("required") and not old.get("required"):
                self.changes.add("changed", True, f"{noun} newly required", f"`{shown}` ({param['in']})", where, name)
            if param.get("deprecated") and not old.get("deprecated"):
                self.changes.add("deprecated", False, f"{noun} deprecated", f"`{shown}` ({param['in']})", where, name)
            values = param["name"] if param["name"] in {"sort", "include"} else "enum value"
            walk = self.walk(True, f"{name} {noun} {param['name']}", values)
            walk.compare(old.get("schema"), f"{old_where}/schema", param.get("schema"), f"{where}/schema")

    def request_body(self, name: str, old_op: dict, op: dict, where: str) -> None:
        old, old_where = deref(self.old, old_op.get("requestBody") or {}, f"{where}/requestBody")
        new, new_where = deref(self.new, op.get("requestBody") or {}, f"{where}/requestBody")
        if new.get("required") and not old.get("required"):
            self.changes.add("changed", True, "request body newly required", name, new_where, name)
        self.content(name, "request", True, old, old_where, new, new_where)

    def content(self, name: str, what: str, request: bool, old: dict, old_where: str, new: dict, new_where: str) -> None:
        """Compare the media types of a body (a request's, a response's, a callback's)."""
        old_media, new_media = old.get("content") or {}, new.get("content") or {}
        for mime in old_media:
            if mime not in new_media and new_media or mime not in new_media and not request:
                self.changes.add("removed", True, f"{what} media type removed", mime, f"{old_where}/content/{escape(mime)}", name)
        for mime, media in new_media.items():
            if mime in old_media:
                pointer = f"/content/{escape(mime)}/schema"
                walk = self.walk(request, f"{name} {what}")
                walk.compare(old_media[mime].get("schema"), old_where + pointer, media.get("schema"), new_where + pointer)

    def responses(self, name: str, old_op: dict, op: dict, where: str) -> None:
        old_all, new_all = old_op.get("responses") or {}, op.get("responses") or {}
        old_ok, new_ok = sorted(s for s in old_all if s.startswith("2")), sorted(s for s in new_all if s.startswith("2"))
        if old_ok != new_ok:
            statuses = f"{name}: {', '.join(old_ok) or 'none'} → {', '.join(new_ok) or 'none'}"
            self.changes.add("changed", True, "success status changed", statuses, f"{where}/responses", name)
        for status, response in new_all.items():
            pointer = f"{where}/responses/{escape(status)}"
            if status not in old_all:
                if not status.startswith("2"):
                    self.changes.add("added", False, "response status added", f"{name}: {status}", pointer, name)
                continue
            old, old_where = deref(self.old, old_all[status], pointer)
            new, new_where = deref(self.new, response, pointer)
            for header in old.get("headers") or {}:
                if header not in (new.get("headers") or {}):
                    self.changes.add("removed", True, "response header removed", f"{name} {status}: {header}", old_where, name)
            self.content(name, status, False, old, old_where, new, new_where)
        for status in old_all:
            if status not in new_all and not status.startswith("2"):
                self.changes.add("removed", False, "response status removed", f"{name}: {status}", f"{where}/responses", name)

    def callbacks(self, name: str, old_op: dict, op: dict, where: str) -> None:
        """Compare what a webhook's receiver gets: the callbacks' requests, read as responses are."""
        old_all, new_all = old_op.get("callbacks") or {}, op.get("callbacks") or {}
        for callback, expressions in old_all.items():
            for expression, item in expressions.items():
                for method in (m for m in spec_doc.METHODS if m in item):
                    pointer = f"{where}/callbacks/{escape(callback)}/{escape(expression)}/{method}"
                    new_item = (new_all.get(callback) or {}).get(expression) or {}
                    if method not in new_item:
                        self.changes.add("removed", True, "callback removed", f"{name} {callback}", pointer, name)
                        continue
                    context = f"{name} callback {callback}"
                    old_params = _parameters(self.old, [], item[method], pointer)
                    new_params = _parameters(self.new, [], new_item[method], pointer)
                    for key, (param, at) in old_params.items():
                        if key not in new_params:
                            self.changes.add("removed", True, "callback header removed", f"`{param['name']}`", at, context)
                    old_body, old_at = deref(self.old, item[method].get("requestBody") or {}, f"{pointer}/requestBody")
                    new_body, new_at = deref(self.new, new_item[method].get("requestBody") or {}, f"{pointer}/requestBody")
                    self.content(context, "body", False, old_body, old_at, new_body, new_at)
        for callback in new_all:
            if callback not in old_all:
                self.changes.add(
                    "added", False, "callback added", f"{name} {callback}", f"{where}/callbacks/{escape(callback)}", name
                )

    def events(self) -> None:
        """Compare the event catalogues: an event removed, added, or its payload changed as its receivers read it."""
        old_all = dict(spec_doc.event_types(self.old))
        for pointer, catalogue in spec_doc.event_types(self.new):
            before: dict[str, Any] = old_all.get(pointer, {})
            for event in before:
                if event not in catalogue:
                    self.changes.add("removed", True, "event removed", f"`{event}`", f"{pointer}/{escape(event)}")
            for event, entry in catalogue.items():
                where = f"{pointer}/{escape(event)}"
                if event not in before:
                    self.changes.add("added", False, "event added", f"`{event}`", where)
                    continue
                if entry.get("deprecated") and not before[event].get("deprecated"):
                    self.changes.add("deprecated", False, "event deprecated", f"`{event}`", where)
                walk = self.walk(False, f"event {event}")
                walk.compare(before[event].get("payload"), f"{where}/payload", entry.get("payload"), f"{where}/payload")
        for pointer, catalogue in old_all.items():
            if pointer not in dict(spec_doc.event_types(self.new)):
                for event in catalogue:
                    self.changes.add("removed", True, "event removed", f"`{event}`", f"{pointer}/{escape(event)}")


def pointer_of(path: str, method: str) -> str:
    """Return the JSON pointer of an operation."""
    return f"#/paths/{escape(path)}/{method}"


def compare(old: dict, new: dict) -> Changes:
    """Return the changes from one version of the document to the next."""
    return Diff(old, new).run()
