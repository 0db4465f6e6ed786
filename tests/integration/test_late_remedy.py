"""Rulebook 10.3.5: a remedy recorded after the remedy window is stored, linked to its overdue
finding and shown on the finding page as "remedy recorded after the window" with its delay; the
verdict does not change. Within the window the same remedy closes the finding as before."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.ingest.audit import audit_file
from projections.models.late_remedies import late_remedies
from projections.models.reviews import ReviewDue
from projections.store.store import Store
from schemas.codec import encode
from streams.engine import Plausibility
from tests.revision3_trail import late_remedy_trail

WINDOW = timedelta(hours=24)
LIMITS = Plausibility(100_000, timedelta(hours=1), WINDOW)


def _store(tmp_path: Path, after_hours: float) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(encode(e) + b"\n" for e in late_remedy_trail(after_hours=after_hours)))
    db = tmp_path / "store.duckdb"
    with Store(db) as store:
        audit_file(path, store, limits=LIMITS)
        auth.add_user(store.con, "vic", "viewer", "vic-viewer-pass", datetime(2026, 11, 1, tzinfo=UTC))
    return db


def _finding_page(db: Path) -> tuple[str, str]:
    store = Store(db)
    try:
        [(fid, status)] = store.con.execute(
            """SELECT finding_id, arg_max(status, revision) FROM findings
               WHERE rule_id = 'TCP-679a.9-f-wrong-deck' GROUP BY finding_id"""
        ).fetchall()
        client = TestClient(create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "s" * 48, remedy_window=WINDOW)))
        page = client.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        client.post("/login", data={"username": "vic", "password": "vic-viewer-pass", "csrf": csrf[1], "next": "/"})
        html = client.get(f"/findings/{fid}").text
    finally:
        store.close()
    return str(status), html


def test_a_remedy_recorded_after_the_window_is_shown_beside_the_overdue_finding(tmp_path: Path) -> None:
    db = _store(tmp_path, after_hours=25)
    status, html = _finding_page(db)
    assert status == "overdue"  # the verdict stands
    assert "remedy recorded after the window" in html
    assert "RoundVoided at" in html and "DeckRemoved at" in html
    store = Store(db)
    try:
        [fid] = store.con.execute(
            "SELECT DISTINCT finding_id FROM findings WHERE rule_id = 'TCP-679a.9-f-wrong-deck'"
        ).fetchall()[0]
        late = late_remedies(store.con, fid, WINDOW)
        # the page passes the status it read: overdue reads the same events, anything else none
        assert late_remedies(store.con, fid, WINDOW, "overdue") == late
        assert late_remedies(store.con, fid, WINDOW, "remedied") == []
    finally:
        store.close()
    assert [e["type"] for e in late] == ["RoundVoided", "WagersReturned", "DeckRemoved"]
    assert all(e["delay_seconds"] > 25 * 3600 for e in late)


@pytest.mark.parametrize("after_hours", [2.0])
def test_a_remedy_within_the_window_closes_the_finding_and_is_not_called_late(
    tmp_path: Path, after_hours: float
) -> None:
    status, html = _finding_page(_store(tmp_path, after_hours=after_hours))
    assert status == "remedied"
    assert "remedy recorded after the window" not in html
