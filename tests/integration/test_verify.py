"""Tamper evidence: dealtrail verify finds one altered, inserted or deleted event and names it;
a digest saved earlier catches a trail rewritten with a consistent new chain."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import audit_file
from dealtrail.ingest.verify import check_chain, tables
from dealtrail.investigate.replay import stored_events
from dealtrail.simulator.run import write_simulation
from projections.store.store import Store
from schemas.chain import chain_hash
from schemas.codec import decode, encode
from tests.helpers import write_unchained


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shift with dealing errors but no lost events (a lost event breaks the chain by design)."""
    folder = tmp_path_factory.mktemp("verify")
    events = folder / "events.jsonl"
    write_simulation(events, tables=6, hours=1.0, seed=12, error_rate=0.0, duplicate_rate=0.002)
    db = folder / "shift.duckdb"
    with Store(db) as s:
        audit_file(events, s)
    return db


def test_a_lost_event_in_the_shift_shows_as_a_broken_chain(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, truth = small_shift
    db = tmp_path / "gaps.duckdb"
    with Store(db) as s:
        audit_file(events, s)
    lost = {json.loads(t)["table_id"] for t in truth.read_text().splitlines() if '"sequence-gap"' in t}
    code, out = _verify(db)
    assert code == 4
    broken = {part.split(":")[0].strip() for part in out.split("  ") if "chain broken" in part}
    assert lost and {t for t in lost if f"{t}: chain broken" in out} == lost, (lost, broken)


def _copy(store: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy.duckdb"
    out.write_bytes(store.read_bytes())
    return out


def _nth(db: Path, table: str, n: int) -> tuple[str, str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(
            "SELECT event_id, payload::VARCHAR, seq FROM events WHERE table_id = ? "
            "ORDER BY seq, arrival LIMIT 1 OFFSET ?",
            [table, n],
        ).fetchone()
    finally:
        con.close()
    return str(row[0]), str(row[1]), int(row[2])


def _verify(db: Path, *extra: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["verify", "--db", str(db), *extra])
    return r.exit_code, " ".join(r.output.split())


def test_an_untouched_store_verifies(store: Path) -> None:
    code, out = _verify(store)
    assert code == 0, out
    assert "broken" not in out and out.count("intact") == 6


def test_verify_names_an_altered_event(store: Path, tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    event_id, payload, seq = _nth(db, "PGP-01", 300)
    doc = json.loads(payload)
    doc["actor"]["id"] = "someone-else"
    con = duckdb.connect(str(db))
    con.execute("UPDATE events SET payload = ? WHERE event_id = ?", [json.dumps(doc), event_id])
    con.close()
    code, out = _verify(db)
    assert code == 4
    assert f"PGP-01: chain broken at seq {seq}, event {event_id}" in out and "altered" in out
    assert out.count("intact") == 5


def test_verify_names_a_deleted_event(store: Path, tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    gone, _, _ = _nth(db, "TCP-01", 500)
    after_id, _, after_seq = _nth(db, "TCP-01", 501)
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM events WHERE event_id = ?", [gone])
    con.close()
    code, out = _verify(db, "--table", "TCP-01")
    assert code == 4
    assert f"chain broken at seq {after_seq}, event {after_id}" in out and "inserted, deleted or moved" in out


def test_verify_names_an_inserted_event(store: Path, tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    before_id, payload, seq = _nth(db, "C691-01", 200)
    forged = decode(payload).model_copy(update={"event_id": "FORGED-1", "seq": seq})
    forged = forged.model_copy(update={"hash": chain_hash(forged)})  # a valid hash, wrong place
    con = duckdb.connect(str(db))
    con.execute(
        "INSERT INTO events SELECT 'FORGED-1', 'x', table_id, game, round_id, deck_id, seq, type, occurred_at, "
        "recorded_at, actor_role, actor_id, ?::JSON, arrival + 1 FROM events WHERE event_id = ?",
        [encode(forged).decode(), before_id],
    )
    con.close()
    code, out = _verify(db, "--table", "C691-01")
    assert code == 4
    assert f"chain broken at seq {seq}, event FORGED-1 (after {before_id})" in out


def test_digest_catches_a_trail_rewritten_with_a_fresh_consistent_chain(store: Path, tmp_path: Path) -> None:
    digest = tmp_path / "digest.json"
    r = CliRunner().invoke(app, ["digest", "--db", str(store), "--out", str(digest)])
    assert r.exit_code == 0, r.output
    assert _verify(store, "--against", str(digest))[0] == 0
    db = _copy(store, tmp_path)
    con = duckdb.connect(str(db))
    trail = list(stored_events(con, "TCP-01"))
    prev = None
    for i, (event_id, payload) in enumerate(trail):  # rewrite history and re-chain every event
        e = decode(payload)
        if i == 100:
            e = e.model_copy(update={"actor": e.actor.model_copy(update={"id": "rewritten"})})
        e = e.model_copy(update={"prev_hash": prev, "hash": None})
        e = e.model_copy(update={"hash": chain_hash(e)})
        prev = e.hash
        con.execute("UPDATE events SET payload = ? WHERE event_id = ?", [encode(e).decode(), event_id])
    con.close()
    assert check_chain("TCP-01", stored_events(duckdb.connect(str(db), read_only=True), "TCP-01")).intact
    code, out = _verify(db, "--against", str(digest))
    assert code == 4
    assert "TCP-01: the chain no longer passes through the digest head" in out


def test_digest_check_names_the_break_before_the_head_not_a_rewrite(store: Path, tmp_path: Path) -> None:
    digest = tmp_path / "digest.json"
    assert CliRunner().invoke(app, ["digest", "--db", str(store), "--out", str(digest)]).exit_code == 0
    db = _copy(store, tmp_path)
    event_id, payload, seq = _nth(db, "PGP-01", 300)
    doc = json.loads(payload)
    doc["actor"]["id"] = "someone-else"  # one event in the middle edited, the chain not redone
    con = duckdb.connect(str(db))
    con.execute("UPDATE events SET payload = ? WHERE event_id = ?", [json.dumps(doc), event_id])
    con.close()
    code, out = _verify(db, "--against", str(digest))
    assert code == 4
    assert f"PGP-01: the chain is broken at seq {seq}, before the digest head" in out
    assert "rewritten" not in out
    assert out.count("digest head") == 1  # the other tables still pass through their heads


def _payloads(db: Path) -> list[tuple[str, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [(a, b) for a, b in con.execute("SELECT event_id, payload::VARCHAR FROM events ORDER BY ALL").fetchall()]
    finally:
        con.close()


def test_audit_stamps_the_chain_an_unchained_file_lacks_exactly_as_the_source_would(tmp_path: Path) -> None:
    # no lost events: the simulator chains a lost event before dropping it, which a stamp
    # made after the loss cannot know about (the engine reports the seq gap either way)
    events = tmp_path / "events.jsonl"
    write_simulation(events, tables=4, hours=0.5, seed=5, error_rate=0.0, duplicate_rate=0.01)
    plain = write_unchained(events, tmp_path / "plain.jsonl")
    assert b'"hash"' not in plain.read_bytes()
    chained_db, stamped_db = tmp_path / "chained.duckdb", tmp_path / "stamped.duckdb"
    with Store(chained_db) as s:
        audit_file(events, s, workers=1)
    with Store(stamped_db) as s:
        first = audit_file(plain, s, workers=2, batch_lines=700)
        again = audit_file(plain, s, workers=1)
    # the stamps equal the simulator's own chain (exact re-sent copies stamped like the first)
    assert _payloads(stamped_db) == _payloads(chained_db)
    assert first.written.events == len(_payloads(stamped_db)) and again.written.events == 0
    con = duckdb.connect(str(stamped_db), read_only=True)
    try:
        for table in tables(con):
            report = check_chain(table, stored_events(con, table))
            assert report.chained == report.events
    finally:
        con.close()


def test_audit_without_chain_stores_the_events_as_they_came(small_shift: tuple[Path, Path], tmp_path: Path) -> None:
    events, _ = small_shift
    plain = write_unchained(events, tmp_path / "plain.jsonl")
    db = tmp_path / "plain.duckdb"
    result = CliRunner().invoke(app, ["audit", str(plain), "--db", str(db), "--no-chain"])
    assert result.exit_code == 0, result.output
    assert all('"hash"' not in payload or '"hash":null' in payload.replace(" ", "") for _, payload in _payloads(db))


def test_verify_names_an_event_whose_stored_columns_were_edited(store: Path, tmp_path: Path) -> None:
    db = _copy(store, tmp_path)
    event_id, _, seq = _nth(db, "PGP-01", 40)
    con = duckdb.connect(str(db))
    try:
        con.execute(
            "UPDATE events SET actor_id = 'EVIL', occurred_at = occurred_at + INTERVAL 3 HOUR WHERE event_id = ?",
            [event_id],
        )
    finally:
        con.close()
    code, out = _verify(db)
    assert code == 4
    assert f"stored columns differ from the event's payload at seq {seq}, event {event_id}" in out
    assert "occurred_at, actor_id" in out
    assert out.count("stored columns differ") == 1


def test_an_untouched_store_has_no_column_mismatch(store: Path) -> None:
    from dealtrail.ingest.verify import column_mismatches

    con = duckdb.connect(str(store), read_only=True)
    try:
        assert column_mismatches(con) == []
    finally:
        con.close()
