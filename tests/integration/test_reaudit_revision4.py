"""``dealtrail reaudit`` of a store judged under rulebook revision 3: the new generation is judged
under revision 4 and the printout lists, per rule, what revision 4 withdraws: the
DT-deal-after-device-fault and PGP-645a.14-n-out-of-order findings revision 3 raised on every round
after a jam its own reshuffle had cleared (rulebook 10.4.1).

The store "judged under revision 3" is the trail of :mod:`tests.revision4_trail` audited, with its
generation-1 findings replaced by those the revision-3 engine gave it
(``tests/fixtures/revision3-findings.jsonl``, written by that engine, commit 6326922).
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
from schemas.base import Envelope
from schemas.codec import encode
from schemas.findings import Finding
from streams.engine.catalog import RULEBOOK_REVISION
from tests.revision4_trail import PGP_TABLE, TCP_TABLE, trail

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "revision3-findings.jsonl"
FAULT = "DT-deal-after-device-fault"
OUT_OF_ORDER = "PGP-645a.14-n-out-of-order"
JAM = "PGP-645a.14-l-shuffler-fault"


def judged_store(trail_events: list[Envelope], fixture: Path, folder: Path) -> Path:
    """A store of ``trail_events`` audited, its generation-1 findings replaced by ``fixture``'s (the
    findings an earlier engine gave the trail, one JSON per line): a store judged under that
    engine's revision."""
    events = folder / "events.jsonl"
    events.write_bytes(b"".join(encode(e) + b"\n" for e in trail_events))
    db = folder / "store.duckdb"
    judged = [Finding.model_validate_json(line) for line in fixture.read_text().splitlines()]
    with Store(db) as store:
        audit_file(events, store)
        store.con.execute("DELETE FROM findings")
        store.write_batch((), findings=judged)
    return db


@pytest.fixture
def revision3_store(tmp_path: Path) -> Path:
    return judged_store(trail(), FIXTURE, tmp_path)


def _findings(db: Path, generation: int) -> list[tuple[str, str, str | None, int]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT rule_id, table_id, round_id, rulebook_revision FROM findings WHERE generation = ? AND revision = 0 "
            "ORDER BY rule_id, table_id, round_id",
            [generation],
        ).fetchall()
    finally:
        con.close()
    return [(str(r), str(t), None if d is None else str(d), int(v)) for r, t, d, v in rows]


def test_reaudit_of_a_store_judged_under_revision_3_lists_what_revision_4_withdraws_per_rule(  # and 5 keeps
    revision3_store: Path,
) -> None:
    before = _findings(revision3_store, 1)
    rounds = [f"R{n}" for n in range(2, 6)]
    assert before == sorted(
        [(FAULT, t, r, 3) for t in (TCP_TABLE, PGP_TABLE) for r in rounds]
        + [(OUT_OF_ORDER, PGP_TABLE, r, 3) for r in rounds]
        + [(JAM, PGP_TABLE, None, 3)]
    )
    result = CliRunner().invoke(app, ["reaudit", "--db", str(revision3_store), "--workers", "1"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # the printout wraps at the terminal's width
    now = RULEBOOK_REVISION  # revision 5 changes nothing on this trail
    assert f"rulebook revision {now}); compared with generation 1 (judged under rulebook revision 3)" in out
    assert f"what rulebook revision {now} adds and withdraws against revision 3" in out
    assert "changed: 0 added, 12 withdrawn, 0 changed" in out
    assert f"{FAULT}" in out and f"{OUT_OF_ORDER}" in out
    con = duckdb.connect(str(revision3_store), read_only=True)
    try:
        diff = {d.rule_id: d for d in generation_diff(con, 2, 1)}
        assert con.execute("SELECT rulebook_revision FROM generations WHERE generation = 2").fetchall() == [(now,)]
    finally:
        con.close()
    assert (diff[FAULT].added, diff[FAULT].withdrawn) == (0, 8)
    assert (diff[OUT_OF_ORDER].added, diff[OUT_OF_ORDER].withdrawn) == (0, 4)
    assert diff[OUT_OF_ORDER].rounds_withdrawn == [f"{PGP_TABLE}/{r}" for r in rounds]
    assert not diff[JAM].moved
    assert _findings(revision3_store, 2) == [(JAM, PGP_TABLE, None, now)]


def test_the_revision3_fixture_is_the_trail_it_names() -> None:
    ids = {e.event_id for e in trail()}
    for line in FIXTURE.read_text().splitlines():
        f = json.loads(line)
        assert f["rulebook_revision"] == 3 and set(f["evidence_event_ids"]) <= ids
