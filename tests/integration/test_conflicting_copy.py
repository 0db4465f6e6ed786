"""A conflicting copy says what it is (issue 46 item 3): a re-sent record with an event ID the
trail already holds and one field changed is one incident that names both records, the field
that differs and which record the trail keeps, alike in the audit's store (batch) and the
projector's (stream); the evidence package and the replay show both records."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from dealtrail.ingest.audit import audit_file
from dealtrail.ingest.projector import Heads, ProjectSummary, _write
from dealtrail.investigate.evidence import build_package
from dealtrail.settings import Settings
from dealtrail.simulator.run import write_simulation
from projections.models.conflicts import conflicting_copies
from projections.store.store import BatchCounts, Store
from schemas.codec import decode
from tests.unit.test_projector_isolation import NAMES, TP, Consumer, Rec


def _trail(tmp_path: Path) -> tuple[Path, list[bytes], str]:
    """A one-table trail with, at its end, a re-sent copy of its 6th event whose ``actor.id`` differs."""
    path = tmp_path / "shift.jsonl"
    write_simulation(path, tables=1, hours=0.3, seed=4, error_rate=0.0)
    lines = path.read_bytes().splitlines()
    doc = json.loads(lines[5])
    doc["actor"]["id"] = doc["actor"]["id"] + "-RESENT"
    out = [*lines, json.dumps(doc).encode()]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"\n".join(out) + b"\n")
    return mixed, out, str(doc["event_id"])


def test_a_conflicting_copy_is_one_incident_naming_both_records_and_the_field_alike_on_batch_and_stream(
    tmp_path: Path,
) -> None:
    mixed, records, event_id = _trail(tmp_path)
    settings = Settings()
    with Store(tmp_path / "audit.duckdb") as store:
        audit_file(mixed, store, workers=1, limits=settings.plausibility)
        batch = conflicting_copies(store.con)
    table = decode(records[0]).table_id.encode()
    with Store(tmp_path / "stream.duckdb") as store:
        polled = {TP(NAMES[0], 0): [Rec(100 + i, r, table) for i, r in enumerate(records)]}
        _write(store, Consumer(), "g", polled, NAMES, ProjectSummary(BatchCounts()), None, Heads(settings.plausibility))
        stream = conflicting_copies(store.con)
    for found, first, last in ((batch, 6, len(records)), (stream, 105, 100 + len(records) - 1)):
        assert len(found) == 1, found
        (c,) = found
        assert (c.event_id, c.fields, c.kept.seq, c.other.seq) == (event_id, ("actor.id",), 6, 6)
        assert (c.kept.arrival, c.other.arrival) == (first, last)
        assert c.chain_fields == ("hash",) or c.chain_fields == (), c.chain_fields
        message = c.message()
        assert event_id in message and "actor.id" in message and f"arrival {first}" in message
        assert "the trail keeps the first" in message
    assert batch[0].kept.payload_hash == stream[0].kept.payload_hash
    assert batch[0].other.payload_hash == stream[0].other.payload_hash


def test_the_evidence_package_and_the_replay_show_both_records_of_a_conflicting_copy(tmp_path: Path) -> None:
    mixed, _, event_id = _trail(tmp_path)
    settings = Settings()
    db = tmp_path / "audit.duckdb"
    with Store(db) as store:
        audit_file(mixed, store, workers=1, limits=settings.plausibility)
        (finding_id,) = store.con.execute(
            "SELECT DISTINCT finding_id FROM findings WHERE rule_id = 'DT-sequence-gap'"
        ).fetchone()
        package = build_package(store.con, finding_id, settings.plausibility, datetime.now(UTC))
    manifest = json.loads(package.files["manifest.json"])
    (copy,) = manifest["conflicting_copies"]
    assert copy["event_id"] == event_id and copy["fields"] == ["actor.id"]
    assert copy["other_record"]["actor"]["id"].endswith("-RESENT")
    kept = [json.loads(line) for line in package.files["events.jsonl"].decode().splitlines()]
    assert [e["actor"]["id"] for e in kept if e["event_id"] == event_id] == [copy["other_record"]["actor"]["id"][:-7]]
    assert "## Conflicting copies" in package.files["README.md"].decode()
    replayed = subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", "replay", "--table", "TCP-01", "--db", str(db)],
        capture_output=True,
        text=True,
        check=False,
        env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"},
    )
    assert "conflicting copy" in replayed.stdout and event_id in replayed.stdout, replayed.stdout + replayed.stderr
    assert "actor.id" in replayed.stdout
