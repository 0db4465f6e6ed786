"""A trail written with schema version 1 (before rulebook revision 2) audits to the findings it
gave then: `tests/fixtures/shift-v1.jsonl.gz` is a shift simulated by dealtrail before revision 2
(3 tables, seed 4, error rate 0.9, 1 % duplicates), with the truth file it wrote. Revision 2 changes
no verdict on it: no deck is dealt twice unshuffled, no fault is cleared by a count-less or
earlier-started shuffle, no exposure happens at settlement, no cut could be recorded (none is
asked of version 1 shuffles) and every duplicate card is on a deck not already suspect.

Revision 3 added findings on it (a jammed shuffler there was used again with no
``DeviceReturnedToService``, so each round after the jam was dealt on an unresolved fault and, at a
Pai Gow table, another method's round for § 645a.14(n)); revision 4 withdraws them again: a jam is
cleared by its own remedy, the reshuffle in the same shuffler (rulebook 10.4.1), so the trail
audits to exactly the findings it gave before revision 2. Revision 5 withdraws its house-way
findings: the simulator of then reset each such hand before settlement, which is the procedure of
§ 645a.14(i) followed (rulebook 10.5.3)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from schemas.codec import decode
from streams.engine import RULEBOOK_REVISION, apply
from streams.engine.state import TableState

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_version_1_trail_audits_to_the_same_findings_as_before_revision_2() -> None:
    states: dict[str, TableState] = {}
    found: dict[str, tuple[str, str, str | None]] = {}
    versions: Counter[int] = Counter()
    reset_in_time: set[str] = set()  # rounds whose house-way hand was reset before settlement
    settled: set[str] = set()
    with gzip.open(FIXTURES / "shift-v1.jsonl.gz") as fh:
        for raw in fh:
            event = decode(raw)
            if event.type == "WagerSettled" and event.round_id is not None:
                settled.add(event.round_id)
            if event.type == "HandReset" and event.round_id not in settled:
                reset_in_time.add(event.round_id or "")
            versions[event.schema_version] += 1
            state, findings = apply(states.get(event.table_id), event, raw)
            states[event.table_id] = state
            for f in findings:
                if f.revision == 0:
                    found[f.finding_id] = (f.rule_id, f.table_id, f.round_id)
                assert f.rulebook_revision == RULEBOOK_REVISION
    truth = [json.loads(line) for line in (FIXTURES / "shift-v1.truth.jsonl").read_text().splitlines()]
    assert set(versions) == {1}
    assert len(truth) > 30
    withdrawn = [t for t in truth if t["rule_id"].endswith("-i-house-way") and t["round_id"] in reset_in_time]
    assert withdrawn and all(t["injected"] == "house-way-missed" for t in withdrawn)
    expected = Counter((t["rule_id"], t["table_id"], t["round_id"]) for t in truth if t not in withdrawn)
    got = Counter(found.values())
    assert any(t["injected"] == "shuffler-jam" for t in truth)  # the trail holds jams cleared by a reshuffle
    assert got == expected
