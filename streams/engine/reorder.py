"""The reorder window: a table's events handed to the engine in seq order (rulebook decision 10.1.2).

Within a table the rulebook judges events in ``seq`` order, not in the order they arrive: two
device feeds merged by a collector, or a publisher retrying one record, deliver a table's
events a little out of seq order. The embedded audit, the Faust worker and the re-audit each
pass every event of a table through one :class:`TableWindow` (the same code, the same limits)
before :func:`streams.engine.apply`, so the same arrivals give the same findings in all three.

The window holds an event that arrives ahead of its turn and releases the held events sorted by
seq:

- an event whose seq is the next after the last one released goes through at once, with every
  held event that follows it without a hole;
- when more than ``events`` events are held, or the lowest held event happened more than
  ``seconds`` of event time before the event that just arrived, the window gives up waiting
  for the missing seq below it: the lowest held event is released (the engine then reports
  the hole as a ``DT-sequence-gap``), and so on while that holds;
- :meth:`TableWindow.flush` (end of a file, a stream idle for the table) releases everything
  held, in seq order.

An event whose seq is at or below the last released one (a copy, or an event later than the
window) is handed on at once: the engine judges it as it judges any late arrival today (an
exact copy is ignored, anything else is a ``DT-sequence-gap`` "arrived again"). A gap is thus
judged only once the window has given up on it, never because two events swapped places.

The window only ever delays: a trail already in seq order goes straight through (one
comparison per event, nothing held), so it costs nothing where the feed is clean.

Defaults (``DEALTRAIL_REORDER__EVENTS`` = :data:`DEFAULT_EVENTS`, ``DEALTRAIL_REORDER__SECONDS``
= :data:`DEFAULT_SECONDS`): a merged feed is out of order by the collectors' buffering, a few
events or seconds; 30 s of event time covers a device that reconnects and sends what it
buffered, while a hole that is real (a lost record) delays that table's findings by at most
30 s of its own event time. 500 events bounds what one table may hold (about 250 KB of event
JSON, which the worker keeps in the table's stored state until it is released) at a table
that deals faster than 500 events in 30 s. Pure: no I/O, no clock; times are the events' own.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, TypeVar

T = TypeVar("T")

DEFAULT_EVENTS = 500
"""Events a table's window holds at most (events) before it gives up on the lowest missing seq."""
DEFAULT_SECONDS = 30.0
"""Event time (seconds) the window waits for a missing seq, measured from the lowest held
event's ``occurred_at`` to the ``occurred_at`` of the event that just arrived."""


@dataclass(frozen=True, slots=True)
class ReorderLimits:
    """The window's bounds (the settings ``reorder.events`` and ``reorder.seconds``).

    Attributes:
        events: events held per table at most (>= 0; 0 turns the window off: every event is
            applied in arrival order).
        seconds: event-time seconds a held event waits for the seqs below it (>= 0).
    """

    events: int = DEFAULT_EVENTS
    seconds: float = DEFAULT_SECONDS


WINDOW = ReorderLimits()
"""The default bounds (a module-level value, for default arguments)."""


class TableWindow(Generic[T]):
    """One table's reorder window (see the module docstring).

    ``T`` is whatever the caller needs to apply an event later (the event and its bytes, a
    Kafka position ...); the window reads only the seq and the event time given with it.

    Args:
        last_seq: the seq of the table's last applied event (its state's ``last_seq``), or
            None for a table that has no state yet: until the caller sets :attr:`last` (once
            the engine has applied the table's ``TableConfigured``), the window holds nothing
            and hands every event on in arrival order (so no path ever holds events of a
            table it has no state to keep them with).
        limits: the window's bounds.
    """

    __slots__ = ("_arrived", "_heap", "_max", "_span", "last")

    def __init__(self, last_seq: int | None = 0, limits: ReorderLimits = WINDOW) -> None:
        self.last = last_seq
        """The highest seq released (the caller sets it to the engine's ``last_seq`` after it
        applied what was released); None: the table has no state yet."""
        self._heap: list[tuple[int, int, datetime, T]] = []
        self._arrived = 0
        self._max = limits.events
        self._span = timedelta(seconds=limits.seconds)

    def push(self, seq: int, at: datetime, item: T) -> list[T]:
        """Take one arrived event; return the events to apply now, in order.

        Args:
            seq: the event's seq.
            at: its ``occurred_at`` (timezone-aware).
            item: what the caller applies for it.

        Returns:
            The items released by this arrival (possibly none, possibly this one and others).
        """
        last = self.last
        if last is None:
            return [item]  # no state to hold events with yet: arrival order
        heap = self._heap
        if seq <= last:
            return [item]  # a copy or a late arrival: the engine judges it now
        if not heap and seq == last + 1:
            self.last = seq
            return [item]
        self._arrived += 1
        heapq.heappush(heap, (seq, self._arrived, at, item))
        out: list[T] = []
        limit = at - self._span
        while heap:
            top = heap[0]
            if top[0] <= last + 1 or len(heap) > self._max or top[2] < limit:
                heapq.heappop(heap)
                out.append(top[3])
                last = max(last, top[0])
            else:
                break
        self.last = last
        return out

    def flush(self) -> list[T]:
        """Release everything held, in seq order (arrival order within a seq)."""
        heap = self._heap
        out: list[T] = []
        while heap:
            seq, _, _, item = heapq.heappop(heap)
            out.append(item)
            self.last = seq if self.last is None else max(self.last, seq)
        return out

    def held(self) -> list[tuple[int, datetime, T]]:
        """What the window holds, ``(seq, at, item)`` in the order it would release them; give
        these to :meth:`restore` to rebuild the window (the worker keeps them in its state)."""
        return [(seq, at, item) for seq, _, at, item in sorted(self._heap, key=lambda h: (h[0], h[1]))]

    def restore(self, held: Iterable[tuple[int, datetime, T]]) -> None:
        """Hold again what :meth:`held` returned (in that order), without releasing anything."""
        for seq, at, item in held:
            self._arrived += 1
            heapq.heappush(self._heap, (seq, self._arrived, at, item))

    def __len__(self) -> int:
        """Events held."""
        return len(self._heap)


class Reorder(Generic[T]):
    """The reorder windows of many tables (the audit's and the re-audit's).

    Args:
        limits: the bounds of every table's window.
    """

    def __init__(self, limits: ReorderLimits = WINDOW) -> None:
        self.limits = limits
        self.windows: dict[str, TableWindow[T]] = {}

    def window(self, table_id: str, last_seq: int | None = 0) -> TableWindow[T]:
        """The window of ``table_id``, made if new with ``last_seq`` (see :class:`TableWindow`)."""
        w = self.windows.get(table_id)
        if w is None:
            w = self.windows[table_id] = TableWindow(last_seq, self.limits)
        return w

    def flush(self) -> list[T]:
        """Release everything every window holds: table by table (in the order first seen),
        each in seq order."""
        return [item for w in self.windows.values() for item in w.flush()]
