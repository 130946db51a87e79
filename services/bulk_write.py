"""The one path of every bulk write: the body's schema errors, then the write's database rules, then one atomic write.

A write (risk data's in services.risk_data_rules, webhooks' in handlers.webhooks) has two steps:
`plan(body, errors)` records what breaks a rule and returns what to write; `apply(planned)` writes it
and returns the response items. Both run again inside the transaction, so the checks see what they guard.
"""

from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import peewee

from foundation.exceptions import ApiError, ValidationFailed
from foundation.messages import message
from models import atomic

# PostgreSQL's deadlock_detected and serialization_failure: the transaction can simply run again.
_RETRYABLE = {"40P01", "40001"}

T = TypeVar("T")


class Errors(dict[str, list[str]]):
    """Validation errors keyed by dotted path."""

    def add(self, path: str, message: str) -> None:
        """Record one message for a path."""
        messages = self.setdefault(path, [])
        if message not in messages:
            messages.append(message)

    def clean(self, path: str) -> bool:
        """Tell whether nothing at or under path is already in error."""
        prefix = path + "."
        return path not in self and not any(key.startswith(prefix) for key in self)


class Write(Protocol):
    """A bulk write: its database rules, then what it writes."""

    # Positional-only: each write names the arguments after what they hold.
    def plan(self, body: Any, errors: Errors, /) -> Any: ...

    def apply(self, planned: Any, /) -> list[dict]: ...


def check(write: Write, body: Any, errors: Errors) -> None:
    """Check a bulk body against the write's rules and write nothing (a dry-run); raise ValidationFailed on any error."""
    write.plan(body, errors)
    fail_if(errors)


def run(write: Write, body: Any, errors: Errors) -> list[dict]:
    """Check a bulk body and apply it atomically; return the response items."""

    def work() -> list[dict]:
        attempt = Errors(errors)
        planned = write.plan(body, attempt)
        fail_if(attempt)
        return write.apply(planned)

    return transaction(work)


def transaction(work: Callable[[], T]) -> T:
    """Run work in a write transaction, again when a concurrent writer took a unique number or deadlocked."""
    for _ in range(8):
        try:
            with atomic():
                return work()
        except peewee.IntegrityError:
            continue
        except peewee.OperationalError as exc:
            # Peewee raises its own error while handling the driver's: the driver's, with its SQLSTATE, is the context.
            if getattr(exc.__context__, "sqlstate", None) not in _RETRYABLE:
                raise
    raise ApiError(409, "The request conflicted with concurrent writes; please retry.")


def fail_if(errors: Errors) -> None:
    """Raise ValidationFailed when any error was found."""
    if errors:
        raise ValidationFailed(dict(errors))


def items(body: Any) -> list:
    """Return the items of a bulk body (its `data` list), or none when the body has no such list."""
    found = body.get("data") if isinstance(body, dict) else None
    return found if isinstance(found, list) else []


def entries(listed: list) -> Iterator[tuple[int, dict, dict]]:
    """Yield (index, item, item's data) of the items that are objects with an object (or no) `data`."""
    for i, item in enumerate(listed):
        if isinstance(item, dict) and isinstance(item.get("data", {}), dict):
            yield i, item, item.get("data") or {}


def existing(
    listed: list[tuple[int, Any]], lookup: Callable[[list[str]], dict[str, T]], errors: Errors, missing: str
) -> dict[int, T]:
    """Map item indexes to what lookup finds for their uuid; report unknown and repeated uuids.

    listed is [(index, item)]; lookup(uuids) returns {lower-case uuid: found}; missing names the
    message (foundation.messages) of an unknown uuid.
    """
    wanted = [(i, item["uuid"]) for i, item in listed if isinstance(item.get("uuid"), str) and errors.clean(f"data.{i}.uuid")]
    known = lookup([value.lower() for _, value in wanted]) if wanted else {}
    found: dict[int, T] = {}
    seen: set[str] = set()
    for i, value in wanted:
        path, key = f"data.{i}.uuid", value.lower()
        if key in seen:
            errors.add(path, message("distinct", path))
        elif key not in known:
            errors.add(path, message(missing, path))
        else:
            found[i] = known[key]
        seen.add(key)
    return found
