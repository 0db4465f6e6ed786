"""The console in the streaming deployment, without a broker: the reviews topic's declaration, the
projector's handling of its records (stored once with the batch's offsets, bad records
dead-lettered), the console publishing reviews through a sink instead of writing them, the admin
page's user management, and the user commands refusing a store another process holds."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from kafka import TopicPartition
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.ingest.projector import ProjectSummary, _write
from projections.models import reviews
from projections.models.reviews import FindingFilter, ReviewDue
from projections.records import users
from projections.store.store import BatchCounts, Store
from schemas.reviews import Cause, FindingDisposed
from streams.topics import Topics

ROOT = Path(__file__).resolve().parents[2]
DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
PASSWORDS = {"ada": "ada-admin-pass", "rita": "rita-review-pass", "vic": "vic-viewer-pass"}
ROLES = {"ada": "admin", "rita": "reviewer", "vic": "viewer"}
NAMES = ["ns.dealing-events.v1", "ns.findings.v1", "ns.rounds.v1", "ns.dead-letter.v1", "ns.reviews.v1"]
AT = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


@dataclass
class Record:
    """What the projector reads of a Kafka record."""

    key: bytes | None
    value: bytes | None
    offset: int


class Consumer:
    """The consumer's one call ``_write`` makes: commit, after the transaction."""

    def __init__(self) -> None:
        self.commits: list[dict[object, object]] = []

    def commit(self, offsets: dict[object, object], timeout_ms: int | None = None) -> None:
        self.commits.append(offsets)


@pytest.fixture()
def store(audited_shift: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "console.duckdb"
    shutil.copy(audited_shift, db)
    s = Store(db)
    for name, role in ROLES.items():
        auth.add_user(s.con, name, role, PASSWORDS[name], AT)
    yield s
    s.close()


def first_finding(store: Store, severity: str | None = None) -> str:
    rows, _ = reviews.find(store.con, FindingFilter(severity=severity), DUE, AT, limit=1)
    return str(rows[0]["finding_id"])


def review(fid: str, review_id: str = "01JDREVIEW00000000000000A1") -> FindingDisposed:
    return FindingDisposed(
        review_id=review_id,
        finding_id=fid,
        user="rita",
        reviewed_at=AT,
        cause=Cause.DEALER_ERROR,
        corrective_action="coached",
        note="seen on camera",
    )


def review_count(store: Store) -> int:
    return int(store.con.execute("SELECT count(*) FROM reviews").fetchall()[0][0])


def test_the_reviews_topic_is_created_with_the_others_and_named_from_the_namespace() -> None:
    topics = Topics("casino-a", 6)
    assert topics.reviews.name == "casino-a.reviews.v1"
    assert topics.reviews.partitions == 6 and topics.reviews.config == {"retention.ms": "-1"}
    assert topics.reviews in topics.all()
    assert len({t.name for t in topics.all()}) == len(topics.all())


def test_reviews_from_the_topic_are_stored_once_with_the_offsets_of_their_batch(store: Store) -> None:
    fid = first_finding(store)
    r = review(fid)
    tp = TopicPartition("ns.reviews.v1", 2)
    value = r.model_dump_json().encode()
    summary = ProjectSummary(written=BatchCounts())
    consumer = Consumer()
    added = _write(store, consumer, "ns-projector", {tp: [Record(fid.encode(), value, 7)]}, NAMES, summary)
    assert added.reviews == 1
    # at-least-once: the same record again (a crash before Kafka's commit), and a copy at a later offset
    again = _write(
        store,
        consumer,
        "ns-projector",
        {tp: [Record(fid.encode(), value, 7), Record(fid.encode(), value, 8)]},
        NAMES,
        summary,
    )
    assert again.reviews == 0 and review_count(store) == 1
    assert store.offsets("ns-projector")[("ns.reviews.v1", 2)] == 9
    assert len(consumer.commits) == 2
    rows, _ = reviews.find(store.con, FindingFilter(finding_id=fid), DUE, AT)
    assert (rows[0]["review_status"], rows[0]["last_reviewed_by"], rows[0]["cause"]) == (
        "disposed",
        "rita",
        "DEALER_ERROR",
    )
    assert [h["user_name"] for h in reviews.history(store.con, fid)] == ["rita"]


def test_a_bad_record_on_the_reviews_topic_is_a_dead_letter_with_its_reason(store: Store) -> None:
    fid = first_finding(store)
    good = review(fid, "01JDREVIEW00000000000000B1").model_dump_json().encode()
    tp = TopicPartition("ns.reviews.v1", 0)
    records = [
        Record(fid.encode(), b'{"type": "FindingDisposed", "cause": "BORED"}', 0),
        Record(b"TCP-01", good, 1),  # keyed by a table, not by its finding
        Record(fid.encode(), None, 2),
        Record(fid.encode(), good, 3),
    ]
    summary = ProjectSummary(written=BatchCounts())
    added = _write(store, Consumer(), "ns-projector", {tp: records}, NAMES, summary)
    assert (added.reviews, added.dead_letters, summary.bad_records) == (1, 3, 3)
    dead = store.con.execute(
        "SELECT position, reason, detail FROM dead_letters WHERE source = 'ns.reviews.v1' ORDER BY position"
    ).fetchall()
    assert [(p, reason) for p, reason, _ in dead] == [
        ("ns.reviews.v1[0]@0", "unreadable_record"),
        ("ns.reviews.v1[0]@1", "unreadable_record"),
        ("ns.reviews.v1[0]@2", "unreadable_record"),
    ]
    assert "review_key_mismatch" in dead[1][2] and "empty record" in dead[2][2]
    assert store.offsets("ns-projector")[("ns.reviews.v1", 0)] == 4


def test_the_console_with_a_review_sink_publishes_the_review_and_leaves_the_store_to_the_projector(
    store: Store,
) -> None:
    sent: list[object] = []
    client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: AT), review_sink=sent.append))
    fid = first_finding(store, "procedural")  # disposed with a cause and a note alone
    h = {"Authorization": "Bearer " + auth.new_token(store.con, "rita", AT)}
    body = {"action": "dispose", "cause": "DEVICE", "note": "shuffler jammed"}
    r = client.post(f"/api/v1/findings/{fid}/reviews", json=body, headers=h)
    assert r.status_code == 201 and r.json()["user"] == "rita" and r.json()["reviewed_at"].startswith("2026-11-28")
    assert len(sent) == 1 and isinstance(sent[0], FindingDisposed)
    assert (sent[0].finding_id, sent[0].user, sent[0].cause) == (fid, "rita", Cause.DEVICE)
    assert review_count(store) == 0  # the projector stores it, from the topic
    store.write_batch([], reviews=[reviews.review_row(sent[0])])
    listed = client.get("/api/v1/findings", params={"review_status": "disposed"}, headers=h).json()
    assert [(f["finding_id"], f["last_reviewed_by"]) for f in listed["findings"]] == [(fid, "rita")]
    # the form says where the review went
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    client.post("/login", data={"username": "rita", "password": PASSWORDS["rita"], "csrf": csrf.group(1)})
    shown = client.get(f"/findings/{fid}?done=acknowledge")
    assert "sent to the reviews topic" in shown.text


def test_a_review_the_broker_did_not_take_is_answered_503_and_not_stored(store: Store) -> None:
    def down(event: object) -> None:
        raise RuntimeError("the review was not stored in ns.reviews.v1: KafkaTimeoutError")

    client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: AT), review_sink=down))
    fid = first_finding(store)
    h = {"Authorization": "Bearer " + auth.new_token(store.con, "rita", AT)}
    r = client.post(f"/api/v1/findings/{fid}/reviews", json={"action": "acknowledge"}, headers=h)
    assert r.status_code == 503 and "KafkaTimeoutError" in r.json()["detail"]
    assert review_count(store) == 0


def test_admin_page_resets_a_password_and_revokes_one_token_of_a_user(store: Store) -> None:
    client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=lambda: AT)))
    page = client.get("/login")
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m
    client.post("/login", data={"username": "ada", "password": PASSWORDS["ada"], "csrf": m.group(1)})
    admin = client.get("/admin/users")
    assert admin.status_code == 200 and "No active API token" in admin.text
    m = re.search(r'name="csrf" value="([^"]+)"', admin.text)
    assert m
    csrf = m.group(1)
    tokens = [auth.new_token(store.con, "rita", AT) for _ in range(2)]  # rita's own (an admin makes only his)
    r = client.get("/admin/users")
    listed = users.tokens(store.con)
    assert [t["user_name"] for t in listed] == ["rita", "rita"]
    first = auth.token_hash(tokens[0])
    assert first[:12] in r.text and tokens[0] not in r.text  # a token is shown once, when it is made
    r = client.post("/admin/users", data={"csrf": csrf, "op": "revoke", "name": "rita", "token_hash": first})
    assert r.status_code == 200 and f"token {first[:12]} of rita revoked" in r.text
    api = "/api/v1/findings?limit=1"
    assert TestClient(client.app).get(api, headers={"Authorization": f"Bearer {tokens[0]}"}).status_code == 401
    assert TestClient(client.app).get(api, headers={"Authorization": f"Bearer {tokens[1]}"}).status_code == 200
    # revoking it again, or as another user's, is refused
    again = client.post("/admin/users", data={"csrf": csrf, "op": "revoke", "name": "vic", "token_hash": first})
    assert again.status_code == 422 and "no active token" in again.text
    # a reset password: a one-time password, shown once; the old one no longer signs in; the role stays
    chosen_form = {"csrf": csrf, "op": "password", "name": "vic", "password": "vic-new-pass-2"}
    chosen = client.post("/admin/users", data=chosen_form)
    assert chosen.status_code == 422  # an admin never chooses another person's password
    r = client.post("/admin/users", data={"csrf": csrf, "op": "password", "name": "vic"})
    assert r.status_code == 200 and "password of vic reset" in r.text
    one_time = re.search(r'id="one-time-password">([^<]+)<', r.text)
    assert one_time
    u = users.user(store.con, "vic")
    assert u is not None and u["role"] == "viewer" and u["must_change"]
    assert auth.verify_password(u["password_hash"], one_time.group(1))
    assert not auth.verify_password(u["password_hash"], PASSWORDS["vic"])
    # a viewer cannot do any of it (vic sets his own password first)
    viewer = TestClient(client.app)
    m = re.search(r'name="csrf" value="([^"]+)"', viewer.get("/login").text)
    assert m
    page = viewer.post("/login", data={"username": "vic", "password": one_time.group(1), "csrf": m.group(1)})
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m and "Set your password" in page.text
    new = "vic-new-pass-2"
    form = {"csrf": m.group(1), "current": one_time.group(1), "new": new, "repeated": new}
    viewer.post("/account/password", data=form)
    csrf_v = re.search(r'name="csrf" value="([^"]+)"', viewer.get("/").text)
    assert csrf_v
    denied = viewer.post("/admin/users", data={"csrf": csrf_v.group(1), "op": "revoke", "name": "rita",
                                               "token_hash": auth.token_hash(tokens[1])})  # fmt: skip
    assert denied.status_code == 403


@pytest.fixture
def held(audited_shift: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the store held open for writing by another process (as the projector holds it)."""
    db = tmp_path / "held.duckdb"
    shutil.copy(audited_shift, db)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from projections.store.store import Store; "
         "s = Store(sys.argv[1]); print('ready', flush=True); time.sleep(600)", str(db)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    try:
        yield db
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


@pytest.mark.parametrize("args", [["users", "add", "sam", "--role", "admin"], ["users", "token", "sam"]])
def test_user_commands_refuse_a_store_another_process_holds_and_point_to_the_admin_page(
    held: Path, args: list[str]
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", *args, "--db", str(held)],
        input="a long password\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"},
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0] == (
        f"error: {held} is held by another process (a projector, an audit or a console (serve)?): "
        "manage users on the console's admin page (one writer per file)"
    )


@pytest.mark.parametrize("value", ["8000", "localhost:", ":8000", "host:99999", "host:http"])
def test_project_serve_refuses_an_address_that_is_not_host_port(value: str, tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["project", "--db", str(tmp_path / "x.duckdb"), "--serve", value])
    assert r.exit_code == 2 and "--serve takes HOST:PORT" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "x.duckdb").exists()


def test_project_serve_refuses_a_port_already_in_use_in_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # a broker port where nothing listens: the console is started before the projector dials it
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            nobody = free.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "dealtrail.cli", "project", "--db", str(tmp_path / "x.duckdb"),
             "--serve", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
            env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "DEALTRAIL_KAFKA_BOOTSTRAP": f"127.0.0.1:{nobody}",
                 "DEALTRAIL_KAFKA__CONNECT_TIMEOUT": "2"},
        )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"error: cannot serve the console on 127.0.0.1:{port}" in proc.stderr, proc.stderr
    assert not (tmp_path / "x.duckdb").exists()  # a store this run made and left empty is removed
