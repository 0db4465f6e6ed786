"""Security basics: parameterised report queries, secrets kept out of output, private files."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from dealtrail.settings import Settings
from projections.reports.report import query, write_report
from projections.store.store import connect_read_only
from streams.kafka import client_config


@pytest.fixture(scope="module")
def store(audited_shift: Path) -> Path:
    return audited_shift


def test_a_table_filter_cannot_inject_sql(store: Path) -> None:
    con = connect_read_only(store)
    try:
        assert query(con, "rpt_findings", table_id="x' OR 1=1 --").num_rows == 0
        assert query(con, "rpt_findings", table_id="TCP-01").num_rows > 0
    finally:
        con.close()


def test_store_and_reports_are_owner_only(store: Path, tmp_path: Path) -> None:
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    files = write_report(store, tmp_path / "r")
    for p in (files.html, files.csv, files.parquet, files.summary):
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


def test_the_sasl_password_is_not_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEALTRAIL_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("DEALTRAIL_KAFKA__SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("DEALTRAIL_KAFKA__SASL_USERNAME", "dealtrail")
    monkeypatch.setenv("DEALTRAIL_KAFKA__SASL_PASSWORD", "hunter2-very-secret")
    settings = Settings()
    assert "hunter2" not in repr(settings) and "hunter2" not in str(settings.kafka)
    assert "hunter2" not in settings.model_dump_json()
    cfg = client_config(settings.kafka, "x")
    assert cfg["sasl_plain_password"] == "hunter2-very-secret"  # handed to the client, not printed
    assert cfg["security_protocol"] == "SASL_SSL" and cfg["sasl_mechanism"] == "SCRAM-SHA-512"
