"""A table state survives its JSON form unchanged (the store keeps it between audits, the
worker in its changelog)."""

from __future__ import annotations

from pathlib import Path

from dealtrail.audit import Auditor
from schemas.codec import decode
from streams.engine.state import dump_state, load_state


def test_every_state_of_a_shift_with_errors_survives_its_json_form(small_shift: tuple[Path, Path]) -> None:
    events, _ = small_shift
    auditor = Auditor()
    checked = mid_round = owing = 0
    for n, line in enumerate(events.read_bytes().splitlines()):
        event = decode(line)
        auditor.apply(event, line)
        if n % 13 == 0:  # states mid-round, with open remedies, faults and findings fired
            state = auditor.states[event.table_id]
            assert load_state(dump_state(state)) == state, f"line {n + 1}"
            checked += 1
            mid_round += state.round is not None
            owing += bool(state.obligations)
    assert checked > 1000 and mid_round > 500 and owing > 0
