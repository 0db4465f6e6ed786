"""Reads on record (issue 34, item 6): opening a finding, a case, a replay, a report or the access
log, and every download, leave an access-log entry (who, what, when, from where) in the hash
chain, recorded without making the page wait for the store."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from projections.models import reviews
from projections.models.reviews import FindingFilter, ReviewDue
from projections.records import access_log
from projections.store.store import Store

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
T0 = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
PASSWORD = "rita-review-pass"


@pytest.fixture()
def store(audited_shift: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "reads.duckdb"
    shutil.copy(audited_shift, db)
    s = Store(db)
    auth.add_user(s.con, "rita", "admin", PASSWORD, T0)
    yield s
    s.close()


def _login(client: TestClient) -> None:
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
    assert csrf
    data = {"username": "rita", "password": PASSWORD, "csrf": csrf.group(1), "next": "/", "code": ""}
    assert client.post("/login", data=data, follow_redirects=False).status_code == 303


def _logged(store: Store, client: TestClient) -> list[dict[str, object]]:
    client.app.state.console.access.flush()  # type: ignore[attr-defined]
    rows, _ = access_log.entries(store.con, access_log.LogFilter(), None)
    return list(reversed(rows))


def test_viewing_a_finding_a_case_a_replay_and_downloading_its_package_are_in_the_access_log(store: Store) -> None:
    rows, _ = reviews.find(store.con, FindingFilter(), DUE, T0, limit=None)
    f = next(r for r in rows if r["round_id"] is not None and r.get("cause_finding_id"))
    fid, table, round_id, cause = f["finding_id"], f["table_id"], f["round_id"], f["cause_finding_id"]
    client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: T0)))
    _login(client)
    assert client.get(f"/findings/{fid}").status_code == 200
    assert client.get(f"/cases/{fid}").status_code == 200
    assert client.get("/replay", params={"table": table, "round": round_id, "finding": fid}).status_code == 200
    assert client.get(f"/api/v1/tables/{table}/replay", params={"round": round_id}).status_code == 200
    assert client.get(f"/api/v1/tables/{table}/replay", params={"round": round_id, "page": 2}).status_code in (200, 404)
    assert client.get(f"/findings/{fid}/evidence.zip").status_code == 200
    assert client.get("/reports/view", params={"from": "2026-01-01", "to": "2027-01-01"}).status_code == 200
    assert client.get("/admin/access", params={"kind": "download"}).status_code == 200
    token = auth.new_token(store.con, "rita", T0)
    assert client.get(f"/api/v1/findings/{fid}", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    logged = _logged(store, client)
    assert [e["kind"] for e in logged] == [
        "login_succeeded",
        "finding_viewed",
        "case_viewed",
        "replay_viewed",
        "replay_viewed",  # the script's first page; its next pages are the same reading
        "download",
        "report_viewed",
        "access_log_viewed",
        "finding_viewed",
    ]
    assert all(e["user_name"] == "rita" and e["client"] == "testclient" for e in logged)
    viewed, case, replay, _, package, report, log_page, api = logged[1:]
    assert viewed["detail"] == f"finding {fid} ({f['rule_id']}, table {table}, round {round_id})"
    assert case["detail"].startswith(f"case of finding {cause} (") and str(case["detail"]).endswith(
        f"opened from {fid}"
    )
    assert replay["detail"] == f"replay of table {table} round {round_id} for finding {fid}"
    assert package["detail"] == f"/findings/{fid}/evidence.zip"
    assert str(report["detail"]).startswith("/reports/view?from=2026-01-01")
    assert log_page["detail"] == "access log page 1 (kind=download)"
    assert str(api["detail"]).endswith(f"via the API with token {auth.token_hash(token)[:12]} issued by rita")
    assert all(e["logged_at"] == T0 for e in logged)  # when: the console's clock at the reading
    assert access_log.check_chain(store.con).first_break is None  # chained like every entry


def test_a_read_does_not_wait_for_the_store_and_is_chained_before_a_later_entry(store: Store) -> None:
    rows, _ = reviews.find(store.con, FindingFilter(), DUE, T0, limit=1)
    fid = rows[0]["finding_id"]
    app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: T0))
    client = TestClient(app)
    _login(client)
    lock: threading.Lock = app.state.write_lock
    with lock:  # the store's writer is busy (a projector's batch): the page is served all the same
        assert client.get(f"/findings/{fid}").status_code == 200
        assert [e["kind"] for e in _stored(store)] == ["login_succeeded"]
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get(f"/findings/{fid}").text)
    assert csrf
    client.post("/logout", data={"csrf": csrf.group(1)}, follow_redirects=False)  # stored at once, after the reads
    assert [e["kind"] for e in _stored(store)] == ["login_succeeded", "finding_viewed", "finding_viewed", "logout"]


def _stored(store: Store) -> list[dict[str, object]]:
    rows, _ = access_log.entries(store.con, access_log.LogFilter(), None)
    return list(reversed(rows))


def test_reads_wait_for_a_broker_that_is_away_and_go_in_order_with_the_next_entry(store: Store) -> None:
    sent: list[str] = []
    down = [True]

    def sink(entry: object) -> None:
        if down[0]:
            raise RuntimeError("KafkaTimeoutError")
        sent.append(entry.kind)  # type: ignore[attr-defined]

    app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: T0), access_sink=sink)
    client = TestClient(app)
    _login(client)  # not taken: kept
    rows, _ = reviews.find(store.con, FindingFilter(), DUE, T0, limit=1)
    assert client.get(f"/findings/{rows[0]['finding_id']}").status_code == 200
    app.state.console.access.flush()
    assert sent == []
    down[0] = False
    app.state.console.access.flush()  # nothing queued: the pending ones go with the next entry
    app.state.console.access.record("logout", "rita", "ok")
    assert sent == ["login_succeeded", "finding_viewed", "logout"]


def test_reads_left_when_the_store_closes_are_named_in_one_line_and_the_recorder_ends(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = Store(tmp_path / "closing.duckdb")
    app = create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: T0))
    recorder = app.state.console.access
    with app.state.write_lock:  # the recorder waits for the writer ...
        recorder.record_read("finding_viewed", "rita", "finding 0f3a", "10.0.0.7")
        store.close()  # ... which closes the store (a process ending without the console's stop)
    thread = recorder._recorder
    assert thread is not None
    thread.join(timeout=10)
    assert not thread.is_alive()
    err = capfd.readouterr().err
    assert err.count("access log: 1 read not stored: the store is closed") == 1
