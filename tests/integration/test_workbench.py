"""Video clips and references on the finding page, in the API and the report, through the
streaming review path; and the evidence package: ``dealtrail evidence`` then ``dealtrail
verify-package``, a tampered event named, the finding page's download (issue 22, items 4 and 5)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import shutil
import stat
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.ingest.projector import _review_row
from dealtrail.investigate.evidence import build_package, verify_package
from dealtrail.investigate.video import VideoLinks
from projections.models import reviews
from projections.models.reviews import ReviewDue
from projections.reports.report import write_report
from projections.store.store import Store
from schemas.reviews import REVIEW_ADAPTER, FindingAcknowledged, VideoReference
from streams.engine import Plausibility
from tests.helpers import rebag

DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
LIMITS = Plausibility(100_000, timedelta(hours=1))
TEMPLATE = "https://vms.local/play?camera={camera}&start={start}&end={end}"
OVERDUE = "DT-remedy-overdue"  # a finding whose proof spans two rounds (the cause's, and the next one's start)


def _finding(con: object, rule: str = OVERDUE) -> tuple[str, str, str]:
    rows = con.execute(  # type: ignore[attr-defined]
        "SELECT finding_id, table_id, round_id FROM dim_findings WHERE rule_id = ? ORDER BY finding_id LIMIT 1", [rule]
    ).fetchall()
    return rows[0]  # type: ignore[no-any-return]


@pytest.fixture()
def store(audited_shift: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "wb.duckdb"
    shutil.copy(audited_shift, db)
    s = Store(db)
    at = datetime(2026, 11, 1, tzinfo=UTC)
    auth.add_user(s.con, "rita", "reviewer", "rita-review-pass", at)
    auth.add_user(s.con, "vic", "viewer", "vic-viewer-pass", at)
    yield s
    s.close()


NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _client(store: Store, video: VideoLinks) -> TestClient:
    config = ConsoleConfig(DUE, "s" * 48, clock=lambda: NOW, video=video, plausibility=LIMITS)
    return TestClient(create_app(store, config))


def _login(client: TestClient, name: str, password: str) -> None:
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    r = client.post("/login", data={"username": name, "password": password, "csrf": csrf.group(1), "next": "/"})
    assert r.status_code == 200


def test_finding_page_offers_a_clip_link_per_camera_of_the_table(store: Store) -> None:
    fid, table, _ = _finding(store.con)
    video = VideoLinks(
        {table: ("CAM 1", "CAM-2")}, TEMPLATE, "Europe/Malta", "%Y-%m-%dT%H:%M:%S%z", timedelta(seconds=30)
    )
    client = _client(store, video)
    _login(client, "vic", "vic-viewer-pass")
    html = client.get(f"/findings/{fid}").text
    first, last = store.con.execute(
        """SELECT min(occurred_at), max(occurred_at) FROM events
           WHERE event_id IN (SELECT unnest(evidence_event_ids) FROM dim_findings WHERE finding_id = ?)""",
        [fid],
    ).fetchall()[0]
    start = (first - timedelta(seconds=30)).astimezone(video_zone()).strftime("%Y-%m-%dT%H:%M:%S%z")
    end = (last + timedelta(seconds=30)).astimezone(video_zone()).strftime("%Y-%m-%dT%H:%M:%S%z")
    # the camera ID and the times are URL-encoded into the template, and the link escaped in the page
    expected = (
        f"https://vms.local/play?camera=CAM%201&amp;start={start.replace('+', '%2B')}&amp;end={end.replace('+', '%2B')}"
    )
    assert expected in html
    assert "camera=CAM-2&amp;" in html and html.count("open the clip in the video system") == 2
    assert "Europe/Malta" in html
    # a viewer reads the clips but gets no form to attach a reference
    assert "/video-references" not in html


def video_zone() -> object:
    from zoneinfo import ZoneInfo

    return ZoneInfo("Europe/Malta")


def test_finding_page_says_so_when_the_table_has_no_camera(store: Store) -> None:
    fid, _, _ = _finding(store.con)
    client = _client(store, VideoLinks({"OTHER-TABLE": ("CAM-9",)}, TEMPLATE))
    _login(client, "vic", "vic-viewer-pass")
    html = client.get(f"/findings/{fid}").text
    assert "No cameras are configured for table" in html and "vms.local" not in html


def test_a_reference_attached_in_a_review_appears_in_the_page_the_api_and_the_report(
    store: Store, tmp_path: Path
) -> None:
    fid, table, _ = _finding(store.con)
    client = _client(store, VideoLinks({table: ("CAM-1",)}, TEMPLATE))
    _login(client, "rita", "rita-review-pass")
    page = client.get(f"/findings/{fid}").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf and f'action="/findings/{fid}/video-references"' in page
    form = {
        "csrf": csrf.group(1),
        "camera": "CAM-1",
        "clip_id": "CLIP-<77>",
        "url": "https://vms.local/clip/77?x=1&y=2",
        "reference_note": "dealer flashes the hole card",
    }
    r = client.post(f"/findings/{fid}/video-references", data=form, follow_redirects=False)
    assert r.status_code == 303
    html = client.get(f"/findings/{fid}").text
    assert 'href="https://vms.local/clip/77?x=1&amp;y=2"' in html and "CLIP-&lt;77&gt;" in html
    assert "dealer flashes the hole card" in html
    timeline = html.split("<h2>Review history</h2>", 1)[1].split("</ol>", 1)[0]  # in the finding's history
    assert "Video reference: camera CAM-1" in timeline and 'href="https://vms.local/clip/77?x=1&amp;y=2"' in timeline
    case = client.get(f"/cases/{fid}")  # a remedy-overdue finding is a case's consequence: shown there too
    assert case.status_code == 200 and 'href="https://vms.local/clip/77?x=1&amp;y=2"' in case.text
    assert "dealer flashes the hole card" in case.text
    # the API's finding and the review it records
    token = {"Authorization": "Bearer " + auth.new_token(store.con, "rita", NOW)}
    detail = client.get(f"/api/v1/findings/{fid}", headers=token).json()
    refs = [x for rv in detail["reviews"] for x in rv["references"]]
    assert refs == [
        {
            "camera": "CAM-1",
            "clip_id": "CLIP-<77>",
            "url": "https://vms.local/clip/77?x=1&y=2",
            "note": "dealer flashes the hole card",
        }
    ]
    body = {"action": "reopen", "references": [{"camera": "CAM-1", "clip_id": "C-78"}]}
    made = client.post(f"/api/v1/findings/{fid}/reviews", json=body, headers=token)
    assert made.status_code == 201 and made.json()["references"][0]["clip_id"] == "C-78"
    # only http and https links; a reference needs a clip ID or a URL
    for bad in (
        {"camera": "CAM-1", "url": "javascript:alert(1)"},
        {"camera": "CAM-1", "url": 'https://x/"onmouseover=1'},
        {"camera": "CAM-1"},
    ):
        r = client.post(
            f"/api/v1/findings/{fid}/reviews", json={"action": "reopen", "references": [bad]}, headers=token
        )
        assert r.status_code == 422, bad
    # the report of the period lists the references
    files = write_report(store.con, tmp_path / "report", review_due=DUE)
    report = files.html.read_text()
    assert "Video references attached in reviews" in report
    assert 'href="https://vms.local/clip/77?x=1&amp;y=2"' in report and "C-78" in report


def test_references_survive_the_reviews_topic_and_old_reviews_still_read(store: Store) -> None:
    fid, _, _ = _finding(store.con)
    review = FindingAcknowledged(
        review_id="01KREF0000000000000000TOPIC",
        finding_id=fid,
        user="rita",
        reviewed_at=NOW,
        references=(VideoReference(camera="CAM-1", clip_id="K-1", url="https://vms.local/k1"),),
    )
    # the console's producer sends model_dump_json(); the projector stores the row it decodes
    row = _review_row(fid.encode(), review.model_dump_json().encode())
    assert REVIEW_ADAPTER.validate_json(row["payload"]) == review
    store.con.execute(
        "INSERT INTO reviews SELECT $review_id, $finding_id, $type, $user_name, $reviewed_at, $assignee, $cause, "
        "$corrective_action, $note, $payload",
        row,
    )
    # a review stored before references existed (no such key in its payload) reads with none
    old = {
        "review_id": "01KREF0000000000000000OLDRV",
        "finding_id": fid,
        "user": "rita",
        "reviewed_at": "2026-11-30T10:00:00+00:00",
        "note": "",
        "schema_version": 1,
        "type": "FindingAcknowledged",
    }
    assert REVIEW_ADAPTER.validate_python(old).references == ()
    reviews.append_review(store.con, REVIEW_ADAPTER.validate_python(old))
    history = reviews.history(store.con, fid)
    assert [h["references"] for h in history] == [
        [],
        [{"camera": "CAM-1", "clip_id": "K-1", "url": "https://vms.local/k1", "note": ""}],
    ]


# -- evidence packages -------------------------------------------------------------------------


def test_evidence_then_verify_package_passes_and_one_altered_byte_fails_naming_the_event(
    audited_shift: Path, tmp_path: Path
) -> None:
    import duckdb

    con = duckdb.connect(str(audited_shift), read_only=True)
    fid, _, round_id = _finding(con)
    con.close()
    runner = CliRunner()
    out = tmp_path / "pkg"
    r = runner.invoke(cli, ["evidence", "--db", str(audited_shift), "--finding", fid, "--out", str(out)])
    assert r.exit_code == 0, r.output
    for name in ("README.md", "events.jsonl", "chain.jsonl", "digest.json", "finding.json", "start-states.json"):
        assert stat.S_IMODE((out / "data" / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE((out / "bag-info.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE(out.stat().st_mode) == 0o700 and stat.S_IMODE((out / "data").stat().st_mode) == 0o700
    r = runner.invoke(cli, ["verify-package", str(out)])
    assert r.exit_code == 0 and "verified" in r.output, r.output
    # no other round's events in full: only the round's and those the finding cites
    finding = json.loads((out / "data" / "finding.json").read_text())
    cited = {
        e
        for rv in finding["revisions"]
        for e in (rv["trigger_event_id"], *rv["evidence_event_ids"], *rv["remedy_event_ids"])
    }
    events = [json.loads(line) for line in (out / "data" / "events.jsonl").read_text().splitlines()]
    assert all(e["round_id"] == round_id or e["event_id"] in cited for e in events)
    assert any(e["round_id"] != round_id for e in events)  # the overdue's trigger lies in the next round
    # a zip of the same package checks the same
    r = runner.invoke(
        cli, ["evidence", "--db", str(audited_shift), "--finding", fid, "--out", str(tmp_path / "z"), "--zip"]
    )
    assert r.exit_code == 0 and runner.invoke(cli, ["verify-package", str(tmp_path / "z.zip")]).exit_code == 0
    # a package is never written over another
    again = runner.invoke(cli, ["evidence", "--db", str(audited_shift), "--finding", fid, "--out", str(out)])
    assert again.exit_code == 2 and "exists" in again.output
    unknown = runner.invoke(
        cli, ["evidence", "--db", str(audited_shift), "--finding", "f" * 32, "--out", str(tmp_path / "u")]
    )
    assert unknown.exit_code == 2 and "no finding" in unknown.output and not (tmp_path / "u").exists()
    assert runner.invoke(cli, ["verify-package", str(tmp_path / "nothing-here")]).exit_code == 2
    # one byte of one event altered (a digit of its time): the event is named, exit 4
    lines = (out / "data" / "events.jsonl").read_bytes().split(b"\n")
    victim = json.loads(lines[2])
    at = lines[2].index(b'"occurred_at":"') + len(b'"occurred_at":"') + 3
    line = bytearray(lines[2])
    line[at] = ord("7") if line[at] != ord("7") else ord("6")
    lines[2] = bytes(line)
    (out / "data" / "events.jsonl").write_bytes(b"\n".join(lines))
    r = runner.invoke(cli, ["verify-package", str(out)])
    assert r.exit_code == 4 and "data/events.jsonl: its SHA-256 is not the one manifest-sha256.txt lists" in r.output
    rebag(out)  # the bag's manifests made anew: the event's own hash still names it
    r = runner.invoke(cli, ["verify-package", str(out)])
    assert r.exit_code == 4
    assert f"first event that does not verify: {victim['event_id']}" in r.output


def test_verify_package_refuses_a_rewritten_event_and_chain_and_warns_of_another_revision(
    audited_shift: Path, tmp_path: Path
) -> None:
    import duckdb

    con = duckdb.connect(str(audited_shift), read_only=True)
    fid, _, _ = _finding(con)
    package = build_package(con, fid, LIMITS, NOW)
    con.close()
    out = package.write(tmp_path / "p")
    # an event rewritten with a fresh hash no longer matches its chain link
    from schemas.chain import chain_hash
    from schemas.codec import decode

    lines = (out / "data" / "events.jsonl").read_text().splitlines()
    event = decode(lines[0])
    forged = event.model_copy(update={"recorded_at": event.recorded_at + timedelta(seconds=1)})
    forged = forged.model_copy(update={"hash": chain_hash(forged)})
    lines[0] = forged.model_dump_json()
    (out / "data" / "events.jsonl").write_text("\n".join(lines) + "\n")
    rebag(out)
    report = verify_package(out)
    assert not report.ok and report.event_id == event.event_id and "chain link" in (report.problem or "")
    # a hash-only link altered breaks the chain at the next link
    out2 = package.write(tmp_path / "p2")
    links = (out2 / "data" / "chain.jsonl").read_text().splitlines()
    k = next(i for i, x in enumerate(links) if "line" not in json.loads(x) and i > 0 and i + 1 < len(links))
    link = json.loads(links[k])
    link["hash"] = "0" * 64
    links[k] = json.dumps(link)
    (out2 / "data" / "chain.jsonl").write_text("\n".join(links) + "\n")
    rebag(out2)
    report = verify_package(out2)
    assert not report.ok and report.event_id == json.loads(links[k + 1])["event_id"]
    # an engine state this engine cannot load: refused, naming the event it was to start at
    out4 = package.write(tmp_path / "p4")
    states = json.loads((out4 / "data" / "start-states.json").read_text())
    assert states[0]["state"] is not None  # the round starts mid-table: the engine resumes from a state
    states[0]["state"] = {"table_id": "T", "unknown": 1}
    states[0]["state_sha256"] = hashlib.sha256(
        json.dumps(states[0]["state"], sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()  # RFC 8785 (the state's hash_version 2): no fraction, ASCII
    (out4 / "data" / "start-states.json").write_text(json.dumps(states))
    rebag(out4)
    report = verify_package(out4)
    assert not report.ok and "does not load" in (report.problem or "") and report.event_id == event.event_id
    # a package judged under another rulebook revision: said plainly, the engine's rules used
    out3 = package.write(tmp_path / "p3")
    manifest = json.loads((out3 / "data" / "manifest.json").read_text())
    manifest["rulebook_revision"] = 99
    (out3 / "data" / "manifest.json").write_text(json.dumps(manifest))
    rebag(out3)
    report = verify_package(out3)
    assert report.ok and any("rulebook revision 99" in n and n.startswith("WARNING") for n in report.notes)


def test_finding_page_downloads_the_same_package_for_a_logged_in_user(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fid, _, _ = _finding(store.con)
    client = _client(store, VideoLinks())
    assert client.get(f"/findings/{fid}/evidence.zip", follow_redirects=False).status_code == 303  # to the login
    _login(client, "vic", "vic-viewer-pass")
    assert f'href="/findings/{fid}/evidence.zip"' in client.get(f"/findings/{fid}").text
    with caplog.at_level(logging.INFO, logger="dealtrail.console.evidence"):
        r = client.get(f"/findings/{fid}/evidence.zip")
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    sha = hashlib.sha256(r.content).hexdigest()
    assert [m.getMessage() for m in caplog.records] == [
        f"evidence package downloaded: user=vic finding={fid} sha256={sha}"
    ]
    expected = build_package(store.con, fid, LIMITS, NOW)
    with zipfile.ZipFile(io.BytesIO(r.content)) as zf:
        got = {n.split("/", 1)[1]: zf.read(n) for n in zf.namelist()}
    assert {k: v for k, v in got.items() if k.startswith("data/")} == {
        f"data/{n}": d for n, d in expected.files.items()
    }
    assert b"Contact-Name: vic\n" in got["bag-info.txt"]  # who made it: the user who downloaded it
    path = tmp_path / "download.zip"
    path.write_bytes(r.content)
    assert verify_package(path).ok
    assert client.get("/findings/0123456789abcdef0123456789abcdef/evidence.zip").status_code == 404
