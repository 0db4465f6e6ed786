"""The access log in the streaming deployment, on the real broker: the console inside the
projector's process (``project --serve``) publishes each access entry to the access-log topic and
the projector chains and stores it; the admin reads it on the console's page, and the store's
chain is intact once the projector has closed the file, and the projector forwarded every entry
to the JSON-lines file its settings name."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.kafka.conftest import Cluster, stop
from tests.kafka.test_console_stream import dealtrail, free_port, wait_for

pytestmark = pytest.mark.kafka


def test_access_entries_travel_through_their_topic_into_the_projectors_store(cluster: Cluster, tmp_path: Path) -> None:
    db = tmp_path / "store" / "dealtrail.duckdb"
    port = free_port()
    siem = tmp_path / "siem" / "access.jsonl"  # the projector forwards the log it stores (issue 34, item 6)
    siem.parent.mkdir()
    env = {
        **cluster.env,
        "DEALTRAIL_CONSOLE__SESSION_SECRET": "access-session-secret-" + "x" * 32,
        "DEALTRAIL_ACCESS_FORWARD__JSONL_PATH": str(siem),
    }
    made = dealtrail(env, "users", "add", "ada", "--role", "admin", "--db", str(db), stdin="ada-long-password\n")
    assert made.returncode == 0, made.stderr
    log = tmp_path / "projector.log"
    with log.open("ab") as fh:
        projector = subprocess.Popen(
            [sys.executable, "-m", "dealtrail.cli", "project", "--db", str(db), "--serve", f"127.0.0.1:{port}"],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    browser = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    try:

        def answers() -> bool:
            try:
                return browser.get("/login").status_code == 200
            except httpx.TransportError:
                assert projector.poll() is None, log.read_text()
                return False

        wait_for("the console answers", answers, 60, log)

        def sign_in(password: str) -> int:
            csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/login").text)
            assert csrf
            data = {"username": "ada", "password": password, "csrf": csrf.group(1), "next": "/admin/access"}
            return browser.post("/login", data=data).status_code

        assert sign_in("not the password") == 401
        assert sign_in("ada-long-password") == 303

        def stored() -> str | None:
            page = browser.get("/admin/access")
            return page.text if "login_succeeded" in page.text and "login_failed" in page.text else None

        page = wait_for("the entries reach the store", stored, 60, log)
        assert "127.0.0.1" in page
        assert "access " in log.read_text()  # the console prints one line per entry
    finally:
        browser.close()
        assert stop(projector, signal.SIGINT) in (0, 130), log.read_text()

    from projections.records import access_log
    from projections.store.store import connect_read_only

    con = connect_read_only(db)
    try:
        rows = con.execute("SELECT seq, kind, outcome, user_name, client FROM access_log ORDER BY seq").fetchall()
        report = access_log.check_chain(con)
    finally:
        con.close()
    assert [r[1:] for r in rows if not r[1].endswith("_viewed")] == [
        ("user_added", "ok", "cli", "cli"),
        ("login_failed", "refused", "ada", "127.0.0.1"),
        ("login_succeeded", "ok", "ada", "127.0.0.1"),
    ]
    # the polls of the access-log page are readings on record, through the topic like the rest
    assert ("access_log_viewed", "ok", "ada", "127.0.0.1") in [r[1:] for r in rows]
    assert report.first_break is None and report.entries == len(rows)
    forwarded = [json.loads(line) for line in siem.read_text(encoding="utf-8").splitlines()]
    assert [(x["seq"], x["kind"]) for x in forwarded] == [(r[0], r[1]) for r in rows]  # all, in order, once
    assert "access log: forwarded to file" in log.read_text()

    from kafka import KafkaConsumer, TopicPartition

    topic = cluster.settings().topics.access_log.name
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        records = [(r.key, json.loads(r.value)) for r in consumer]
    finally:
        consumer.close()
    security = [(k, v["kind"]) for k, v in records if not v["kind"].endswith("_viewed")]
    assert security == [(b"access-log", "login_failed"), (b"access-log", "login_succeeded")]
    assert all("not the password" not in json.dumps(v) and "ada-long-password" not in json.dumps(v) for _, v in records)
