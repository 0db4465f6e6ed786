"""Notifications against a local HTTP receiver and a local SMTP server (aiosmtpd), both started
by the test on loopback ports: delivered once per finding and target, retried with backoff,
given up and recorded after the last attempt, and the backlog of a store is not sent."""

from __future__ import annotations

import email
import email.policy
import json
import shutil
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dealtrail.reporting.notify import Notifier, NotifyRule, SmtpConfig, failures
from projections.store.store import Store
from schemas.findings import Finding, finding_id_for


class Receiver:
    """A webhook receiver: records each JSON body; answers ``status`` (settable)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.status = 200
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers["Content-Length"])
                outer.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(outer.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture()
def smtp() -> Iterator[tuple[SmtpConfig, list[Any]]]:
    from aiosmtpd.controller import Controller

    got: list[Any] = []

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            got.append(envelope)
            return "250 OK"

    with socket.socket() as probe:  # aiosmtpd's start() connects to its own port: it needs a real one
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    yield SmtpConfig("127.0.0.1", port, "dealtrail@casino.test", timeout=5), got
    controller.stop()


@pytest.fixture()
def store(audited_shift: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "n.duckdb"
    shutil.copy(audited_shift, db)
    s = Store(db)
    yield s
    s.close()


def new_finding(store: Store, severity: str, n: int) -> Finding:
    cur = store.con.execute("SELECT * FROM dim_findings WHERE severity = ? LIMIT 1", [severity])
    cols = [d[0] for d in cur.description]
    base = dict(zip(cols, cur.fetchall()[0], strict=True))
    evidence = (f"NOTIFY-TEST-{n}",)
    f = Finding.model_validate(
        {
            **{k: base[k] for k in ("rule_id", "citation", "game", "severity", "table_id", "round_id", "message")},
            "finding_id": finding_id_for(base["rule_id"], evidence),
            "evidence_event_ids": evidence,
            "trigger_event_id": evidence[0],
            "observed_at": base["observed_at"],
        }
    )
    store.write_batch([], findings=[f])
    return f


def test_a_new_finding_reaches_the_webhook_and_the_mailbox_once(
    store: Store, receiver: Receiver, smtp: tuple[SmtpConfig, list[Any]]
) -> None:
    config, mails = smtp
    rules = [
        NotifyRule(severities=frozenset({"integrity"}), webhook=receiver.url, emails=("shift-manager@casino.test",))
    ]
    clock = Clock()
    n = Notifier(store.con, rules, config, "http://console.test", threading.Lock(), clock, max_attempts=3, backoff=60)
    assert n.run_once() == 0 and receiver.bodies == [] and mails == []  # the backlog is not sent
    f = new_finding(store, "integrity", 1)
    new_finding(store, "procedural", 2)  # matches no rule
    assert n.run_once() == 2
    assert len(receiver.bodies) == 1 and receiver.bodies[0]["finding"]["finding_id"] == f.finding_id
    assert (
        f.table_id in receiver.bodies[0]["text"]
        and f"http://console.test/findings/{f.finding_id}" in receiver.bodies[0]["text"]
    )
    assert len(mails) == 1 and mails[0].rcpt_tos == ["shift-manager@casino.test"]
    body = email.message_from_bytes(mails[0].content, policy=email.policy.default).get_body()
    assert body is not None and f.message in body.get_content()  # decoded (quoted-printable, folded lines)
    clock.now += timedelta(hours=1)
    assert n.run_once() == 0 and len(receiver.bodies) == 1 and len(mails) == 1  # de-duplicated by finding ID


def test_a_failing_webhook_is_retried_with_backoff_then_given_up_and_recorded(store: Store, receiver: Receiver) -> None:
    receiver.status = 500
    clock = Clock()
    n = Notifier(
        store.con, [NotifyRule(webhook=receiver.url)], None, None, threading.Lock(), clock, max_attempts=3, backoff=60
    )
    f = new_finding(store, "voiding", 3)
    n.run_once()
    assert len(receiver.bodies) == 1
    clock.now += timedelta(seconds=30)
    n.run_once()
    assert len(receiver.bodies) == 1  # still backing off (60 s)
    clock.now += timedelta(seconds=31)
    n.run_once()
    assert len(receiver.bodies) == 2
    clock.now += timedelta(seconds=119)
    n.run_once()
    assert len(receiver.bodies) == 2  # the wait doubled to 120 s
    clock.now += timedelta(seconds=2)
    n.run_once()
    assert len(receiver.bodies) == 3
    clock.now += timedelta(days=1)
    n.run_once()
    assert len(receiver.bodies) == 3  # given up after 3 attempts
    shown = failures(store.con)
    assert [(x["finding_id"], x["outcome"], x["attempt"], x["error"]) for x in shown] == [
        (f.finding_id, "gave_up", 3, "HTTP 500")
    ]


def test_a_webhook_that_recovers_is_delivered_on_retry(store: Store, receiver: Receiver) -> None:
    receiver.status = 503
    clock = Clock()
    n = Notifier(
        store.con, [NotifyRule(webhook=receiver.url)], None, None, threading.Lock(), clock, max_attempts=5, backoff=10
    )
    new_finding(store, "voiding", 4)
    assert n.run_once() == 0
    receiver.status = 204
    clock.now += timedelta(seconds=11)
    assert n.run_once() == 1
    assert failures(store.con) == []


def test_email_without_a_reachable_server_or_starttls_is_recorded_as_failed(
    store: Store, smtp: tuple[SmtpConfig, list[Any]]
) -> None:
    config, mails = smtp
    clock = Clock()
    tls = SmtpConfig(config.host, config.port, config.sender, starttls=True, password="s3cret", username="u", timeout=5)
    n = Notifier(
        store.con,
        [NotifyRule(emails=("a@casino.test",))],
        tls,
        None,
        threading.Lock(),
        clock,
        max_attempts=2,
        backoff=1,
    )
    new_finding(store, "integrity", 5)
    assert n.run_once() == 0 and mails == []
    (row,) = failures(store.con)
    assert row["outcome"] == "failed" and "STARTTLS" in row["error"].upper() and "s3cret" not in row["error"]


def test_undelivered_notifications_are_shown_on_the_floor(store: Store, receiver: Receiver) -> None:
    import re

    from fastapi.testclient import TestClient

    from dealtrail.console import auth
    from dealtrail.console.app import ConsoleConfig, create_app
    from projections.models.reviews import ReviewDue

    receiver.status = 500
    clock = Clock()
    n = Notifier(
        store.con, [NotifyRule(webhook=receiver.url)], None, None, threading.Lock(), clock, max_attempts=1, backoff=1
    )
    new_finding(store, "voiding", 6)
    n.run_once()
    auth.add_user(store.con, "vic", "viewer", "vic-viewer-pass", clock())
    client = TestClient(create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "n" * 48, clock=clock)))
    page = client.get("/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf
    client.post("/login", data={"username": "vic", "password": "vic-viewer-pass", "csrf": csrf.group(1)})
    floor = client.get("/").text
    assert "1 notification not delivered" in floor and "given up" in floor and "HTTP 500" in floor


def test_notification_rules_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from dealtrail.settings import Settings

    monkeypatch.setenv(
        "DEALTRAIL_NOTIFY__RULES",
        '[{"severities": ["voiding"], "webhook": "http://127.0.0.1:9/hook"},'
        ' {"tables": ["TCP-01"], "emails": ["a@b.test"]}]',
    )
    monkeypatch.setenv("DEALTRAIL_NOTIFY__SMTP_PASSWORD", "s3cret")
    s = Settings()
    assert [r.webhook for r in s.notify.rules] == ["http://127.0.0.1:9/hook", None]
    assert s.notify.rules[1].emails == ["a@b.test"] and "s3cret" not in repr(s)


@pytest.fixture()
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The host's zone is America/New_York (the digest must not depend on it)."""
    import time as _time

    monkeypatch.setenv("TZ", "America/New_York")
    _time.tzset()
    yield
    monkeypatch.undo()
    _time.tzset()


def _digest(targets: tuple[str, ...], at: str = "08:00") -> Any:
    from datetime import time as wall
    from zoneinfo import ZoneInfo

    from dealtrail.reporting.notify import DigestConfig
    from projections.models.reviews import ReviewDue

    return DigestConfig(
        wall.fromisoformat(at), ZoneInfo("America/New_York"), targets, ReviewDue(24, 24, 72), "Riverfront"
    )


def test_the_daily_digest_of_late_reviews_goes_to_each_target_once_a_local_day(
    store: Store, receiver: Receiver, smtp: tuple[SmtpConfig, list[Any]], new_york: None
) -> None:
    from dealtrail.reporting.notify import digest_target
    from projections.models import reviews
    from schemas.reviews import FindingAssigned, FindingDisposed

    config, mails = smtp
    targets = (digest_target(receiver.url), digest_target("compliance@casino.test"))
    from projections.reports.report import incidents, query

    # the digest lists incidents, as the report counts them: a consequence goes with its cause
    ids = sorted(f["finding_id"] for f in incidents(query(store.con.cursor(), "rpt_findings").to_pylist()))
    assigned, disposed = ids[0], ids[1]
    t = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    reviews.append_review(
        store.con, FindingAssigned(review_id="R1", finding_id=assigned, user="ann", reviewed_at=t, assignee="bob")
    )
    done = FindingDisposed(review_id="R2", finding_id=disposed, user="ann", reviewed_at=t, cause="DEALER_ERROR")
    reviews.append_review(store.con, done)
    clock = Clock()
    clock.now = datetime(2026, 12, 1, 12, 59, tzinfo=UTC)  # 07:59 in New York: Nov 30's digest was missed
    n = Notifier(store.con, [], config, "http://console.test", threading.Lock(), clock, 3, 60, digest=_digest(targets))
    assert n.run_once() == 2
    assert receiver.bodies[0]["digest"]["day"] == "2026-11-30" and len(mails) == 1
    clock.now = datetime(2026, 12, 1, 12, 59, 59, tzinfo=UTC)
    assert n.run_once() == 0  # de-duplicated per (day, target)
    clock.now = datetime(2026, 12, 1, 13, 0, tzinfo=UTC)  # 08:00 EST
    assert n.run_once() == 2
    body = receiver.bodies[-1]
    late = body["digest"]["late"]
    undisposed = len(ids) - 1
    assert body["digest"]["day"] == "2026-12-01" and len(late) == undisposed
    assert disposed not in {x["finding_id"] for x in late}
    row = next(x for x in late if x["finding_id"] == assigned)
    assert row["assignee"] == "bob" and row["late_seconds"] > 0
    assert f"{undisposed} reviews late" in body["text"] and "assigned to bob" in body["text"]
    assert f"http://console.test/findings/{assigned}" in body["text"]
    assert "-05:00" in body["text"]  # due times shown in the digest's zone, with the offset
    assert mails[-1].rcpt_tos == ["compliance@casino.test"]
    assert "late reviews at Riverfront, 2026-12-01" in mails[-1].content.decode()
    clock.now += timedelta(hours=20)
    assert n.run_once() == 0


def test_the_digest_follows_local_time_across_the_spring_dst_change_and_says_when_none_is_late(
    store: Store, receiver: Receiver, new_york: None
) -> None:
    from dealtrail.reporting.notify import digest_target

    clock = Clock()
    n = Notifier(
        store.con, [], None, None, threading.Lock(), clock, 3, 60, digest=_digest((digest_target(receiver.url),))
    )
    sent = []
    # 08:00 EST is 13:00 UTC on 7 March 2026; clocks go forward on 8 March: 08:00 EDT is 12:00 UTC
    for hour_utc in [(7, 12, 59), (7, 13, 0), (8, 11, 59), (8, 12, 0), (8, 13, 0), (9, 12, 0)]:
        day, h, m = hour_utc
        clock.now = datetime(2026, 3, day, h, m, tzinfo=UTC)
        before = len(receiver.bodies)
        n.run_once()
        sent += [(clock.now, b["digest"]["day"]) for b in receiver.bodies[before:]]
    assert [(when.day, when.hour, d) for when, d in sent] == [
        (7, 12, "2026-03-06"),  # the missed digest of the day before, once
        (7, 13, "2026-03-07"),
        (8, 12, "2026-03-08"),  # 08:00 EDT, an hour earlier in UTC
        (9, 12, "2026-03-09"),
    ]
    assert "No review is late." in receiver.bodies[-1]["text"]  # the findings were detected later
    assert receiver.bodies[-1]["digest"]["late"] == []


def test_a_failing_digest_is_retried_with_backoff_and_shown_when_given_up(store: Store, receiver: Receiver) -> None:
    from dealtrail.reporting.notify import digest_target

    receiver.status = 500
    clock = Clock()
    clock.now = datetime(2026, 12, 1, 13, 0, tzinfo=UTC)
    n = Notifier(
        store.con, [], None, None, threading.Lock(), clock, 2, 60, digest=_digest((digest_target(receiver.url),))
    )
    n.run_once()
    clock.now += timedelta(seconds=30)
    n.run_once()
    assert len(receiver.bodies) == 1  # backing off
    clock.now += timedelta(seconds=31)
    n.run_once()
    assert len(receiver.bodies) == 2
    clock.now += timedelta(hours=1)
    n.run_once()
    assert len(receiver.bodies) == 2
    assert [(x["finding_id"], x["outcome"], x["error"]) for x in failures(store.con)] == [
        ("digest:2026-12-01", "gave_up", "HTTP 500")
    ]
    import re

    from fastapi.testclient import TestClient

    from dealtrail.console import auth
    from dealtrail.console.app import ConsoleConfig, create_app
    from projections.models.reviews import ReviewDue

    auth.add_user(store.con, "vic", "viewer", "vic-viewer-pass", clock())
    client = TestClient(create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "n" * 48, clock=clock)))
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
    assert csrf
    client.post("/login", data={"username": "vic", "password": "vic-viewer-pass", "csrf": csrf.group(1)})
    floor = client.get("/").text
    assert "late-review digest 2026-12-01" in floor and "given up" in floor and "/findings/digest:" not in floor


def test_digest_settings_are_read_from_the_environment_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from dealtrail.reporting.notify import digest_target
    from dealtrail.settings import Settings

    monkeypatch.setenv("DEALTRAIL_NOTIFY__DIGEST_AT", "08:00")
    monkeypatch.setenv("DEALTRAIL_NOTIFY__DIGEST_TZ", "America/New_York")
    monkeypatch.setenv("DEALTRAIL_NOTIFY__DIGEST_TO", '["https://hooks.casino.test/x", "compliance@casino.test"]')
    s = Settings()
    assert s.notify.digest_at is not None and s.notify.digest_at.hour == 8
    assert [digest_target(t) for t in s.notify.digest_to] == [
        "webhook:https://hooks.casino.test/x",
        "email:compliance@casino.test",
    ]
    monkeypatch.setenv("DEALTRAIL_NOTIFY__DIGEST_TZ", "Mars/Olympus")
    with pytest.raises(ValidationError, match="unknown time zone"):
        Settings()
    monkeypatch.setenv("DEALTRAIL_NOTIFY__DIGEST_TZ", "UTC")
    monkeypatch.setenv("DEALTRAIL_NOTIFY__DIGEST_TO", '["not a target"]')
    with pytest.raises(ValidationError, match="neither an http"):
        Settings()


def test_control_chart_signals_are_sent_once_as_they_appear_and_the_backlog_is_not(
    tmp_path: Path, receiver: Receiver
) -> None:
    from dealtrail.reporting.notify import SIGNAL, SignalConfig
    from dealtrail.simulator.month import MonthSpec, Raise, write_month

    start = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
    raised = Raise("D-TCP-01-2", start + timedelta(days=7), start + timedelta(days=14), 5.0)
    month = tmp_path / "month.duckdb"
    write_month(str(month), MonthSpec(tables=3, days=21, start=start, seed=3, raises=(raised,)))
    signals = SignalConfig(("webhook:" + receiver.url,), (100, 1.4427, 8.0, "week"), "UTC", 35, "North <b>")
    clock = Clock()

    def notifier(db: Path) -> Notifier:
        s = Store(db)
        return Notifier(s.con, [], None, "http://console.test", threading.Lock(), clock, 3, 60, signals=signals)

    # switched on in the middle of the raised week: that week's signal is sent when it appears
    clock.now = start + timedelta(days=10)
    on_time = tmp_path / "on-time.duckdb"
    shutil.copy(month, on_time)
    n = notifier(on_time)
    clock.now = start + timedelta(days=22)
    assert n.run_once() == len(receiver.bodies) > 0
    sent = [b["signal"] for b in receiver.bodies]
    dealer = [s for s in sent if s["kind"] == "dealer"]
    assert [(s["subject_id"], s["slot"], s["slot_start_utc"]) for s in dealer] == [
        (raised.dealer_id, "week", "2026-11-09T00:00:00+00:00")
    ]
    assert all(s["kind"] == "table" and s["slot"] == "day" for s in sent if s not in dealer)
    length = {"day": timedelta(days=1), "week": timedelta(days=7)}
    assert all(
        datetime.fromisoformat(s["slot_start_utc"]) + length[s["slot"]] > start + timedelta(days=10) for s in sent
    )  # fmt: skip  (no slot that ended before they were switched on)
    text = next(b["text"] for b in receiver.bodies if b["signal"]["kind"] == "dealer")
    assert "Control-chart signal at North <b>: dealer D-TCP-01-2, week from 2026-11-09 00:00 (UTC)" in text
    assert "asks for a look at the rate, not for discipline" in text
    assert "http://console.test/dealers/D-TCP-01-2?period=90d&slot=week#control" in text
    assert n.run_once() == 0 and len(receiver.bodies) == len(sent)  # once per signal and target
    keys = n.con.execute("SELECT DISTINCT finding_id FROM notifications").fetchall()
    assert all(k.startswith(SIGNAL) for (k,) in keys) and len(keys) == len(sent)
    n.con.close()
    # switched on after the month: its signals are the backlog, not sent
    receiver.bodies.clear()
    late = tmp_path / "late.duckdb"
    shutil.copy(month, late)
    clock.now = start + timedelta(days=22)
    n = notifier(late)
    clock.now = start + timedelta(days=23)
    assert n.run_once() == 0 and receiver.bodies == []
    n.close()
    assert n._http.is_closed
    n.con.close()


def test_signal_targets_are_read_from_the_environment_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from dealtrail.settings import Settings

    monkeypatch.setenv("DEALTRAIL_NOTIFY__SIGNALS_TO", '["https://hooks.casino.test/x", "compliance@casino.test"]')
    assert Settings().notify.signals_to == ["https://hooks.casino.test/x", "compliance@casino.test"]
    monkeypatch.setenv("DEALTRAIL_NOTIFY__SIGNALS_TO", '["not a target"]')
    with pytest.raises(ValidationError):
        Settings()


def test_dealtrail_serve_sends_a_new_signal_and_stops_its_notifier_cleanly(tmp_path: Path, receiver: Receiver) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from dealtrail.reporting.notify import NOTIFY_SQL
    from dealtrail.simulator.month import MonthSpec, Raise, write_month

    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    monday = today - timedelta(days=today.weekday())
    start = monday - timedelta(days=21)  # two quiet weeks, then last week's rate raised fivefold
    raised = Raise("D-TCP-01-2", monday - timedelta(days=7), monday, 5.0)
    db = tmp_path / "store.duckdb"
    write_month(str(db), MonthSpec(tables=3, days=21, start=start, seed=3, raises=(raised,)))
    with Store(db) as store:  # notifications switched on (an earlier run) in the quiet weeks
        store.con.execute(NOTIFY_SQL)
        store.con.execute("INSERT INTO notify_mark VALUES (-1, ?)", [start + timedelta(days=10)])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "DEALTRAIL_NOTIFY__SIGNALS_TO": json.dumps([receiver.url])}
    server = subprocess.Popen(
        [sys.executable, "-m", "dealtrail.cli", "serve", "--db", str(db), "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not any(b["signal"]["kind"] == "dealer" for b in receiver.bodies) and time.monotonic() < deadline:
            assert server.poll() is None, server.communicate()
            time.sleep(0.5)
        time.sleep(1)  # the round's other deliveries
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
    dealer = [b["signal"] for b in receiver.bodies if b["signal"]["kind"] == "dealer"]
    assert [(s["subject_id"], s["slot_start_utc"]) for s in dealer] == [
        (raised.dealer_id, (monday - timedelta(days=7)).isoformat())
    ], err
    # uvicorn shuts down, then ends by the signal it caught (its documented behaviour): -15
    assert server.returncode in (0, -signal.SIGTERM) and "Traceback" not in err and "Error" not in err, err
    with Store(db) as store:  # each delivery recorded before the store closed
        sent = store.con.execute("SELECT count(*) FROM notifications WHERE outcome = 'delivered'").fetchone()
    assert sent is not None and sent[0] == len(receiver.bodies)
