"""The lines of one worker's engine (jobs.lines): each webhook's claimed deliveries waiting in order of due time,
the turns the webhooks take, and the attempts each has running.

Nothing here locks, waits or talks to a server: the engine calls it holding its lock, and decides each webhook's
cap (`take`'s `cap_of`). A round takes, webhook after webhook in their turns, every attempt due that the webhook's
cap and the engine's capacity allow; the next round starts after the last webhook served, and a new line opens
last, so a backlog of one webhook is never ahead of another's delivery.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Callable, Collection
from dataclasses import dataclass

from models.webhooks import Delivery, Webhook

Taken = list[tuple["Item", Webhook]]


@dataclass(eq=False)
class Item:
    """A claimed delivery waiting in its webhook's line, then in flight, then being recorded."""

    delivery: Delivery  # with its webhook and event body loaded
    generation: int
    due: float  # time.time() before which the attempt must not start (a retry RQ ran early, or its paced slot)
    lease: float  # time.monotonic() until which this process's claim holds


class Turns:
    """The lines of the webhooks with deliveries waiting, in the order they are served, and what each has running."""

    def __init__(self) -> None:
        self.lines: dict[int, collections.deque[Item]] = {}
        self.order: list[int] = []  # webhooks with a line, in the order they are served
        self.hooks: dict[int, Webhook] = {}  # the latest read of every webhook with a line
        self.running: collections.Counter[int] = collections.Counter()
        self.in_flight = 0

    def enter(self, webhook: Webhook, item: Item) -> None:
        """Put an item in its webhook's line in order of due time: RQ threads reserve slots and enter in either order."""
        self.hooks[webhook.id] = webhook
        line = self._line_of(webhook.id)
        if not line or line[-1].due <= item.due:
            line.append(item)
        else:
            line.insert(bisect.bisect_right(line, item.due, key=lambda waiting: waiting.due), item)

    def take(
        self,
        cap_of: Callable[[int], tuple[int, bool]],
        capacity: int,
        now: float,
        clock: float,
        margin: float,
        only: Collection[int] | None = None,
    ) -> tuple[Taken, float | None, int]:
        """Take the attempts that may run now (of the webhooks `only` names, if given) and count them running.

        cap_of(webhook id) says how many a webhook may have running and whether it answered quickly lately; an item
        whose claim (monotonic `now`) lasts less than `margin` is dropped. Return the attempts taken, the quick
        webhooks' first, the seconds until the next one is due (`clock`: time.time()), and how many were dropped.
        """
        quick: Taken = []
        rest: Taken = []
        served, wake, lapsed = 0, None, 0
        for webhook_id in self.order if only is None else [w for w in self.order if w in only]:
            if self.in_flight >= capacity:
                break
            served += 1
            (cap, proven), line = cap_of(webhook_id), self.lines[webhook_id]
            while line and self.running[webhook_id] < cap and self.in_flight < capacity:
                item = line[0]
                if item.due > clock:
                    wake = min(wake or 3600.0, item.due - clock)
                    break
                line.popleft()
                if item.lease - now < margin:
                    lapsed += 1  # not renewed in time (the database is away): rescue hands it back
                    continue
                self.running[webhook_id] += 1
                self.in_flight += 1
                (quick if proven else rest).append((item, self.hooks[webhook_id]))
            if not line:
                del self.lines[webhook_id]
        order = self.order if only is not None else self.order[served:] + self.order[:served]
        self.order = [w for w in order if w in self.lines]
        # Quick first: they end soon, while the unproven may hang until their deadline (bench/isolation.py).
        return quick + rest, wake, lapsed

    def finish(self, webhook_id: int, back: tuple[Item, float] | None = None) -> None:
        """Free an attempt's place; `back` = (item, due) puts an item that did not start back first in its line."""
        self.running[webhook_id] -= 1
        if not self.running[webhook_id]:
            del self.running[webhook_id]
        self.in_flight -= 1
        if back is not None:
            # The window is full until `due`: none of the line starts before it, and this one goes first.
            (item, due), line = back, self._line_of(webhook_id)
            for waiting in line:
                if waiting.due >= due:
                    break
                waiting.due = due
            item.due = due
            line.appendleft(item)

    def drop(self, items: Collection[Item]) -> int:
        """Take waiting items out of their lines unattempted; return how many were waiting."""
        dropped = 0
        for webhook_id in list(self.lines):
            line = self.lines[webhook_id]
            kept = [item for item in line if item not in items]
            dropped += len(line) - len(kept)
            if kept:
                self.lines[webhook_id] = collections.deque(kept)
            else:
                del self.lines[webhook_id]
        self.order = [w for w in self.order if w in self.lines]
        return dropped

    def waiting(self) -> dict[int, list[Item]]:
        """Return a copy of the lines: webhook id -> its waiting items."""
        return {webhook_id: list(line) for webhook_id, line in self.lines.items()}

    def _line_of(self, webhook_id: int) -> collections.deque[Item]:
        """Return a webhook's line, opening it (last in the turns) if it has none."""
        if webhook_id not in self.lines:
            self.lines[webhook_id] = collections.deque()
            self.order.append(webhook_id)
        return self.lines[webhook_id]


__all__ = ["Item", "Turns"]
