"""A report a manager signs: the sign-off record beside a period report's revision (written once,
every file's SHA-256), its verification, the block the report shows, the console's button and
the CLI; the executive summary and the printed PDF; the property's recorded name."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result
from ulid import ULID

from dealtrail.cli import app
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.reporting.schedule import Schedule, run_due
from projections.models.reviews import ReviewDue
from projections.records import access_log, users
from projections.records import property as stored_property
from projections.records.report_revisions import history
from projections.records.signoff import SIGNOFF, SignOffError, sign, verify
from projections.reports.report import write_report
from projections.store.store import Store
from schemas.access import AccessEntry

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
HOURLY = Schedule("0 * * * *")
LABEL = "2026-11-27T1800+0000_UTC"
NOW = START + timedelta(hours=3)
DUE = ReviewDue(voiding=24, integrity=24, procedural=72)
PASSWORDS = {"ada": "ada-admin-pass", "meg": "meg-manager-pass", "rita": "rita-review-pass"}
ROLES = {"ada": "admin", "meg": "manager", "rita": "reviewer"}
STATEMENT = "Reviewed with the shift manager; the open findings are assigned."
SEALED = {"manifest-sha256.txt", "UNSIGNED.txt"}
"""What seals each revision written without a signing key (issue 35): the sign-off covers them too."""


@pytest.fixture
def db(audited_shift: Path, tmp_path: Path) -> Path:
    """A copy of the audited small shift (18:00 to about 19:30) with an admin, a manager and a reviewer."""
    path = tmp_path / "s.duckdb"
    shutil.copy(audited_shift, path)
    with Store(path) as s:
        for name, role in ROLES.items():
            auth.add_user(s.con, name, role, PASSWORDS[name], datetime(2026, 11, 1, tzinfo=UTC))
    return path


@pytest.fixture
def periods(db: Path, tmp_path: Path) -> Path:
    """The hourly period reports of the shift (both final), as the schedule writes them."""
    out = tmp_path / "periods"
    assert len(run_due(db, out, HOURLY, NOW)) == 2
    return out


def _late_event(db: Path | Store, tmp_path: Path) -> None:
    """Audit one more event dated inside the 18:00 hour (a copy of one of its events with a new
    ID) into the store at ``db`` (or the open one): the period's events change."""
    from dealtrail.ingest.audit import audit_file

    s = Store(db) if isinstance(db, Path) else db
    try:
        row = s.con.execute(
            "SELECT payload FROM events WHERE occurred_at >= $1 AND occurred_at < $2 ORDER BY occurred_at LIMIT 1",
            [START + timedelta(minutes=30), START + timedelta(hours=1)],
        ).fetchall()
        event = json.loads(row[0][0])
        event["event_id"] = "late-" + str(event["event_id"])
        late = tmp_path / "late.jsonl"
        late.write_text(json.dumps(event) + "\n")
        with (tmp_path / "late.rejected.jsonl").open("w") as dl:
            audit_file(late, s, dl)
    finally:
        if isinstance(db, Path):
            s.close()


def test_a_manager_signs_a_final_revision_once_with_every_files_hash_owner_only(periods: Path) -> None:
    rev = periods / LABEL / "rev-0001"
    at = NOW + timedelta(minutes=5)
    record = sign(rev, "meg", "manager", STATEMENT, at)
    assert record["signed_by"] == "meg" and record["signed_at"] == at.isoformat() and record["statement"] == STATEMENT
    assert set(record["files"]) == {"report.html", "summary.json", "findings.csv", "findings.parquet"} | SEALED
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in record["files"].values())
    assert stat.S_IMODE((rev / SIGNOFF).stat().st_mode) == 0o600
    first = (rev / SIGNOFF).read_bytes()
    with pytest.raises(SignOffError, match="signed already"):
        sign(rev, "ada", "admin", "again", at + timedelta(hours=1))
    assert (rev / SIGNOFF).read_bytes() == first  # never replaced
    assert verify(rev).intact


def test_a_reviewer_an_empty_statement_and_a_provisional_or_superseded_revision_cannot_be_signed(
    db: Path, periods: Path, tmp_path: Path
) -> None:
    rev = periods / LABEL / "rev-0001"
    with pytest.raises(SignOffError, match="manager or an admin"):
        sign(rev, "rita", "reviewer", STATEMENT, NOW)
    with pytest.raises(SignOffError, match="statement"):
        sign(rev, "meg", "manager", "   ", NOW)
    with pytest.raises(SignOffError, match="not a report revision"):
        sign(periods / LABEL, "meg", "manager", STATEMENT, NOW)
    _late_event(db, tmp_path)
    assert periods / LABEL / "rev-0002" in run_due(db, periods, HOURLY, NOW + timedelta(hours=1))
    with pytest.raises(SignOffError, match="superseded by revision 2"):
        sign(rev, "meg", "manager", STATEMENT, NOW)
    early = tmp_path / "early"  # the 19:00 hour as of 19:10: events of it may still arrive
    run_due(db, early, HOURLY, START + timedelta(hours=2), grace=timedelta(hours=5))
    provisional = early / "2026-11-27T1900+0000_UTC" / "rev-0001"
    assert history(provisional.parent)[0]["status"] == "provisional"
    with pytest.raises(SignOffError, match="only a final report is signed"):
        sign(provisional, "meg", "manager", STATEMENT, NOW)


def test_verifying_a_sign_off_names_each_file_changed_missing_or_added_since_signing(periods: Path) -> None:
    rev = periods / LABEL / "rev-0001"
    sign(rev, "meg", "manager", STATEMENT, NOW)
    (rev / "findings.csv").write_text("edited\n")
    (rev / "findings.parquet").unlink()
    (rev / "extra.txt").write_text("x")
    check = verify(rev)
    assert not check.intact
    assert (check.changed, check.missing, check.added) == (["findings.csv"], ["findings.parquet"], ["extra.txt"])
    out = CliRunner().invoke(app, ["verify-signoff", str(rev)])
    assert out.exit_code == 1 and "findings.csv changed since signing" in out.output, out.output
    assert "NOT as signed" in out.output


def _sign(folder: Path, user: str, password: str, db: Path, statement: str = STATEMENT) -> Result:
    """``dealtrail sign-report`` with ``password`` on its stdin (not a terminal)."""
    args = ["sign-report", str(folder), "--user", user, "--statement", statement, "--db", str(db)]
    return CliRunner().invoke(app, args, input=password + "\n")


def _logged(db: Path) -> list[tuple[int, str, str, str, str, str]]:
    """The access log's entries (seq, kind, user, client, outcome, detail) in order."""
    with Store(db) as s:
        rows = s.con.execute(
            "SELECT seq, kind, user_name, client, outcome, detail FROM access_log ORDER BY seq"
        ).fetchall()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def test_sign_report_signs_the_periods_latest_revision_as_a_stored_manager_and_verify_signoff_checks_it(
    db: Path, periods: Path
) -> None:
    refused = _sign(periods / LABEL, "rita", PASSWORDS["rita"], db)
    assert refused.exit_code == 1 and "manager or an admin" in refused.output, refused.output
    unknown = _sign(periods / LABEL, "zed", "whatever-it-is", db)
    assert unknown.exit_code == 1 and "no console user 'zed'" in unknown.output
    done = _sign(periods / LABEL, "meg", PASSWORDS["meg"], db)
    assert done.exit_code == 0 and "as meg (manager, signed in with a local account)" in done.output, done.output
    assert json.loads((periods / LABEL / "rev-0001" / SIGNOFF).read_text())["signed_by"] == "meg"
    again = _sign(periods / LABEL, "ada", PASSWORDS["ada"], db)
    assert again.exit_code == 1 and "signed already" in again.output
    ok = CliRunner().invoke(app, ["verify-signoff", str(periods / LABEL / "rev-0001")])
    assert (
        ok.exit_code == 0 and "6 files as signed; signed by meg (manager, signed in with a local account)" in ok.output
    ), ok.output
    assert "the record itself is anchored only by the access log: pass --db" in ok.output
    anchored = CliRunner().invoke(app, ["verify-signoff", str(periods / LABEL / "rev-0001"), "--db", str(db)])
    assert anchored.exit_code == 0 and "as recorded in the access log" in anchored.output, anchored.output
    assert "chain intact" in anchored.output
    unsigned = CliRunner().invoke(app, ["verify-signoff", str(periods / "2026-11-27T1900+0000_UTC")])
    assert unsigned.exit_code == 1 and "is not signed" in unsigned.output


def test_sign_report_records_its_sign_off_in_the_access_log_with_the_sha256_of_signoff_json(
    db: Path, periods: Path
) -> None:
    assert _sign(periods / LABEL, "meg", PASSWORDS["meg"], db).exit_code == 0
    digest = hashlib.sha256((periods / LABEL / "rev-0001" / SIGNOFF).read_bytes()).hexdigest()
    signed = [e for e in _logged(db) if e[1] == "report_signed"]
    assert [e[2:] for e in signed] == [("meg", "cli", "ok", f"{LABEL}/rev-0001 signoff.json sha256:{digest}")]


def test_sign_report_without_the_right_password_refuses_and_counts_a_failed_sign_in(db: Path, periods: Path) -> None:
    for password in ("", "not-megs-password"):
        out = _sign(periods / LABEL, "meg", password, db)
        assert out.exit_code == 1 and "wrong password for 'meg': not signed" in out.output, out.output
        assert len([line for line in out.output.splitlines() if "error:" in line]) == 1
    assert not (periods / LABEL / "rev-0001" / SIGNOFF).exists()
    failed = [e[2:5] for e in _logged(db) if e[1] == "login_failed"]
    assert failed == [("meg", "cli", "refused")] * 2  # the console's lock counts them
    assert not [e for e in _logged(db) if e[1] == "report_signed" and e[4] == "ok"]


def test_sign_report_refuses_a_locked_or_deactivated_user_even_with_the_right_password(
    db: Path, periods: Path, tmp_path: Path
) -> None:
    with Store(db) as s:  # ten failed sign-ins at the console, as its login page records them
        entries = [
            AccessEntry(
                entry_id=str(ULID()),
                at=datetime.now(UTC),
                user="meg",
                client="10.0.0.9",
                kind="login_failed",
                outcome="refused",
                detail="wrong name or password",
            )
            for _ in range(10)
        ]
        access_log.append(s.con, entries)
    locked = _sign(periods / LABEL, "meg", PASSWORDS["meg"], db)
    assert locked.exit_code == 1 and "'meg' may not sign in now: This account is locked" in locked.output
    assert not (periods / LABEL / "rev-0001" / SIGNOFF).exists()
    assert _logged(db)[-1][1:5] == ("login_failed", "meg", "cli", "locked")
    assert CliRunner().invoke(app, ["users", "unlock", "meg", "--db", str(db)]).exit_code == 0
    with Store(db) as s:
        users.put_user(s.con, "ada", "admin", None, False, datetime.now(UTC), "cli")
    gone = _sign(periods / LABEL, "ada", PASSWORDS["ada"], db)
    assert gone.exit_code == 1 and "console user 'ada' is deactivated" in gone.output, gone.output
    assert _sign(periods / LABEL, "meg", PASSWORDS["meg"], db).exit_code == 0  # unlocked: signs


def test_sign_report_asks_a_user_with_a_one_time_code_for_it(db: Path, periods: Path) -> None:
    import pyotp

    from dealtrail.console.totp import resolve_totp_key

    secret = pyotp.random_base32()
    with Store(db) as s:
        key = resolve_totp_key(None, None, db)  # the key file beside the store, as sign-report reads it
        access_log.put_totp(s.con, "meg", secret, datetime(2026, 11, 2, tzinfo=UTC), key)
    without = _sign(periods / LABEL, "meg", PASSWORDS["meg"], db)
    assert without.exit_code == 1 and "wrong or missing one-time code for 'meg'" in without.output, without.output
    assert not (periods / LABEL / "rev-0001" / SIGNOFF).exists()
    done = _sign(periods / LABEL, "meg", PASSWORDS["meg"] + "\n" + pyotp.TOTP(secret).now(), db)
    assert done.exit_code == 0, done.output


def test_sign_report_refuses_while_a_console_holds_the_store_and_signs_nothing(db: Path, periods: Path) -> None:
    hold = (
        "import sys; from projections.store.store import Store; s = Store(sys.argv[1]); print('held', flush=True); "
        "input()"
    )
    holder = subprocess.Popen(  # another process holds the store, as a running console does
        [sys.executable, "-c", hold, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        out = _sign(periods / LABEL, "meg", PASSWORDS["meg"], db)
    finally:
        holder.communicate("\n", timeout=60)
    assert out.exit_code == 1 and "sign the report on the console's Reports page" in out.output, out.output
    assert not (periods / LABEL / "rev-0001" / SIGNOFF).exists()


def test_an_edited_signoff_json_fails_verify_signoff_with_the_store_and_is_flagged_on_the_reports_page(
    db: Path, periods: Path
) -> None:
    rev = periods / LABEL / "rev-0001"
    assert _sign(periods / LABEL, "meg", PASSWORDS["meg"], db).exit_code == 0
    forged = (rev / SIGNOFF).read_text().replace('"signed_by": "meg"', '"signed_by": "mgr1"')
    (rev / SIGNOFF).chmod(0o600)
    (rev / SIGNOFF).write_text(forged)
    plain = CliRunner().invoke(app, ["verify-signoff", str(rev)])
    assert plain.exit_code == 0 and "signed by mgr1" in plain.output and "pass --db" in plain.output
    out = CliRunner().invoke(app, ["verify-signoff", str(rev), "--db", str(db)])
    assert out.exit_code == 1, out.output
    seq = next(e[0] for e in _logged(db) if e[1] == "report_signed")
    assert f"signoff.json differs from the sign-off recorded in the access log at entry {seq}" in out.output
    with Store(db) as s:
        page = _reports_page(s, periods, "ada")
    assert "SIGN-OFF NOT AS RECORDED" in page and f"at entry {seq}" in page
    with Store(db) as s:
        client = TestClient(create_app(s, ConsoleConfig(DUE, "s" * 48, reports_dir=periods, clock=lambda: NOW)))
        _login(client, "rita")
        served = client.get(f"/reports/scheduled/{LABEL}/rev-0001/report.html").text
    block = served[served.index('<section id="signoff"') :]
    assert "SIGN-OFF NOT AS RECORDED:</strong> signoff.json differs" in block[: block.index("</section>")]


def test_verify_signoff_with_the_store_names_a_sign_off_the_access_log_never_recorded_and_a_broken_chain(
    db: Path, periods: Path
) -> None:
    rev = periods / LABEL / "rev-0001"
    sign(rev, "meg", "manager", STATEMENT, NOW)  # written by hand, never recorded
    out = CliRunner().invoke(app, ["verify-signoff", str(rev), "--db", str(db)])
    assert out.exit_code == 1 and "the access log records no sign-off of this revision" in out.output, out.output
    digest = hashlib.sha256((rev / SIGNOFF).read_bytes()).hexdigest()
    with Store(db) as s:
        entry = AccessEntry(
            entry_id=str(ULID()),
            at=datetime.now(UTC),
            user="meg",
            client="cli",
            kind="report_signed",
            outcome="ok",
            detail=f"{LABEL}/rev-0001 signoff.json sha256:{digest}",
        )
        access_log.append(s.con, [entry])
    assert CliRunner().invoke(app, ["verify-signoff", str(rev), "--db", str(db)]).exit_code == 0
    with Store(db) as s:
        s.con.execute("UPDATE access_log SET user_name = 'mgr1' WHERE kind = 'report_signed'")
    broken = CliRunner().invoke(app, ["verify-signoff", str(rev), "--db", str(db)])
    assert broken.exit_code == 1 and "the access log's chain is broken at entry" in broken.output, broken.output


def test_report_pdf_without_chromium_fails_with_one_clear_line(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEALTRAIL_REPORTS__CHROMIUM", str(tmp_path / "no-such-chromium"))
    out = CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "r"), "--pdf"])
    assert out.exit_code == 1 and (out.exception is None or isinstance(out.exception, SystemExit))
    assert "no Chromium at" in out.output and "Traceback" not in out.output
    assert len([line for line in out.output.splitlines() if "error:" in line]) == 1
    assert (tmp_path / "r" / "report.html").is_file() and not (tmp_path / "r" / "report.pdf").exists()


@pytest.fixture
def console(db: Path, periods: Path) -> Iterator[TestClient]:
    store = Store(db)
    clock = lambda: NOW + timedelta(minutes=10)  # noqa: E731
    yield TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, reports_dir=periods, clock=clock)))
    store.close()


def _login(client: TestClient, name: str) -> str:
    csrf = _csrf(client.get("/login").text)
    r = client.post("/login", data={"username": name, "password": PASSWORDS[name], "csrf": csrf, "next": "/reports"})
    assert r.status_code == 200
    return _csrf(r.text)


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m
    return m.group(1)


def test_the_console_sign_button_is_a_managers_and_a_reviewer_gets_403(console: TestClient, periods: Path) -> None:
    url = f"/reports/scheduled/{LABEL}/rev-0001/sign"
    csrf = _login(console, "rita")
    page = console.get("/reports")
    shown = f"/reports/scheduled/{quote(LABEL)}/rev-0001/sign"  # as the page writes it
    assert "not signed" in page.text and shown not in page.text  # no button for a reviewer
    assert console.post(url, data={"statement": STATEMENT, "csrf": csrf}).status_code == 403
    assert not (periods / LABEL / "rev-0001" / SIGNOFF).exists()
    console.post("/logout", data={"csrf": csrf})
    csrf = _login(console, "meg")
    assert shown in console.get("/reports").text
    assert console.post(url, data={"statement": STATEMENT, "csrf": "forged"}).status_code == 403
    done = console.post(url, data={"statement": STATEMENT, "csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303
    listed = console.get("/reports").text
    assert "signed</span> by meg (manager, signed in with a local account)" in listed
    again = console.post(url, data={"statement": "twice", "csrf": csrf})
    assert again.status_code == 409 and "signed already" in again.text
    store = console.app.state.console.store  # type: ignore[attr-defined]
    logged = store.con.execute(
        "SELECT user_name, outcome, detail FROM access_log WHERE kind = 'report_signed' ORDER BY seq"
    ).fetchall()
    assert [(u, o) for u, o, _ in logged] == [("meg", "ok"), ("meg", "refused")]  # who signed, in the access log
    digest = hashlib.sha256((periods / LABEL / "rev-0001" / SIGNOFF).read_bytes()).hexdigest()
    assert logged[0][2] == f"{LABEL}/rev-0001 signoff.json sha256:{digest}"  # the record, anchored
    assert "SIGN-OFF NOT AS RECORDED" not in listed
    refused = f"{LABEL}/rev-0001: {LABEL}/rev-0001 is signed already; a sign-off is never replaced"
    assert logged[1][2] == refused and str(periods) not in again.text  # no place on disk, in the log or the page


def _reports_page(store: Store, periods: Path, name: str) -> str:
    """The Reports page of a console over ``store`` as ``name`` sees it."""
    client = TestClient(create_app(store, ConsoleConfig(DUE, "s" * 48, reports_dir=periods, clock=lambda: NOW)))
    _login(client, name)
    return client.get("/reports").text


def _pdf_text(pdf: Path) -> list[str]:
    pypdf = pytest.importorskip("pypdf")
    return [page.extract_text() for page in pypdf.PdfReader(str(pdf)).pages]


def test_a_signed_report_shows_its_sign_off_block_prints_with_page_numbers_and_a_new_revision_is_unsigned(
    db: Path, periods: Path, console: TestClient, tmp_path: Path
) -> None:
    from dealtrail.reporting.pdf import PdfError, print_pdf

    csrf = _login(console, "meg")
    console.post(f"/reports/scheduled/{LABEL}/rev-0001/sign", data={"statement": STATEMENT, "csrf": csrf})
    page = console.get(f"/reports/scheduled/{LABEL}/rev-0001/report.html")
    assert page.status_code == 200
    block = page.text[page.text.index('<section id="signoff"') :]
    block = block[: block.index("</section>")]
    assert (
        "meg (manager, signed in with a local account)" in block
        and STATEMENT in block
        and "2026-11-27 21:10:00+00:00" in block
    )
    assert "Verified: the 6 files of this revision are as they were signed" in block
    assert "NOT AS RECORDED" not in block  # the console's sign-off is the one its access log recorded
    assert verify(periods / LABEL / "rev-0001").intact  # the served block is not written into the file
    signed_html = tmp_path / "signed.html"
    signed_html.write_text(page.text)
    try:
        pdf = print_pdf(signed_html, tmp_path / "report.pdf")
    except PdfError as exc:
        pytest.skip(f"no Chromium to print with: {exc}")
    pages = _pdf_text(pdf)
    assert len(pages) >= 3
    assert "Page 1 of" in pages[0] and f"Page 2 of {len(pages)}" in pages[1]
    assert "Executive summary" in pages[0] and "What needs action" in pages[0]
    assert "property not named" in pages[0] and "Casino" not in "".join(pages)
    assert any("Signed by meg (manager," in p and STATEMENT[:30] in p for p in pages[:2])  # "Sign-off" has a ligature
    if shutil.which("pdftoppm"):  # the picture looked at, kept in the test's tmp folder
        subprocess.run(
            ["pdftoppm", "-r", "60", "-f", "1", "-l", "2", "-png", str(pdf), str(tmp_path / "page")], check=True
        )
        assert list(tmp_path.glob("page-*1.png"))  # page-1.png, or page-01.png from 10 pages on
    store = console.app.state.store  # type: ignore[attr-defined]
    _late_event(store, tmp_path)
    assert periods / LABEL / "rev-0002" in run_due(store.con, periods, HOURLY, NOW + timedelta(hours=1))
    newer = console.get(f"/reports/scheduled/{LABEL}/rev-0002/report.html").text
    assert "Not signed." in newer and "meg (manager)" not in newer
    assert not (periods / LABEL / "rev-0002" / SIGNOFF).exists()
    assert verify(periods / LABEL / "rev-0001").intact  # the signed revision stays as signed


def test_the_property_is_named_by_an_admin_recorded_each_time_and_shown_in_the_console_and_the_report(
    console: TestClient, db: Path, tmp_path: Path
) -> None:
    csrf = _login(console, "rita")
    floor = console.get("/").text
    assert "property not named" in floor and "An admin names it" in floor and "Casino" not in floor
    assert console.post("/admin/property", data={"name": "Keystone Downs", "csrf": csrf}).status_code == 403
    console.post("/logout", data={"csrf": csrf})
    csrf = _login(console, "ada")
    assert 'href="/admin/property"' in console.get("/").text
    bad = console.post("/admin/property", data={"name": "   ", "csrf": csrf})
    assert bad.status_code == 422 and "printable characters" in bad.text
    for name in ("Keystone Downs", "Keystone <Downs> & Spa"):
        assert (
            console.post("/admin/property", data={"name": name, "csrf": csrf}, follow_redirects=False).status_code
            == 303
        )
    page = console.get("/admin/property").text
    assert "Keystone Downs" in page and "Keystone &lt;Downs&gt; &amp; Spa" in page  # both kept, escaped
    assert "Keystone &lt;Downs&gt; &amp; Spa" in console.get("/").text
    report = console.get("/reports/view").text
    assert "Keystone &lt;Downs&gt; &amp; Spa" in report
    names = [n["name"] for n in stored_property.history(console.app.state.store.con)]  # type: ignore[attr-defined]
    assert names == ["Keystone <Downs> & Spa", "Keystone Downs"]


def test_an_unnamed_property_is_never_printed_as_casino(db: Path, tmp_path: Path) -> None:
    files = write_report(db, tmp_path / "r", generated_at=NOW)
    html = files.html.read_text()
    assert "property not named" in html and "Casino" not in html
    assert 'content: "property not named"' in html  # the printed pages' running header


# -- the signed PDF (issue 35, item 4) -------------------------------------------------------------

needs_pdf_tools = pytest.mark.skipif(
    shutil.which("pdfsig") is None or shutil.which("chromium") is None, reason="pdfsig or chromium not installed"
)


def _pdfsig(pdf: Path) -> str:
    r = subprocess.run(["pdfsig", str(pdf)], capture_output=True, text=True, check=False)
    return r.stdout + r.stderr


def _valid(report: str) -> bool:
    """pdfsig says: one signature, valid, over the whole document."""
    return "Signature Validation: Signature is Valid." in report and "- Total document signed" in report


@pytest.fixture
def signing_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from projections.records.signing import create_key

    key = tmp_path / "keys" / "property.pem"
    create_key(key)
    monkeypatch.setenv("DEALTRAIL_SIGNING__KEY_FILE", str(key))
    return key


def _check_tampering(rev: Path) -> None:
    """Appending one byte or changing one word of the signed PDF fails pdfsig and verify-signoff."""
    pdf = rev / "report-signed.pdf"
    original = pdf.read_bytes()
    for altered in (original + b"\n", original.replace(b"Skia/PDF", b"Skib/PDF", 1)):
        assert altered != original
        pdf.write_bytes(altered)
        assert not _valid(_pdfsig(pdf))
        r = CliRunner().invoke(app, ["verify-signoff", str(rev)])
        assert r.exit_code == 1 and "report-signed.pdf changed since signing" in r.output, r.output
    pdf.write_bytes(original)


@needs_pdf_tools
def test_sign_report_pdf_is_signed_inside_the_pdf_listed_in_signoff_json_and_any_change_breaks_it(
    db: Path, periods: Path, signing_key: Path
) -> None:
    args = ["sign-report", str(periods / LABEL), "--user", "meg", "--statement", STATEMENT, "--db", str(db), "--pdf"]
    done = CliRunner().invoke(app, args, input=PASSWORDS["meg"] + "\n")
    assert done.exit_code == 0, done.output
    rev = periods / LABEL / "rev-0001"
    record = json.loads((rev / SIGNOFF).read_text())
    pdf = rev / "report-signed.pdf"
    assert record["schema_version"] == 2 and "report-signed.pdf" in record["files"]
    assert record["files"]["report-signed.pdf"] == hashlib.sha256(pdf.read_bytes()).hexdigest()
    said = _pdfsig(pdf)
    assert _valid(said), said
    assert "report signing" in said  # the certificate the property's key issued
    ok = CliRunner().invoke(app, ["verify-signoff", str(rev)])
    assert ok.exit_code == 0 and "7 files as signed" in ok.output, ok.output
    assert stat.S_IMODE(pdf.stat().st_mode) == 0o600
    _check_tampering(rev)


def test_sign_report_pdf_without_a_signing_key_signs_nothing(
    db: Path, periods: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEALTRAIL_SIGNING__KEY_FILE", raising=False)
    args = ["sign-report", str(periods / LABEL), "--user", "meg", "--statement", STATEMENT, "--db", str(db), "--pdf"]
    r = CliRunner().invoke(app, args, input=PASSWORDS["meg"] + "\n")
    assert r.exit_code == 1 and "DEALTRAIL_SIGNING__KEY_FILE" in r.output, r.output
    assert not (periods / LABEL / "rev-0001" / SIGNOFF).exists()


@needs_pdf_tools
def test_the_console_sign_button_makes_a_signed_pdf_listed_in_signoff_json_and_offers_it(
    db: Path, periods: Path, signing_key: Path
) -> None:
    store = Store(db)
    clock = lambda: NOW + timedelta(minutes=10)  # noqa: E731
    config = ConsoleConfig(DUE, "s" * 48, reports_dir=periods, clock=clock, signing_key=signing_key)
    try:
        client = TestClient(create_app(store, config))
        csrf = _login(client, "meg")
        url = f"/reports/scheduled/{LABEL}/rev-0001/sign"
        done = client.post(url, data={"statement": STATEMENT, "csrf": csrf}, follow_redirects=False)
        assert done.status_code == 303, done.text
        rev = periods / LABEL / "rev-0001"
        assert "report-signed.pdf" in json.loads((rev / SIGNOFF).read_text())["files"]
        assert _valid(_pdfsig(rev / "report-signed.pdf"))
        assert f"/reports/scheduled/{quote(LABEL)}/rev-0001/report-signed.pdf" in client.get("/reports").text
        got = client.get(f"/reports/scheduled/{LABEL}/rev-0001/report-signed.pdf")
        assert got.status_code == 200 and got.content == (rev / "report-signed.pdf").read_bytes()
    finally:
        store.close()
    _check_tampering(rev)


def test_a_sign_off_written_by_0_2_0_with_its_pdf_beside_it_still_verifies(periods: Path) -> None:
    rev = periods / LABEL / "rev-0001"
    record = sign(rev, "meg", "manager", STATEMENT, NOW)
    old = {**record, "schema_version": 1}  # as 0.2.0 wrote it: the PDF printed after, not listed
    (rev / SIGNOFF).chmod(0o600)
    (rev / SIGNOFF).write_text(json.dumps(old, indent=2, sort_keys=True) + "\n")
    (rev / "report-signed.pdf").write_bytes(b"%PDF-1.4 printed after signing\n")
    assert verify(rev).intact


def test_a_sign_off_made_with_the_property_key_carries_a_detached_signature_openssl_and_verify_signoff_check(
    db: Path, periods: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "keys" / "property.pem"
    monkeypatch.setenv("DEALTRAIL_SIGNING__KEY_FILE", str(key))
    assert CliRunner().invoke(app, ["keys", "create", "--db", str(db)]).exit_code == 0
    from projections.records.signing import key_id, load_key, public_pem

    first = public_pem(load_key(key))
    done = _sign(periods / LABEL, "meg", PASSWORDS["meg"], db)
    assert done.exit_code == 0, done.output
    rev = periods / LABEL / "rev-0001"
    assert json.loads((rev / SIGNOFF).read_text())["signing_key"] == key_id(first)
    registered = tmp_path / "registered.pem"
    registered.write_bytes(first)
    cmd = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(registered), "-rawin"]
    cmd += ["-in", str(rev / SIGNOFF), "-sigfile", str(rev / "signoff.json.sig")]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert r.returncode == 0 and "Signature Verified Successfully" in r.stdout, r.stderr
    # a rotation later: the sign-off still verifies with the key the store records for then
    assert CliRunner().invoke(app, ["keys", "rotate", "--db", str(db)]).exit_code == 0
    ok = CliRunner().invoke(app, ["verify-signoff", str(rev), "--db", str(db)])
    assert ok.exit_code == 0 and f"signed by the property's key {key_id(first)}" in ok.output, ok.output
    ok = CliRunner().invoke(app, ["verify-signoff", str(rev), "--public-key", str(registered)])
    assert ok.exit_code == 0, ok.output
    # signoff.json edited (who signed): the signature no longer verifies
    text = (rev / SIGNOFF).read_text()
    (rev / SIGNOFF).chmod(0o600)
    (rev / SIGNOFF).write_text(text.replace('"signed_by": "meg"', '"signed_by": "ada"'))
    bad = CliRunner().invoke(app, ["verify-signoff", str(rev), "--public-key", str(registered)])
    assert bad.exit_code == 1 and "is not key" in bad.output and "(altered)" in bad.output, bad.output
    assert subprocess.run(cmd, capture_output=True, check=False).returncode != 0


def test_a_signers_full_name_and_title_are_profile_revisions_and_the_sign_off_shows_them_with_local_time(
    db: Path, periods: Path
) -> None:
    from zoneinfo import ZoneInfo

    for title in ("Shift Manager", "Compliance Manager"):  # a change is a new revision, the first one kept
        done = CliRunner().invoke(
            app, ["users", "profile", "meg", "--full-name", "Meg  Ortiz", "--title", title, "--db", str(db)]
        )
        assert done.exit_code == 0 and f"profile of meg: Meg Ortiz, {title}" in done.output, done.output
    unknown = CliRunner().invoke(app, ["users", "profile", "zed", "--full-name", "Z", "--title", "T", "--db", str(db)])
    assert unknown.exit_code != 0 and "no console user 'zed'" in unknown.output and "Traceback" not in unknown.output
    with Store(db) as s:
        assert [(p["full_name"], p["title"]) for p in users.profile_history(s.con, "meg")] == [
            ("Meg Ortiz", "Shift Manager"),
            ("Meg Ortiz", "Compliance Manager"),
        ]
        assert users.profile(s.con, "meg") is not None and users.profile(s.con, "ada") is None
    store = Store(db)
    try:
        config = ConsoleConfig(
            DUE,
            "s" * 48,
            reports_dir=periods,
            clock=lambda: NOW + timedelta(minutes=10),
            tz=ZoneInfo("America/New_York"),
        )
        client = TestClient(create_app(store, config))
        csrf = _login(client, "meg")
        client.post(f"/reports/scheduled/{LABEL}/rev-0001/sign", data={"statement": STATEMENT, "csrf": csrf})
        record = json.loads((periods / LABEL / "rev-0001" / SIGNOFF).read_text())
        assert (record["signer_name"], record["signer_title"], record["zone"]) == (
            "Meg Ortiz",
            "Compliance Manager",
            "America/New_York",
        )
        assert record["signed_at"] == "2026-11-27T21:10:00+00:00"  # the instant stays UTC
        page = client.get(f"/reports/scheduled/{LABEL}/rev-0001/report.html").text
        block = page[page.index('<section id="signoff"') :]
        block = block[: block.index("</section>")]
        assert "Meg Ortiz, Compliance Manager (console user meg, manager, signed in with a local account)" in block
        assert "2026-11-27 16:10:00-05:00 America/New_York" in block and "+00:00" not in block
        listed = client.get("/reports").text
        who = "Meg Ortiz, Compliance Manager (console user meg, manager, signed in with a local account)"
        assert f"by {who}, 2026-11-27 16:10:00-05:00" in listed
    finally:
        store.close()


def test_a_signed_revision_copied_under_another_period_is_refused_with_and_without_the_store(
    db: Path, periods: Path, tmp_path: Path
) -> None:
    # issue 47, item 6: a signed report folder copied under another period's name verified
    # without --db ("8 files as signed") though its sign-off names a different period
    rev = periods / LABEL / "rev-0001"
    sign(rev, "meg", "manager", STATEMENT, NOW + timedelta(minutes=5))
    other = tmp_path / "copied" / "2026-11-27T1900+0000_UTC" / "rev-0001"
    shutil.copytree(rev, other)
    assert verify(rev).intact and not verify(other).intact
    for extra in ([], ["--db", str(db)]):
        r = CliRunner().invoke(app, ["verify-signoff", str(other), *extra])
        out = " ".join(r.output.split())
        assert r.exit_code == 1 and f"the sign-off is of period {LABEL}" in out and "NOT as signed" in out, out
        assert "files as signed" not in out
    renumbered = tmp_path / "copied" / LABEL / "rev-0002"  # the same period, another revision's folder
    shutil.copytree(rev, renumbered)
    assert "the sign-off is of revision 1" in " ".join(verify(renumbered).problems())
    r = CliRunner().invoke(app, ["verify-signoff", str(rev)])
    assert r.exit_code == 0 and "files as signed" in r.output, r.output
