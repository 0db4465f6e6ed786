"""When the worker may apply what a reorder window holds: only once its partition is read up to
the high watermark its consumer has seen (issue 37 item 4), unreadable batches read past."""

from __future__ import annotations

from streams.judge import UNREACHED_QUIET_S, read_up_to, window_due


def test_a_partition_with_messages_queued_below_the_high_watermark_is_not_read_up_to() -> None:
    assert not read_up_to(120, 500, ())
    assert not read_up_to(None, 1, ())


def test_a_partition_taken_to_its_high_watermark_is_read_up_to() -> None:
    assert read_up_to(500, 500, ())


def test_an_unknown_high_watermark_leaves_the_decision_to_the_wall_clock() -> None:
    assert read_up_to(None, None, ())


def test_an_unreadable_batch_passed_over_counts_as_read() -> None:
    assert read_up_to(100, 140, [(100, 139)])
    assert not read_up_to(90, 140, [(100, 139)]), "messages 90..99 are still queued"


def test_a_window_waits_for_idle_then_for_the_consumer_then_not_past_the_bound() -> None:
    asked: list[int] = []

    def behind(partition: int) -> bool:
        asked.append(partition)
        return False

    assert not window_due(1.0, 5.0, behind, 3) and asked == []  # not idle yet: the mark is not asked
    assert not window_due(6.0, 5.0, behind, 3) and asked == [3]  # idle, but messages wait below the mark
    assert window_due(6.0, 5.0, lambda _p: True, 3)
    # a transactional producer's commit marker is an offset no message is delivered for: the
    # mark is never reached, and the window is still applied once the partition stays quiet
    assert window_due(UNREACHED_QUIET_S, 5.0, behind, 3)
