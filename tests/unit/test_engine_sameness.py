"""The engine gives the same findings and the same states as the engine the fixture was made
with (the engine before its hot path was reworked, commit 16be15b; refreshed on purpose for rulebook
revision 3, whose verdicts differ, and for revision 4, whose verdicts on this floor are revision 3's
but carry revision 4, with each state's pending device faults; and refreshed once more when the
simulator began dealing the floor events of 10.4, a new trail: with ``floor_events=False`` the trail,
findings and states were the fixture's before, byte for byte; and when the chain's hashes became
RFC 8785's (issue 35: every finding the same, the states differing only in the hashes and the
digests of the events' bytes they hold); and for revision 5, whose simulator deals its floor kinds
(faults of an empty shuffler, spare shufflers, house-way resets) and a house-way error settled as
set, a new trail), on a simulated floor with injected
errors, exact and conflicting duplicates, sequence gaps and broken hash links.

The fixture (``tests/fixtures/engine-sameness.jsonl.gz``) holds, in order, every finding and
every rejection the old engine raised, then each table's final state (``dump_state``). Refresh
it only for a deliberate change of verdicts::

    .venv/bin/python tests/unit/test_engine_sameness.py --write
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

from dealtrail.simulator.floor import FloorSpec, simulate
from schemas import events as ev
from schemas.codec import encode
from streams.engine import EventRejected, TableState, apply
from streams.engine.state import dump_state, load_state

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "engine-sameness.jsonl.gz"
SPEC = FloorSpec(tables=6, hours=3.0, seed=2026, error_rate=0.12, duplicate_rate=0.004, floor_visit_rate=0.1)


def hostile_trail() -> Iterator[ev.DealingEvent]:
    """The simulated floor with per-table faults the simulator does not make: a lost event (a
    gap), an old event sent again unchanged (recent and too old to compare), an old seq with
    other content, and an event whose hash link is broken."""
    rng = random.Random(13)
    sent: dict[str, list[ev.DealingEvent]] = {}
    for event in simulate(SPEC):
        past = sent.setdefault(event.table_id, [])
        roll = rng.random()
        if roll < 0.001 and past:
            continue  # lost: the next one jumps a seq
        yield event
        past.append(event)
        if roll > 0.999 and len(past) > 400:
            yield past[-rng.randrange(2, 400)]  # exact copy, in or beyond the duplicate window
        elif 0.998 < roll <= 0.999 and len(past) > 10:
            old = past[-rng.randrange(2, 10)]
            yield old.model_copy(update={"event_id": old.event_id + "-x"})  # same seq, other event
        elif 0.997 < roll <= 0.998 and event.hash is not None:
            nxt = event.model_copy(update={"seq": event.seq + 1, "event_id": event.event_id + "-b"})
            yield nxt.model_copy(update={"prev_hash": "0" * 64})  # does not link to the one before
            past.append(nxt)


def run_engine() -> tuple[list[str], dict[str, str], str]:
    """Apply the hostile trail; returns (finding / rejection lines in order, table -> final
    state JSON, SHA-256 of the trail's canonical bytes)."""
    states: dict[str, TableState] = {}
    lines: list[str] = []
    trail = hashlib.sha256()
    for event in hostile_trail():
        raw = encode(event)
        trail.update(raw)
        try:
            state, found = apply(states.get(event.table_id), event, raw)
        except EventRejected as exc:
            lines.append(json.dumps({"rejected": exc.reason, "event_id": event.event_id}))
            continue
        states[event.table_id] = state
        lines.extend(f.model_dump_json() for f in found)
    return lines, {t: dump_state(s) for t, s in sorted(states.items())}, trail.hexdigest()


def read_fixture() -> tuple[list[str], dict[str, str], str]:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as fh:
        head = json.loads(fh.readline())
        lines = [fh.readline().rstrip("\n") for _ in range(head["findings"])]
        states = {t: fh.readline().rstrip("\n") for t in head["tables"]}
    return lines, states, head["trail_sha256"]


def write_fixture() -> None:
    lines, states, trail = run_engine()
    head = {"trail_sha256": trail, "findings": len(lines), "tables": list(states)}
    with gzip.open(FIXTURE, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(head) + "\n")
        for line in [*lines, *states.values()]:
            fh.write(line + "\n")


def test_engine_raises_the_same_findings_and_states_as_the_engine_before_its_rework() -> None:
    expected, expected_states, expected_trail = read_fixture()
    got, states, trail = run_engine()
    assert trail == expected_trail, "the simulator's output changed: the fixture no longer applies"
    assert len(expected) > 500 and any('"DT-sequence-gap"' in x for x in expected)
    assert any('"DT-chain-broken"' in x for x in expected) and any('"remedied"' in x for x in expected)
    for n, (a, b) in enumerate(zip(got, expected, strict=False)):
        assert a == b, f"finding {n} differs"
    assert len(got) == len(expected)
    assert list(states) == list(expected_states)
    for table, text in states.items():  # compared loaded: sets dump in hash order, which varies per run
        assert load_state(text) == load_state(expected_states[table]), table


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    write_fixture()
