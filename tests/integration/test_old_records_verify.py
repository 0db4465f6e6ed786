"""Stores, digests and evidence packages written by dealtrail 0.2.0 (before issue 35's
encodings) still verify: the fixture in tests/fixtures/v0.2.0/ was written by that release."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.investigate.evidence import verify_package

FIXTURE = Path(__file__).parent.parent / "fixtures" / "v0.2.0"


def _store(tmp_path: Path) -> Path:
    db = tmp_path / "store.duckdb"
    with gzip.open(FIXTURE / "store.duckdb.gz", "rb") as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return db


def test_a_store_written_by_0_2_0_still_verifies_against_its_digest(tmp_path: Path) -> None:
    db = _store(tmp_path)
    r = CliRunner().invoke(cli, ["verify", "--db", str(db), "--against", str(FIXTURE / "digest.json")])
    assert r.exit_code == 0, r.output
    assert "TCP-01: 693 of 693 events chained, intact" in r.output


def test_an_evidence_package_written_by_0_2_0_still_verifies() -> None:
    report = verify_package(FIXTURE / "package.zip")
    assert report.ok, report.problem
    r = CliRunner().invoke(cli, ["verify-package", str(FIXTURE / "package.zip")])
    assert r.exit_code == 0 and "verified:" in r.stdout, r.output


def test_a_trail_chained_by_0_2_0_audited_now_keeps_its_chain(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_bytes(gzip.decompress((FIXTURE / "events.jsonl.gz").read_bytes()))
    db = tmp_path / "again.duckdb"
    r = CliRunner().invoke(cli, ["audit", str(events), "--db", str(db)])
    assert r.exit_code in (0, 1), r.output
    r = CliRunner().invoke(cli, ["verify", "--db", str(db), "--against", str(FIXTURE / "digest.json")])
    assert r.exit_code == 0, r.output
