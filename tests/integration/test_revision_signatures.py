"""Every period report revision is sealed (issue 35, item 2): ``manifest-sha256.txt`` lists each
file's SHA-256 and, with the property's key set, ``manifest-sha256.txt.sig`` is its detached
Ed25519 signature, checked here with the openssl and sha256sum binaries; without a key the
revision says it is unsigned (``UNSIGNED.txt``, ``signed: false`` in the period's manifest).
A revision is never rewritten: the next one is sealed beside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.reporting.schedule import Schedule, run_due
from projections.records import signing_keys
from projections.records.report_revisions import (
    FILES_MANIFEST,
    FILES_SIGNATURE,
    PUBLIC_KEY,
    UNSIGNED,
    RevisionSignatureError,
    check_seal,
    history,
)
from projections.records.signing import key_id, load_key, public_pem
from projections.store.store import Store

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
NOW = START + timedelta(hours=3)
LABEL = "2026-11-27T1800+0000_UTC"


@pytest.fixture
def store(audited_shift: Path, tmp_path: Path) -> Path:
    db = tmp_path / "store.duckdb"
    shutil.copy(audited_shift, db)
    return db


def _openssl_verify(folder: Path, key_pem: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *("openssl", "pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", str(key_pem)),
            *("-sigfile", str(folder / FILES_SIGNATURE), "-in", str(folder / FILES_MANIFEST)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def _sha256sum(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sha256sum", "--quiet", "--strict", "-c", FILES_MANIFEST],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )


def _registered(db: Path) -> dict[str, bytes]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {k["key_id"]: k["public_key_pem"].encode() for k in signing_keys.history(con)}
    finally:
        con.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl binary checks the signature")
def test_dealtrail_schedule_signs_each_revisions_manifest_checkable_with_openssl(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    key = tmp_path / "keys" / "property.pem"
    env = {"DEALTRAIL_SIGNING__KEY_FILE": str(key)}
    runner = CliRunner()
    created = runner.invoke(cli, ["keys", "create", "--db", str(store)], env=env)
    assert created.exit_code == 0, created.output
    out = tmp_path / "periods"
    old = os.umask(0o077)
    try:
        ran = runner.invoke(
            cli,
            ["schedule", "--every", "0 * * * *", "--db", str(store), "--out", str(out), "--now", NOW.isoformat()],
            env=env,
        )
    finally:
        os.umask(old)
    assert ran.exit_code == 0, ran.output
    revisions = sorted(out.glob("*/rev-*"))
    assert len(revisions) == 2
    registered = tmp_path / "registered.pem"
    registered.write_bytes(public_pem(load_key(key)))
    kid = key_id(registered.read_bytes())
    for rev in revisions:
        listed = (rev / FILES_MANIFEST).read_text().splitlines()
        assert {line.split("  ")[1] for line in listed} >= {"report.html", "summary.json", "findings.csv"}
        assert not (rev / UNSIGNED).exists()
        assert all((p.stat().st_mode & 0o777) == 0o600 for p in rev.iterdir())
        checked = _openssl_verify(rev, registered)
        assert checked.returncode == 0 and "Signature Verified Successfully" in checked.stdout, checked
        assert _sha256sum(rev).returncode == 0
        assert check_seal(rev, _registered(store)).endswith(f"signed by the property's key {kid}")
        (entry,) = [r for r in history(rev.parent) if r["folder"] == rev.name]
        assert (entry["signed"], entry["signing_key"]) == (True, kid)
        manifest = json.loads((rev.parent / "manifest.json").read_text())
        assert manifest["revisions"][-1]["signing_key"] == kid

    rev = revisions[0]
    (rev / "report.html").write_bytes((rev / "report.html").read_bytes() + b" ")  # a changed report
    assert _sha256sum(rev).returncode != 0
    with pytest.raises(RevisionSignatureError, match=r"report\.html changed"):
        check_seal(rev, _registered(store))
    manifest = (rev / FILES_MANIFEST).read_text().replace("  report.html", "  report.htm")  # a changed manifest
    (rev / FILES_MANIFEST).write_text(manifest)
    assert _openssl_verify(rev, registered).returncode != 0


def test_a_revision_written_without_a_key_says_it_is_unsigned(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "periods"
    written = run_due(store, out, Schedule("0 * * * *"), NOW)
    assert written
    for rev in written:
        assert not (rev / FILES_SIGNATURE).exists() and not (rev / PUBLIC_KEY).exists()
        assert "NOT signed" in (rev / UNSIGNED).read_text()
        assert _sha256sum(rev).returncode == 0
        assert "NOT signed" in check_seal(rev, {})
        manifest = json.loads((rev.parent / "manifest.json").read_text())
        assert [r["signed"] for r in manifest["revisions"]] == [False]


def test_the_consoles_new_revision_is_signed_beside_the_earlier_one_which_stays_as_it_was(
    store: Path, tmp_path: Path
) -> None:
    import re

    from fastapi.testclient import TestClient

    from dealtrail.console import auth
    from dealtrail.console.app import ConsoleConfig, create_app
    from projections.models.reviews import ReviewDue
    from projections.records.signing import create_key

    key_file = tmp_path / "k.pem"
    key = create_key(key_file)
    out = tmp_path / "periods"
    (first,) = [p for p in run_due(store, out, Schedule("0 * * * *"), NOW, signer=key) if p.parent.name == LABEL]
    before = {p.name: p.read_bytes() for p in first.iterdir()}
    with Store(store) as s:
        auth.add_user(s.con, "meg", "manager", "meg-manager-pass", datetime(2026, 11, 1, tzinfo=UTC))
        clock = lambda: NOW + timedelta(minutes=10)  # noqa: E731
        config = ConsoleConfig(ReviewDue(24, 24, 72), "m" * 48, reports_dir=out, clock=clock, signing_key=key_file)
        client = TestClient(create_app(s, config))

        def csrf(page: str) -> str:
            m = re.search(r'name="csrf" value="([^"]+)"', client.get(page).text)
            assert m
            return m.group(1)

        client.post(
            "/login", data={"username": "meg", "password": "meg-manager-pass", "csrf": csrf("/login"), "next": "/"}
        )
        token = csrf("/reports")
        finding = s.con.execute(
            "SELECT finding_id FROM dim_findings WHERE observed_at >= ? AND observed_at < ? "
            "ORDER BY observed_at LIMIT 1",
            [START, START + timedelta(hours=1)],
        ).fetchall()[0][0]
        reviewed = client.post(
            f"/findings/{finding}/reviews", data={"action": "acknowledge", "note": "x", "csrf": token}
        )
        assert reviewed.status_code == 200
        revised = client.post(f"/reports/scheduled/{LABEL}/revise", data={"csrf": token}, follow_redirects=False)
        assert revised.status_code == 303 and "revised=yes" in revised.headers["location"]
    made = out / LABEL / "rev-0002"
    assert (made / FILES_SIGNATURE).is_file() and not (made / UNSIGNED).exists()
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before  # never rewritten
    keys = {key_id(public_pem(key)): public_pem(key)}
    assert "signed by the property's key" in check_seal(made, keys)
    assert "signed by the property's key" in check_seal(first, keys)
