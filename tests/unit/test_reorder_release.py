"""When the worker may apply what a reorder window holds: only once its partition is read up to
the high watermark its consumer has seen (issue 37 item 4), unreadable batches read past."""

from __future__ import annotations

from streams.worker import read_up_to


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
