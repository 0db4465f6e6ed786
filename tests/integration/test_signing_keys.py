"""The property's signing key (issue 35, item 3): ``dealtrail keys create|show|rotate``, the key
file owner-only and never in the store, public keys with validity periods recorded as new rows,
and packages signed before a rotation still verifiable with the key valid then."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dealtrail.cli import app as cli
from dealtrail.investigate.bag import SIGNED, SIGNED_SIGNATURE
from dealtrail.investigate.evidence import build_package, verify_package
from projections.records import signing_keys
from projections.records.signing import SigningError, key_id, load_key, public_pem
from streams.engine import Plausibility


@pytest.fixture
def store(audited_shift: Path, tmp_path: Path) -> Path:
    db = tmp_path / "store.duckdb"
    shutil.copy(audited_shift, db)
    return db


def _keys(*args: str, db: Path, key: Path) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["keys", *args, "--db", str(db)], env={"DEALTRAIL_SIGNING__KEY_FILE": str(key)})
    return r.exit_code, r.output


def _package(db: Path, key: Path) -> Path:
    con = duckdb.connect(str(db), read_only=True)
    fid = con.execute("SELECT min(finding_id) FROM dim_findings WHERE rule_id = 'DT-remedy-overdue'").fetchall()[0][0]
    try:
        pkg = build_package(
            con, fid, Plausibility(100_000, timedelta(hours=1)), datetime.now(UTC), signer=load_key(key)
        )
    finally:
        con.close()
    out = key.parent / f"pkg-{len(list(key.parent.glob('pkg-*')))}"
    return pkg.write(out)


def test_keys_create_writes_an_owner_only_key_and_records_only_its_public_key(store: Path, tmp_path: Path) -> None:
    key = tmp_path / "keys" / "property.pem"
    old = os.umask(0o022)
    try:
        code, out = _keys("create", db=store, key=key)
    finally:
        os.umask(old)
    assert code == 0, out
    assert (key.stat().st_mode & 0o777) == 0o600
    private = load_key(key)
    pem = public_pem(private)
    con = duckdb.connect(str(store), read_only=True)
    try:
        (row,) = signing_keys.history(con)
        stored = " ".join(str(v) for r in con.execute("SELECT * FROM signing_keys").fetchall() for v in r)
    finally:
        con.close()
    assert row["public_key_pem"] == pem.decode() and row["key_id"] == key_id(pem) and row["valid_until"] is None
    secret = key.read_text()
    assert "PRIVATE" not in stored and secret not in stored and secret not in out
    code, out = _keys("create", db=store, key=key)
    assert code != 0 and "never written over" in out  # a key is never replaced by create
    code, out = _keys("show", db=store, key=key)
    assert code == 0 and f"key {key_id(pem)}" in out and "until now (in force)" in out and "BEGIN PUBLIC KEY" in out


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    from projections.records.signing import create_key

    key = tmp_path / "k.pem"
    create_key(key)
    key.chmod(0o644)
    with pytest.raises(SigningError, match="chmod 600"):
        load_key(key)
    with pytest.raises(SigningError, match="DEALTRAIL_SIGNING__KEY_FILE"):
        load_key(None)


def test_rotating_the_key_keeps_every_earlier_package_verifiable_with_the_key_valid_then(
    store: Path, tmp_path: Path
) -> None:
    key = tmp_path / "keys" / "property.pem"
    assert _keys("create", db=store, key=key)[0] == 0
    first_pem = public_pem(load_key(key))
    before = _package(store, key)
    signed_at = datetime.now(UTC)
    code, out = _keys("rotate", db=store, key=key)
    assert code == 0, out
    second_pem = public_pem(load_key(key))
    assert second_pem != first_pem
    assert list(key.parent.glob("property.pem.retired-*"))  # the old key file is kept, not overwritten
    after = _package(store, key)
    con = duckdb.connect(str(store), read_only=True)
    try:
        keys = signing_keys.history(con)
        assert [k["key_id"] for k in keys] == [key_id(first_pem), key_id(second_pem)]
        assert keys[0]["valid_until"] == keys[1]["valid_from"] and keys[1]["valid_until"] is None
        assert signing_keys.valid_at(con, key_id(first_pem), signed_at) is not None
        assert signing_keys.valid_at(con, key_id(second_pem), signed_at) is None
    finally:
        con.close()
    assert verify_package(before, first_pem).ok and verify_package(after, second_pem).ok
    wrong = verify_package(before, second_pem)
    assert not wrong.ok and "not by the registered key" in (wrong.problem or "")
    registered = tmp_path / "first.pem"
    registered.write_bytes(first_pem)
    r = subprocess.run(
        [
            *("openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(registered), "-rawin"),
            *("-in", str(before / SIGNED), "-sigfile", str(before / SIGNED_SIGNATURE)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0 and "Signature Verified Successfully" in r.stdout, r.stderr
    r2 = CliRunner().invoke(cli, ["verify-package", str(before), "--public-key", str(registered)])
    assert r2.exit_code == 0 and f"signed by key {key_id(first_pem)}" in r2.output, r2.output


def _openssl_key(path: Path) -> Path:
    """A key made as docker-compose.yml's header makes it: openssl, owner-only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(path)], check=True, capture_output=True)
    path.chmod(0o600)
    return path


def test_keys_register_records_a_key_made_elsewhere_and_reads_it_only(store: Path, tmp_path: Path) -> None:
    key = _openssl_key(tmp_path / "secrets" / "signing-key.pem")
    before = key.read_bytes()
    code, out = _keys("register", db=store, key=key)
    assert code == 0, out
    assert key.read_bytes() == before and (key.stat().st_mode & 0o777) == 0o600
    con = duckdb.connect(str(store), read_only=True)
    try:
        (recorded,) = signing_keys.history(con)
    finally:
        con.close()
    public = subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout"], capture_output=True, text=True, check=True)
    assert recorded["public_key_pem"].strip() == public.stdout.strip()
    assert recorded["key_id"] == key_id(public_pem(load_key(key)))
    assert recorded["valid_until"] is None
    code, again = _keys("register", db=store, key=key)
    assert code == 0 and "nothing to do" in again, again


def test_keys_register_replaces_the_key_in_force_and_never_puts_a_retired_one_back(store: Path, tmp_path: Path) -> None:
    first = tmp_path / "keys" / "first.pem"
    assert _keys("create", db=store, key=first)[0] == 0
    second = _openssl_key(tmp_path / "secrets" / "second.pem")
    code, out = _keys("register", db=store, key=second)
    assert code == 0 and f"replaces {key_id(public_pem(load_key(first)))}" in " ".join(out.split()), out
    con = duckdb.connect(str(store), read_only=True)
    try:
        old, new = signing_keys.history(con)
    finally:
        con.close()
    assert old["valid_until"] == new["valid_from"] and new["valid_until"] is None
    code, out = _keys("register", db=store, key=first)
    assert code == 1 and "retired" in out and "never put back" in " ".join(out.split()), out


def test_keys_register_refuses_a_key_others_may_read(store: Path, tmp_path: Path) -> None:
    key = _openssl_key(tmp_path / "secrets" / "signing-key.pem")
    key.chmod(0o644)
    code, out = _keys("register", db=store, key=key)
    assert code == 2 and "chmod 600" in out, out
