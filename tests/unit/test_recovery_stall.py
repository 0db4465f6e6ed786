"""The worker's line on a stalled state recovery (streams/worker.py, :func:`recovery_stall`):
said only for a changelog partition still owed that has received nothing for a minute, with
what the consumer makes of it."""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace
from typing import Any

from streams.worker import RECOVERY_STALL_SECONDS, recovery_stall

TP = namedtuple("TP", "topic partition")
CHANGELOG = "g-table-states-changelog"


def _recovery(started: float, received: dict[Any, float], offsets: dict[Any, int]) -> Any:
    ends = {TP(CHANGELOG, 0): 40, TP(CHANGELOG, 1): 25}
    return SimpleNamespace(
        in_recovery=True,
        _recovery_started_at=started,
        _active_events_received_at=received,
        active_highwaters=ends,
        active_offsets=offsets,
    )


def _consumer(positions: dict[Any, int], paused: set[Any]) -> Any:
    class Assignment:
        def state_value(self, tp: Any) -> Any:
            return SimpleNamespace(_position=positions[tp]) if tp in positions else None

    client = SimpleNamespace(
        paused=lambda: paused,
        _fetcher=SimpleNamespace(_subscriptions=SimpleNamespace(subscription=SimpleNamespace(assignment=Assignment()))),
    )
    return SimpleNamespace(_thread=SimpleNamespace(_ensure_consumer=lambda: client))


def test_a_recovery_that_progresses_or_ended_says_nothing() -> None:
    now = 1000.0
    fresh = _recovery(now - 5, {}, {})
    assert recovery_stall(fresh, _consumer({}, set()), now) is None
    recent = _recovery(now - 500, {TP(CHANGELOG, 0): now - 1, TP(CHANGELOG, 1): now - 2}, {})
    assert recovery_stall(recent, _consumer({}, set()), now) is None
    done = _recovery(now - 500, {}, {TP(CHANGELOG, 0): 40, TP(CHANGELOG, 1): 25})
    assert recovery_stall(done, _consumer({}, set()), now) is None
    ended = SimpleNamespace(**{**vars(_recovery(now - 500, {}, {})), "in_recovery": False})
    assert recovery_stall(ended, _consumer({}, set()), now) is None


def test_a_partition_owed_and_silent_for_a_minute_is_named_with_the_consumers_view() -> None:
    now = 1000.0
    rec = _recovery(now - RECOVERY_STALL_SECONDS - 1, {TP(CHANGELOG, 0): now - 1}, {TP(CHANGELOG, 0): 12})
    line = recovery_stall(rec, _consumer({TP(CHANGELOG, 1): 26}, {TP(CHANGELOG, 1)}), now)
    assert line is not None
    assert f"{CHANGELOG}[1] end 25, recovered to None, consumer at 26, paused" in line
    assert f"{CHANGELOG}[0]" not in line  # received an event a second ago


def test_a_consumer_that_is_gone_still_gives_the_recoverys_side() -> None:
    now = 1000.0
    rec = _recovery(now - 2 * RECOVERY_STALL_SECONDS, {}, {})
    gone = SimpleNamespace(_thread=SimpleNamespace(_ensure_consumer=lambda: (_ for _ in ()).throw(RuntimeError())))
    line = recovery_stall(rec, gone, now)
    assert line is not None and f"{CHANGELOG}[0] end 40, recovered to None, consumer at None" in line
