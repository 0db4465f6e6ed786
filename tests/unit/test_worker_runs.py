"""The worker's record of which offsets its consumer delivered (streams.judge.DeliveredRuns): a seq
jump is read again only where the consumer may have passed over messages."""

from __future__ import annotations

from streams.judge import DeliveredRuns


def test_consecutive_offsets_form_one_run_per_partition() -> None:
    runs = DeliveredRuns()
    assert [runs.note(0, o) for o in (10, 11, 12)] == [10, 10, 10]
    assert [runs.note(1, o) for o in (500, 501)] == [500, 500]
    assert runs.note(0, 13) == 10


def test_a_jump_forward_starts_a_new_run_so_a_table_last_seen_before_it_is_checked() -> None:
    runs = DeliveredRuns()
    for offset in range(100, 201):
        runs.note(3, offset)
    # offsets 201..249 were never delivered (a consumer passed over them around a rebalance)
    start = runs.note(3, 250)
    assert start == 250
    table_last_offset = 150
    assert table_last_offset + 1 < start, "a table last taken at 150 may have lost messages: read again"
    assert runs.note(3, 251) == 250
    start = runs.note(3, 252)
    assert start == 250
    assert start <= 251 + 1, "a table last taken at 251, inside the run: a jump is the trail's own"


def test_a_redelivery_back_starts_a_new_run_and_clear_forgets_every_run() -> None:
    runs = DeliveredRuns()
    for offset in range(40, 50):
        runs.note(0, offset)
    assert runs.note(0, 45) == 45  # the consumer went back (a seek after a rebalance)
    assert runs.note(0, 46) == 45
    runs.clear()
    assert runs.note(0, 47) == 47
