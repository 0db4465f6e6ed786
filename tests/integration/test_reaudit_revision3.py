"""``dealtrail reaudit`` of a store judged under rulebook revision 2: the new generation is judged
under the revision in force (3 when this test was written; revision 4 judges this trail as 3 did)
and the printout lists, per rule, what it adds and withdraws.

The store "judged under revision 2" is the trail of :mod:`tests.revision3_trail` audited, with its
generation-1 findings replaced by those the revision-2 engine gave it
(``tests/fixtures/revision2-findings.jsonl``, written by that engine before revision 3 was built).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import audit_file
from projections.models.generations import generation_diff
from projections.store.store import Store
from schemas.codec import encode
from schemas.findings import Finding
from streams.engine.catalog import RULEBOOK_REVISION
from tests.revision3_trail import trail

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "revision2-findings.jsonl"
FAULT = "DT-deal-after-device-fault"


@pytest.fixture
def revision2_store(tmp_path: Path) -> Path:
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"".join(encode(e) + b"\n" for e in trail()))
    db = tmp_path / "store.duckdb"
    judged = [Finding.model_validate_json(line) for line in FIXTURE.read_text().splitlines()]
    with Store(db) as store:
        audit_file(events, store)
        store.con.execute("DELETE FROM findings")
        store.write_batch((), findings=judged)
    return db


def _findings(db: Path, generation: int) -> list[tuple[str, str, int]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT rule_id, round_id, rulebook_revision FROM findings WHERE generation = ? AND revision = 0 "
            "ORDER BY rule_id, round_id",
            [generation],
        ).fetchall()
    finally:
        con.close()
    return [(str(r), str(d), int(v)) for r, d, v in rows]


def test_reaudit_of_a_store_judged_under_revision_2_lists_what_revision_3_adds_and_withdraws_per_rule(
    revision2_store: Path,
) -> None:
    assert _findings(revision2_store, 1) == [(FAULT, "R2", 2), ("TCP-679a.9-a1-shuffler-required", "R3", 2)]
    result = CliRunner().invoke(app, ["reaudit", "--db", str(revision2_store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # the printout wraps at the terminal's width
    now = RULEBOOK_REVISION
    assert f"rulebook revision {now}); compared with generation 1 (judged under rulebook revision 2)" in out
    assert f"what rulebook revision {now} adds and withdraws against revision 2" in out
    assert "1 rules unchanged (1 finding revisions): TCP-679a.9-a1-shuffler-required" in out
    assert "changed: 2 added, 1 withdrawn, 0 changed" in out
    # per rule: the fault moves from R2 (the deck in play) to R3 and R4 (the jammed deck, dealt twice)
    con = duckdb.connect(str(revision2_store), read_only=True)
    try:
        diff = {d.rule_id: d for d in generation_diff(con, 2, 1)}
    finally:
        con.close()
    fault = diff[FAULT]
    assert (fault.added, fault.withdrawn, fault.changed) == (2, 1, 0)
    assert fault.rounds_added == ["TCP-R3/R3", "TCP-R3/R4"] and fault.rounds_withdrawn == ["TCP-R3/R2"]
    assert not diff["TCP-679a.9-a1-shuffler-required"].moved
    assert _findings(revision2_store, 2) == [
        (FAULT, "R3", now),
        (FAULT, "R4", now),
        ("TCP-679a.9-a1-shuffler-required", "R3", now),
    ]
    # the generation says which revision judged it
    con = duckdb.connect(str(revision2_store), read_only=True)
    try:
        assert con.execute("SELECT rulebook_revision FROM generations WHERE generation = 2").fetchall() == [(now,)]
    finally:
        con.close()


def test_the_revision2_fixture_is_the_trail_it_names() -> None:
    ids = {e.event_id for e in trail()}
    for line in FIXTURE.read_text().splitlines():
        f = json.loads(line)
        assert f["rulebook_revision"] == 2 and set(f["evidence_event_ids"]) <= ids
