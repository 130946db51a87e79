"""Rows as the database driver gives them, and the envelopes read out of them by readers written once per layout.

A list page of 50 drivers read each row into a dict (26 columns), then each envelope part out of it
through itemgetter, a list and zip: 6.8 µs a row, 18 % of a page's API CPU (2026-11-27). The rows of one
query share their Columns; a reader, written once for a layout of columns and a shape of envelope, reads
a row's tuple by position in one dict display (1.1 µs for a driver's `data`, against 2.8).
"""

from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

from riskapi.services.json_values import Convert, plain

Reader = Callable[[tuple], dict]


class Column(NamedTuple):
    """A value of a reader's shape: the column named `key`, shown through `convert`."""

    key: str
    convert: Convert


# A reader's shape: each key's Column, a nested shape, or a constant (text or None: shared by every row).
Shape = dict[str, Any]


class Columns:
    """The columns of one query's rows: each name's position, and the readers written for them."""

    __slots__ = ("positions", "readers")

    def __init__(self, names: list[str]) -> None:
        self.positions = {name: position for position, name in reversed(list(enumerate(names)))}  # a repeat: its first
        self.readers: dict[Hashable, Reader | None] = {}

    def reader(self, token: Hashable, shape: Callable[[Any], Shape]) -> Reader | None:
        """Return the reader of shape(token) for these columns (written once per token), or None when a column is missing."""
        try:
            return self.readers[token]
        except KeyError:
            written = self.readers[token] = _write(shape(token), self.positions)
            return written


class Row:
    """A row as the driver gave it, read by name like a dict (`row["id"]`, `row.get(name)`)."""

    __slots__ = ("columns", "values")

    def __init__(self, columns: Columns, values: tuple) -> None:
        self.columns, self.values = columns, values

    def __getitem__(self, name: str) -> Any:
        return self.values[self.columns.positions[name]]

    def __contains__(self, name: object) -> bool:
        return name in self.columns.positions

    def get(self, name: str, default: Any = None) -> Any:
        """Return a column's value, or default when the row has no such column."""
        position = self.columns.positions.get(name)
        return default if position is None else self.values[position]


def _write(shape: Shape, positions: dict[str, int]) -> Reader | None:
    """Write the function `read(values) -> dict` of a shape: one dict display, values read by position."""
    namespace: dict[str, Any] = {}
    try:
        display = _display(shape, positions, namespace)
    except KeyError:
        return None
    # Only positions (ints) and names of this namespace are written into the text; keys are repr()s.
    exec(f"def read(v):\n    return {display}\n", namespace)  # noqa: S102 - text written from the shape alone, as dataclasses do
    read: Reader = namespace["read"]
    return read


def _display(shape: Shape, positions: dict[str, int], namespace: dict[str, Any]) -> str:
    items = []
    for key, part in shape.items():
        if isinstance(part, dict):
            value = _display(part, positions, namespace)
        elif isinstance(part, Column):
            value = f"v[{positions[part.key]}]"
            if part.convert is not plain:
                name = f"c{len(namespace)}"
                namespace[name] = part.convert
                value = f"{name}({value})"
        elif part is None or isinstance(part, str):
            value = f"k{len(namespace)}"
            namespace[value] = part
        else:
            raise TypeError(f"a reader's shape holds Columns, shapes, text or None, not {part!r}")
        items.append(f"{key!r}: {value}")
    return "{" + ", ".join(items) + "}"
