"""Dispositions under four eyes, over a small audited store through the console's API and pages:
the manager role, what a disposition needs, a NOT_A_VIOLATION of a voiding or integrity finding
proposed until another manager approves it (or rejects it), the assignees offered, "my queue",
bulk acknowledge / assign, the findings export's review columns, the report's proposer and
approver, and the review stream through a sink (the streaming deployment's reviews topic)."""

from __future__ import annotations

import csv
import io
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.ingest.projector import _review_row
from projections.models import incidents, reviews
from projections.models.reviews import DispositionNeeds, FindingFilter, ReviewDue
from projections.records import users
from projections.reports.report import write_report
from projections.store.store import Store
from schemas.reviews import REVIEW_ADAPTER, FindingApproved, FindingDispositionProposed, FindingRejected

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
USERS = {"ada": "admin", "max": "manager", "mia": "manager", "rita": "reviewer", "ron": "reviewer", "vic": "viewer"}
AT = datetime(2026, 11, 1, tzinfo=UTC)
FULL = {"corrective_action": "none needed", "note": "video shows the cut card"}


class Clock:
    """A settable clock (the console's ``now``)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)  # each review a second after the one before
        return self.now


@pytest.fixture(scope="module")
def eyes_db(audited_shift: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The audited shift with the users of :data:`USERS` and a deactivated reviewer (made once:
    hashing passwords is slow on purpose)."""
    db = tmp_path_factory.mktemp("eyes") / "eyes.duckdb"
    shutil.copy(audited_shift, db)
    with Store(db) as s:
        for name, role in USERS.items():
            auth.add_user(s.con, name, role, f"{name}-long-password", AT)
        auth.add_user(s.con, "gone", "reviewer", "gone-long-password", AT)
        users.put_user(s.con, "gone", "reviewer", None, False, AT, "ada")  # deactivated
    return db


@pytest.fixture()
def store(eyes_db: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "eyes.duckdb"
    shutil.copy(eyes_db, db)
    s = Store(db)
    yield s
    s.close()


@pytest.fixture()
def clock(store: Store) -> Clock:
    last = store.con.execute("SELECT max(observed_at) FROM findings").fetchall()[0][0]
    return Clock(last + timedelta(hours=1))


@pytest.fixture()
def client(store: Store, clock: Clock) -> TestClient:
    return TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock)))


def token(store: Store, name: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + auth.new_token(store.con, name, AT)}


def finding_of(store: Store, severity: str, n: int = 0) -> str:
    rows, _ = reviews.find(store.con, FindingFilter(severity=severity, incident=True), DUE, AT, limit=n + 1)
    return str(rows[n]["finding_id"])


def review(client: TestClient, store: Store, fid: str, who: str, **body: Any) -> Any:
    return client.post(f"/api/v1/findings/{fid}/reviews", json=body, headers=token(store, who))


def get(client: TestClient, store: Store, fid: str) -> dict[str, Any]:
    got: dict[str, Any] = client.get(f"/api/v1/findings/{fid}", headers=token(store, "vic")).json()
    return got


def login(client: TestClient, name: str) -> str:
    """Sign in through the login form; returns the session's CSRF token."""
    csrf = _csrf(client.get("/login").text)
    r = client.post("/login", data={"username": name, "password": f"{name}-long-password", "csrf": csrf, "next": "/"})
    assert r.status_code == 200, r.text
    return _csrf(r.text)


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field in the form"
    return m.group(1)


# -- the done-when of issue 21 item 4 ---------------------------------------------------------


def test_not_a_violation_of_a_voiding_finding_stays_open_until_another_manager_approves_it(
    client: TestClient, store: Store, tmp_path: Path
) -> None:
    fid = finding_of(store, "voiding")
    proposed = review(client, store, fid, "rita", action="dispose", cause="NOT_A_VIOLATION", **FULL)
    assert proposed.status_code == 201 and proposed.json()["type"] == "FindingDispositionProposed"
    row = get(client, store, fid)
    assert (row["review_status"], row["cause"], row["disposed_by"]) == ("pending_approval", None, "rita")
    assert incidents.counts(store.con, DUE, AT, FindingFilter(finding_id=fid)).not_disposed == 1  # still open
    # the proposer cannot approve it, a reviewer never can
    refused = review(client, store, fid, "rita", action="approve")
    assert refused.status_code == 403 and "manager" in refused.json()["detail"]
    assert review(client, store, fid, "ron", action="approve").status_code == 403
    approved = review(client, store, fid, "max", action="approve", note="seen the video")
    assert approved.status_code == 201, approved.text
    assert approved.json()["type"] == "FindingApproved"
    assert approved.json()["proposal_id"] == proposed.json()["review_id"]
    row = get(client, store, fid)
    assert (row["review_status"], row["cause"], row["disposed_by"], row["approved_by"]) == (
        "disposed",
        "NOT_A_VIOLATION",
        "rita",
        "max",
    )
    assert incidents.counts(store.con, DUE, AT, FindingFilter(finding_id=fid)).not_disposed == 0
    # the report shows who proposed and who approved
    html = write_report(store.con, tmp_path / "report", review_due=DUE).html.read_text()
    assert "proposed by rita, approved by max" in html


def test_a_manager_cannot_approve_his_own_proposal_and_another_rejects_it_with_a_note(
    client: TestClient, store: Store
) -> None:
    fid = finding_of(store, "integrity")
    assert review(client, store, fid, "max", action="dispose", cause="NOT_A_VIOLATION", **FULL).status_code == 201
    assert get(client, store, fid)["review_status"] == "pending_approval"
    assert review(client, store, fid, "max", action="approve").status_code == 403  # his own proposal
    assert review(client, store, fid, "max", action="reject", note="no").status_code == 403
    assert review(client, store, fid, "mia", action="reject").status_code == 422  # a rejection needs a note
    rejected = review(client, store, fid, "mia", action="reject", note="the video shows a second exposure")
    assert rejected.status_code == 201 and rejected.json()["type"] == "FindingRejected"
    row = get(client, store, fid)
    assert (row["review_status"], row["cause"], row["approved_by"]) == ("reopened", None, None)
    assert [r["type"] for r in row["reviews"]] == ["FindingDispositionProposed", "FindingRejected"]
    # nothing waits for approval any more; an admin can do what a manager can
    assert review(client, store, fid, "ada", action="approve").status_code == 409
    assert review(client, store, fid, "rita", action="dispose", cause="NOT_A_VIOLATION", **FULL).status_code == 201
    assert review(client, store, fid, "ada", action="approve").status_code == 201
    assert get(client, store, fid)["approved_by"] == "ada"


def test_a_proposal_assigned_to_a_manager_stays_pending_and_can_be_approved(client: TestClient, store: Store) -> None:
    fid = finding_of(store, "voiding")
    assert review(client, store, fid, "rita", action="dispose", cause="NOT_A_VIOLATION", **FULL).status_code == 201
    assert review(client, store, fid, "rita", action="assign", assignee="max").status_code == 201
    assert review(client, store, fid, "ron", action="acknowledge").status_code == 201
    row = get(client, store, fid)
    assert (row["review_status"], row["assignee"], row["disposed_by"]) == ("pending_approval", "max", "rita")
    assert review(client, store, fid, "max", action="approve").status_code == 201
    assert get(client, store, fid)["review_status"] == "disposed"


def test_other_causes_and_procedural_findings_are_disposed_without_approval(client: TestClient, store: Store) -> None:
    voiding, procedural = finding_of(store, "voiding"), finding_of(store, "procedural")
    r = review(client, store, voiding, "rita", action="dispose", cause="DEALER_ERROR", **FULL)
    assert r.status_code == 201 and r.json()["type"] == "FindingDisposed"
    r = review(client, store, procedural, "rita", action="dispose", cause="NOT_A_VIOLATION")
    assert r.status_code == 201 and r.json()["type"] == "FindingDisposed"
    assert [get(client, store, f)["review_status"] for f in (voiding, procedural)] == ["disposed", "disposed"]
    assert get(client, store, voiding)["disposed_by"] == "rita" and get(client, store, voiding)["approved_by"] is None


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ({"cause": "DEALER_ERROR", "note": "seen"}, "corrective_action"),
        ({"cause": "DEALER_ERROR", "corrective_action": "coached"}, "note"),
        ({"cause": "DEALER_ERROR", "corrective_action": "  ", "note": "seen"}, "corrective_action"),
        ({"cause": "NOT_A_VIOLATION"}, "corrective_action"),
        ({**FULL}, "cause"),
    ],
)
def test_a_disposition_of_a_voiding_finding_needs_a_cause_a_corrective_action_and_a_note(
    client: TestClient, store: Store, body: dict[str, str], missing: str
) -> None:
    fid = finding_of(store, "voiding")
    r = review(client, store, fid, "rita", action="dispose", **body)
    if missing == "cause":  # the document says a disposition needs one: a 422 for the request's shape
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", missing], r.text
    else:  # what a voiding finding needs is the settings' and the store's: a 409 (issue 47, item 7)
        assert r.status_code == 409 and r.json()["detail"].startswith(f"{missing}: a disposition of a voiding"), r.text
    assert get(client, store, fid)["reviews"] == []


def test_what_a_disposition_needs_per_severity_is_a_setting(store: Store, clock: Clock) -> None:
    needs = DispositionNeeds(voiding=(), integrity=(), procedural=("note",))
    client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock, disposition_needs=needs)))
    procedural, voiding = finding_of(store, "procedural"), finding_of(store, "voiding")
    assert review(client, store, procedural, "rita", action="dispose", cause="DEVICE").status_code == 409
    assert review(client, store, procedural, "rita", action="dispose", cause="DEVICE", note="jam").status_code == 201
    assert review(client, store, voiding, "rita", action="dispose", cause="DEVICE").status_code == 201


def test_only_active_users_who_can_review_are_offered_and_taken_as_assignees(client: TestClient, store: Store) -> None:
    fid = finding_of(store, "voiding")
    for who in ("vic", "gone", "nobody"):
        r = review(client, store, fid, "rita", action="assign", assignee=who)  # who it is: the store's (409)
        assert r.status_code == 409 and r.json()["detail"].startswith("assignee: assign needs"), (who, r.text)
    assert review(client, store, fid, "rita", action="assign", assignee="max").status_code == 201
    login(client, "rita")
    for page in (client.get(f"/findings/{fid}").text, client.get("/findings").text):
        offered = re.findall(r"<option>([^<]+)</option>", page.split('name="assignee"')[1].split("</select>")[0])
        assert offered == ["ada", "max", "mia", "rita", "ron"]


def test_the_finding_page_offers_a_manager_approve_and_reject_with_csrf(client: TestClient, store: Store) -> None:
    fid = finding_of(store, "voiding")
    review(client, store, fid, "rita", action="dispose", cause="NOT_A_VIOLATION", **FULL)
    login(client, "rita")
    page = client.get(f"/findings/{fid}").text
    assert "Awaiting a manager" in page and 'value="approve"' not in page  # the proposer: no buttons
    client.post("/logout", data={"csrf": _csrf(page)})
    login(client, "max")
    page = client.get(f"/findings/{fid}").text
    assert "Awaiting a manager" in page and "rita proposed" in page
    assert 'value="approve"' in page and 'value="reject"' in page
    url = f"/findings/{fid}/reviews"
    assert client.post(url, data={"csrf": "forged", "action": "approve"}).status_code == 403
    r = client.post(url, data={"csrf": _csrf(page), "action": "approve"}, follow_redirects=False)
    assert r.status_code == 303
    shown = client.get(f"/findings/{fid}").text
    assert "Approved by" in shown and "Awaiting a manager" not in shown
    assert get(client, store, fid)["review_status"] == "disposed"
    again = client.post(url, data={"csrf": _csrf(shown), "action": "approve"})  # nothing pending any more
    assert again.status_code == 409 and "text/html" in again.headers["content-type"]
    assert "Approved by" in again.text and "{&#34;detail&#34;" not in again.text and '{"detail"' not in again.text


def test_my_queue_lists_my_undisposed_assignments_soonest_due_first(client: TestClient, store: Store) -> None:
    procedural, voiding, done = (
        finding_of(store, "procedural"),
        finding_of(store, "voiding"),
        finding_of(store, "integrity"),
    )
    for fid in (procedural, voiding, done):
        assert review(client, store, fid, "max", action="assign", assignee="rita").status_code == 201
    assert (
        review(client, store, finding_of(store, "voiding", 1), "max", action="assign", assignee="ron").status_code
        == 201
    )
    assert review(client, store, done, "rita", action="dispose", cause="DEVICE", **FULL).status_code == 201
    login(client, "rita")
    page = client.get("/findings?mine=1&sort=due&order=asc").text
    listed = list(dict.fromkeys(re.findall(r'<a href="/findings/([0-9a-f]{32})">', page)))
    assert listed == [voiding, procedural]  # voiding is due within 24 h, procedural within 72 h
    assert "My queue</strong>" in page
    assert 'href="/findings?mine=1&amp;sort=due&amp;order=asc">My queue' in client.get("/findings").text


def test_bulk_acknowledge_and_assign_record_one_review_event_per_finding(client: TestClient, store: Store) -> None:
    fids = [finding_of(store, "procedural", n) for n in range(3)]
    csrf = login(client, "rita")
    form = {"csrf": csrf, "action": "acknowledge", "finding_id": fids, "back_severity": "procedural"}
    r = client.post("/findings/bulk-reviews", data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/findings?severity=procedural")
    assert "Recorded 3 reviews (acknowledge)" in client.get(r.headers["location"]).text
    acks = [get(client, store, f)["reviews"] for f in fids]
    assert [[x["type"] for x in a] for a in acks] == [["FindingAcknowledged"]] * 3
    assert len({a[0]["review_id"] for a in acks}) == 3  # separate events
    assign = {"csrf": csrf, "action": "assign", "assignee": "ron", "finding_id": fids[:2]}
    assert client.post("/findings/bulk-reviews", data=assign, follow_redirects=False).status_code == 303
    assert [get(client, store, f)["assignee"] for f in fids] == ["ron", "ron", None]
    # nothing is recorded for a viewer as assignee, an unknown finding, a forged form
    for bad, status in (
        ({**assign, "assignee": "vic"}, 422),
        ({**assign, "finding_id": [fids[2], "0" * 32]}, 404),
        ({**assign, "csrf": "forged"}, 403),
    ):
        assert client.post("/findings/bulk-reviews", data=bad).status_code == status
    assert get(client, store, fids[2])["assignee"] is None
    client.post("/logout", data={"csrf": csrf})
    csrf = login(client, "vic")
    assert client.post("/findings/bulk-reviews", data={**form, "csrf": csrf}).status_code == 403
    assert 'action="/findings/bulk-reviews"' not in client.get("/findings").text  # no bulk form for a viewer


def test_the_findings_export_carries_the_review_columns_neutralised(client: TestClient, store: Store) -> None:
    fid = finding_of(store, "voiding")
    body = {"corrective_action": '=HYPERLINK("http://x")', "note": "+1 seen"}
    review(client, store, fid, "rita", action="dispose", cause="NOT_A_VIOLATION", **body)
    login(client, "vic")
    got = list(csv.DictReader(io.StringIO(client.get("/findings.csv").text)))
    row = next(r for r in got if r["finding_id"] == fid)
    assert row["review_status"] == "pending_approval" and row["cause"] == "NOT_A_VIOLATION"
    assert row["corrective_action"] == '\'=HYPERLINK("http://x")' and row["disposition_note"] == "'+1 seen"
    assert (row["disposed_by"], row["approved_by"]) == ("rita", "")
    review(client, store, fid, "mia", action="approve")
    got = list(csv.DictReader(io.StringIO(client.get("/findings.csv").text)))
    row = next(r for r in got if r["finding_id"] == fid)
    assert (row["review_status"], row["disposed_by"], row["approved_by"]) == ("disposed", "rita", "mia")


def test_the_api_names_the_reviewer_user_in_the_reply_and_the_history(client: TestClient, store: Store) -> None:
    fid = finding_of(store, "procedural")
    made = review(client, store, fid, "rita", action="acknowledge").json()
    history = get(client, store, fid)["reviews"]
    assert made["user"] == history[0]["user"] == "rita"
    assert history[0]["user_name"] == "rita"  # the old key, a deprecated alias
    doc = client.get("/api/v1/openapi.json", headers=token(store, "vic")).json()
    row = doc["components"]["schemas"]["ReviewRow"]
    assert "user" in row["required"] and row["properties"]["user_name"].get("deprecated") is True
    actions = doc["components"]["schemas"]["ReviewRequest"]["properties"]["action"]["enum"]
    assert {"approve", "reject"} <= set(actions)


def test_the_store_view_and_the_model_agree_on_proposals_approvals_and_rejections(
    client: TestClient, store: Store
) -> None:
    a, b, c = finding_of(store, "voiding"), finding_of(store, "voiding", 1), finding_of(store, "integrity")
    for fid in (a, b, c):
        review(client, store, fid, "rita", action="dispose", cause="NOT_A_VIOLATION", **FULL)
    review(client, store, a, "max", action="approve")
    review(client, store, b, "max", action="reject", note="no")
    review(client, store, c, "rita", action="assign", assignee="max")  # still pending
    keys = ("review_status", "cause", "disposed_by", "approved_by")
    rows, _ = incidents.records(store.con, FindingFilter(), DUE, AT)
    model = {r["finding_id"]: tuple(r[k] for k in keys) for r in rows}
    cur = store.con.execute(f"SELECT finding_id, {', '.join(keys)} FROM dim_review_status")
    view = {r[0]: tuple(r[1:]) for r in cur.fetchall()}
    assert model == view
    assert [model[f][0] for f in (a, b, c)] == ["disposed", "reopened", "pending_approval"]


def test_approvals_travel_through_the_review_sink_and_the_projector_stores_them(store: Store, clock: Clock) -> None:
    """The streaming deployment: the console publishes every review (approvals too) to the reviews
    topic through its sink; the projector decodes each record and stores it."""
    sent: list[Any] = []
    client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, clock=clock), review_sink=sent.append))

    def project_sent() -> None:  # what the projector does with the topic's records
        rows = [_review_row(e.finding_id.encode(), e.model_dump_json().encode()) for e in sent]
        store.write_batch([], reviews=rows)
        sent.clear()

    fid = finding_of(store, "voiding")
    assert review(client, store, fid, "rita", action="dispose", cause="NOT_A_VIOLATION", **FULL).status_code == 201
    assert isinstance(sent[0], FindingDispositionProposed)
    assert review(client, store, fid, "max", action="approve").status_code == 409  # not stored yet
    project_sent()
    assert review(client, store, fid, "max", action="approve").status_code == 201
    assert isinstance(sent[0], FindingApproved) and get(client, store, fid)["review_status"] == "pending_approval"
    project_sent()
    assert get(client, store, fid)["review_status"] == "disposed"


def test_new_review_kinds_round_trip_and_old_ones_still_decode() -> None:
    common = {"review_id": "01J1", "finding_id": "ab" * 16, "user": "max", "reviewed_at": "2026-11-27T20:00:00+00:00"}
    for event in (
        FindingDispositionProposed.model_validate({**common, "cause": "NOT_A_VIOLATION"}),
        FindingApproved.model_validate({**common, "proposal_id": "01J0", "cause": "NOT_A_VIOLATION"}),
        FindingRejected.model_validate({**common, "proposal_id": "01J0", "note": "no"}),
    ):
        assert REVIEW_ADAPTER.validate_json(event.model_dump_json()) == event
    stored_before = '{"type": "FindingDisposed", "cause": "DEVICE", "corrective_action": "", "note": "", ' + (
        '"schema_version": 1, "review_id": "01J1", "finding_id": "' + "ab" * 16 + '", "user": "rita", '
        '"reviewed_at": "2026-11-27T20:00:00Z"}'
    )
    assert REVIEW_ADAPTER.validate_json(stored_before).type == "FindingDisposed"


def test_the_manager_role_is_between_reviewer_and_admin(store: Store) -> None:
    assert users.ROLES == ("viewer", "reviewer", "manager", "admin")
    assert users.user(store.con, "max")["role"] == "manager"  # type: ignore[index]
    from dealtrail.console.deps import User

    roles = {r: (User("u", r).can_review, User("u", r).can_approve, User("u", r).is_admin) for r in users.ROLES}
    assert roles == {
        "viewer": (False, False, False),
        "reviewer": (True, False, False),
        "manager": (True, True, False),
        "admin": (True, True, True),
    }


def test_the_console_takes_what_a_disposition_needs_from_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pydantic import ValidationError

    from dealtrail.cli.console import _console_config
    from dealtrail.settings import Settings

    monkeypatch.setenv("DEALTRAIL_REVIEW__DISPOSITION_NEEDS_PROCEDURAL", '["note"]')
    monkeypatch.setenv("DEALTRAIL_REVIEW__DISPOSITION_NEEDS_INTEGRITY", "[]")
    config = _console_config(Settings(), tmp_path / "s.duckdb")
    assert isinstance(config, ConsoleConfig)
    assert config.disposition_needs == DispositionNeeds(("corrective_action", "note"), (), ("note",))
    monkeypatch.setenv("DEALTRAIL_REVIEW__DISPOSITION_NEEDS_PROCEDURAL", '["cause"]')  # always required: no option
    with pytest.raises(ValidationError):
        Settings()


def test_a_video_reference_form_naming_a_decision_is_refused_and_records_nothing(
    client: TestClient, store: Store
) -> None:
    # a page from before issue 47 offered "Acknowledge" / "Dispose" / "Reopen" beside the clip:
    # such a form is refused, never recorded as a decision its user did not choose
    fid = finding_of(store, "voiding")
    csrf = login(client, "rita")
    url = f"/findings/{fid}/video-references"
    for action in ("acknowledge", "dispose", "reopen"):
        form = {"csrf": csrf, "ref_action": action, "ref_cause": "DEALER_ERROR", "camera": "CAM-1", "clip_id": "c1"}
        assert client.post(url, data=form).status_code == 422, action
    assert get(client, store, fid)["reviews"] == []


# What a decision leaves, and what evidence must never change (issue 47, item 1).
DECIDED = ("review_status", "cause", "assignee", "disposed_by", "approved_by", "proposed_cause",
           "corrective_action", "disposition_note", "last_reviewed_by", "last_reviewed_at", "disposed_at")  # fmt: skip
STATUSES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "unreviewed": [],
    "acknowledged": [("rita", {"action": "acknowledge"})],
    "assigned": [("rita", {"action": "assign", "assignee": "ron"})],
    "disposed": [("rita", {"action": "dispose", "cause": "DEALER_ERROR", **FULL})],
    "reopened": [("rita", {"action": "dispose", "cause": "DEVICE", **FULL}), ("rita", {"action": "reopen"})],
    "pending_approval": [("max", {"action": "dispose", "cause": "NOT_A_VIOLATION", **FULL})],
    "approved": [
        ("max", {"action": "dispose", "cause": "NOT_A_VIOLATION", **FULL}),
        ("mia", {"action": "approve"}),
    ],
    "rejected": [
        ("max", {"action": "dispose", "cause": "NOT_A_VIOLATION", **FULL}),
        ("mia", {"action": "reject", "note": "the clip shows a flash"}),
    ],
}


@pytest.mark.parametrize("status", list(STATUSES))
def test_attaching_a_note_or_a_video_reference_changes_no_decision_of_a_finding_in_any_status(
    client: TestClient, store: Store, status: str
) -> None:
    # every way to write evidence to a finding (the video reference form, the review form's
    # "attach the note only", the API's attach with a note and with references) on a finding in
    # each review status: a new FindingEvidenceAttached in its history, and its status, cause,
    # assignee, disposition and approval as they were
    fid = finding_of(store, "voiding")
    for who, body in STATUSES[status]:
        assert review(client, store, fid, who, **body).status_code == 201, (who, body)
    before = get(client, store, fid)
    decided = {k: before[k] for k in DECIDED}
    csrf = login(client, "ron")
    writers: list[tuple[str, Any]] = [
        (
            "video reference form",
            lambda: client.post(
                f"/findings/{fid}/video-references",
                data={"csrf": csrf, "camera": "CAM-1", "clip_id": "C-1", "ref_review_note": "the cut"},
                follow_redirects=False,
            ),
        ),
        (
            "review form, note only",
            lambda: client.post(
                f"/findings/{fid}/reviews",
                data={"csrf": csrf, "action": "attach", "note": "spoke to the dealer"},
                follow_redirects=False,
            ),
        ),
        ("API, a note", lambda: review(client, store, fid, "rita", action="attach", note="from the pit log")),
        (
            "API, a reference",
            lambda: review(client, store, fid, "rita", action="attach", references=[{"camera": "C", "clip_id": "K"}]),
        ),
    ]
    seen = len(before["reviews"])
    for name, write in writers:
        r = write()
        assert r.status_code in (201, 303), (name, r.status_code, r.text)
        after = get(client, store, fid)
        assert {k: after[k] for k in DECIDED} == decided, name
        assert len(after["reviews"]) == seen + 1 and after["reviews"][-1]["type"] == "FindingEvidenceAttached", name
        seen += 1
    # the list, the floor and the report count it as they did (not disposed is not disposed)
    rows, _ = reviews.find(store.con, FindingFilter(finding_id=fid), DUE, AT)
    assert rows[0]["review_status"] == decided["review_status"]
    if status == "pending_approval":  # the proposal still waits, and a manager can still decide it
        assert review(client, store, fid, "mia", action="approve").status_code == 201
        assert get(client, store, fid)["review_status"] == "disposed"


def test_attach_with_neither_a_note_nor_a_reference_is_refused(client: TestClient, store: Store) -> None:
    fid = finding_of(store, "procedural")
    r = review(client, store, fid, "rita", action="attach")
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "note"], r.text
    assert get(client, store, fid)["reviews"] == []


def test_every_refused_review_action_is_in_the_access_log_with_its_reason(client: TestClient, store: Store) -> None:
    from projections.records import access_log

    fid, other = finding_of(store, "voiding"), finding_of(store, "procedural")
    assert review(client, store, fid, "max", action="dispose", cause="NOT_A_VIOLATION", **FULL).status_code == 201
    assert review(client, store, fid, "max", action="approve").status_code == 403  # his own proposal
    assert review(client, store, fid, "rita", action="approve").status_code == 403  # a reviewer
    assert review(client, store, fid, "vic", action="acknowledge").status_code == 403  # a viewer
    assert review(client, store, other, "mia", action="approve").status_code == 409  # nothing pending
    assert review(client, store, other, "rita", action="dispose").status_code == 422  # no cause
    csrf = login(client, "rita")
    form = {"csrf": csrf, "action": "dispose", "cause": "DEALER_ERROR", "note": "seen"}
    assert client.post(f"/findings/{fid}/reviews", data=form).status_code == 422  # no corrective action
    bulk = {"csrf": csrf, "action": "assign", "assignee": "vic", "finding_id": [other]}
    assert client.post("/findings/bulk-reviews", data=bulk).status_code == 422  # a viewer as assignee
    rows, _ = access_log.entries(store.con, access_log.LogFilter(kind="review"), None)
    logged = [(r["user_name"], r["outcome"], r["detail"]) for r in reversed(rows)]
    assert [(u, o) for u, o, _ in logged] == [
        ("max", "ok"),
        ("max", "refused"),
        ("rita", "refused"),
        ("vic", "refused"),
        ("mia", "refused"),
        ("rita", "refused"),
        ("rita", "refused"),
        ("rita", "refused"),
    ]
    details = [d for _, _, d in logged[1:]]
    assert (
        details[0] == f"approve of finding {fid} (403): you proposed this disposition: another manager must approve it"
    )
    assert details[1].startswith(f"approve of finding {fid} (403): only a manager")
    assert details[2] == f"acknowledge of finding {fid} (403): a viewer cannot review findings"
    assert details[3].startswith(f"approve of finding {other} (409): no proposed disposition")
    assert details[4].startswith(f"dispose of finding {other} (422): cause: dispose needs a cause")
    assert details[5].startswith(f"dispose of finding {fid} (422): corrective_action: a disposition")
    assert details[6].startswith(f"assign of 1 finding ({other}) (422): assignee: assign needs")
    assert "seen" not in " ".join(details)  # the reasons, never the typed values


def test_a_pending_proposals_note_is_shown_once_and_the_history_says_the_rule_engine_detected_it(
    client: TestClient, store: Store
) -> None:
    fid = finding_of(store, "voiding")
    assert review(client, store, fid, "rita", action="dispose", cause="NOT_A_VIOLATION", **FULL).status_code == 201
    login(client, "max")
    page = client.get(f"/findings/{fid}").text
    assert 'id="approval"' in page and page.count(FULL["note"]) == 1  # in the history, not again in the box
    assert "<b>Detected</b> by the rule engine" in page  # the audit and the stream raise findings alike
