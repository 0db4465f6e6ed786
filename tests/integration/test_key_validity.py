"""A signature counts only within its key's validity period (issue 35, item 4): after ``dealtrail
keys rotate``, a package or sign-off signed with the retired key but stating a time after its
retirement is refused by ``verify-package`` / ``verify-signoff`` with the store, in one line
naming the key and the dates; without a store, they say the validity was not checked."""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.investigate.evidence import build_package
from dealtrail.reporting.schedule import Schedule, run_due
from projections.records import signing_keys
from projections.records.signing import key_id, load_key, public_pem
from projections.records.signoff import sign
from streams.engine import Plausibility

START = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)


@pytest.fixture
def store(audited_shift: Path, tmp_path: Path) -> Path:
    db = tmp_path / "store.duckdb"
    shutil.copy(audited_shift, db)
    return db


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    r = CliRunner().invoke(cli, list(args), env=env)
    return r.exit_code, r.output


def _package(db: Path, key: Path, at: datetime, name: str) -> Path:
    con = duckdb.connect(str(db), read_only=True)
    fid = con.execute("SELECT min(finding_id) FROM dim_findings WHERE rule_id = 'DT-remedy-overdue'").fetchall()[0][0]
    try:
        pkg = build_package(con, fid, Plausibility(100_000, timedelta(hours=1)), at, signer=load_key(key))
    finally:
        con.close()
    return pkg.write(key.parent.parent / name)


def _rotated(store: Path, tmp_path: Path) -> tuple[Path, Path, str, datetime]:
    """The store's key created and rotated: (key file, retired key file, old key ID, retired at)."""
    key = tmp_path / "keys" / "property.pem"
    env = {"DEALTRAIL_SIGNING__KEY_FILE": str(key)}
    assert _run("keys", "create", "--db", str(store), env=env)[0] == 0
    old = key_id(public_pem(load_key(key)))
    time.sleep(0.01)
    assert _run("keys", "rotate", "--db", str(store), env=env)[0] == 0
    (retired,) = key.parent.glob("property.pem.retired-*")
    con = duckdb.connect(str(store), read_only=True)
    try:
        (first, _) = signing_keys.history(con)
    finally:
        con.close()
    return key, retired, old, first["valid_until"]


def test_a_package_made_after_its_key_was_retired_is_refused_with_the_store(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    key, retired, old, retired_at = _rotated(store, tmp_path)
    during = _package(store, retired, retired_at - timedelta(microseconds=1), "pkg-during")
    late = _package(store, retired, retired_at + timedelta(minutes=5), "pkg-late")  # the old key, used after rotation
    current = _package(store, key, retired_at + timedelta(minutes=5), "pkg-current")

    code, out = _run("verify-package", str(late), "--store", str(store))
    assert code == 4, out
    flat = " ".join(out.split())
    assert f"after key {old} was retired at {retired_at.isoformat()}" in flat, out
    assert f"made at {(retired_at + timedelta(minutes=5)).isoformat()}" in flat
    code, out = _run("verify-package", str(during), "--store", str(store))
    assert code == 0 and "within key" in out and "validity period in the store" in " ".join(out.split()), out
    code, out = _run("verify-package", str(current), "--store", str(store))
    assert code == 0, out
    # only --store opens a store: the default one (DEALTRAIL_DB) is not read (issue 47, item 5)
    code, out = _run("verify-package", str(late), env={"DEALTRAIL_DB": str(store)})
    assert code == 0 and "validity period was NOT checked" in " ".join(out.split()), out
    # no store at all: the signature holds, and the validity is said to be unchecked
    code, out = _run("verify-package", str(late), env={"DEALTRAIL_DB": str(tmp_path / "none.duckdb")})
    assert code == 0 and "validity period was NOT checked" in " ".join(out.split()), out


def test_a_sign_off_made_after_its_key_was_retired_is_refused_by_verify_signoff_with_the_store(
    store: Path, tmp_path: Path
) -> None:
    _, retired, old, retired_at = _rotated(store, tmp_path)
    first_hour = Schedule("0 * * * *")
    late_rev, early_rev = (
        next(p for p in run_due(store, tmp_path / name, first_hour, START + timedelta(hours=3)) if "T1800" in str(p))
        for name in ("periods-a", "periods-b")
    )
    revs = [late_rev, early_rev]
    late_at = retired_at + timedelta(minutes=1)
    sign(revs[0], "meg", "manager", "Reviewed.", late_at, signer=load_key(retired))
    code, out = _run("verify-signoff", str(revs[0]), "--db", str(store))
    flat = " ".join(out.split())
    assert code == 1 and f"after key {old} was retired at {retired_at.isoformat()}" in flat, out
    registered = tmp_path / "old.pem"
    registered.write_bytes(public_pem(load_key(retired)))
    code, out = _run("verify-signoff", str(revs[0]), "--public-key", str(registered))
    assert code == 0 and "validity period was not checked: pass --db" in " ".join(out.split()), out
    sign(revs[1], "meg", "manager", "Reviewed.", retired_at - timedelta(microseconds=1), signer=load_key(retired))
    code, out = _run("verify-signoff", str(revs[1]), "--db", str(store))
    assert "within its validity period" in " ".join(out.split()), out  # (the anchor check follows)
