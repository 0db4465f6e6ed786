"""Every command that opens a store ends with one ``error:`` line and a documented exit code, never
a traceback, when the store is held by another process (a console or a projector writing it), is
missing, or cannot be read as a store of this version (a damaged header, as a file of another
DuckDB storage version reads); ``verify-package`` opens a store only when it is given one
(issue 47, item 5).

Each command runs through the console script's entry point (:func:`dealtrail.cli.main`), in the
test's process (a start per command would cost a second and more on two cores); the store is held
by a process of its own.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import pytest

from dealtrail.console import auth
from dealtrail.investigate.evidence import build_package
from dealtrail.reporting.schedule import Schedule, run_due
from projections.records.signing import create_key, load_key
from projections.records.signoff import sign
from projections.store.store import Store
from streams.engine import Plausibility

NOW = datetime(2026, 11, 27, 21, 0, tzinfo=UTC)
HELD = "{held}"
"""Where a command's store path goes in :data:`COMMANDS`."""

COMMANDS: list[tuple[str, ...]] = [
    ("serve", "--db", HELD),
    ("archive", "--before", "2026-01", "--to", "{tmp}/archive", "--db", HELD),
    ("evidence", "--finding", "{finding}", "--out", "{tmp}/evidence", "--db", HELD),
    ("verify-package", "{package}", "--store", HELD),
    ("verify", "--db", HELD),
    ("digest", "--db", HELD),
    ("replay", "--table", "{table}", "--db", HELD),
    ("audit", "{events}", "--db", HELD, "--dead-letter", "{tmp}/rejected.jsonl"),
    ("reaudit", "--db", HELD),
    ("report", "--db", HELD, "--out", "{tmp}/report"),
    ("schedule", "--every", "day", "--db", HELD, "--out", "{tmp}/periods", "--once"),
    ("sign-report", "{revision}", "--user", "meg", "--statement", "Reviewed", "--db", HELD),
    ("verify-signoff", "{revision}", "--db", HELD),
    ("project", "--db", HELD, "--once"),
    ("access-log", "forward", "--db", HELD),
    ("users", "list", "--db", HELD),
    ("users", "add", "bob", "--role", "admin", "--db", HELD),
    ("users", "token", "meg", "--db", HELD),
    ("users", "unlock", "meg", "--db", HELD),
    ("keys", "create", "--db", HELD),
    ("keys", "rotate", "--db", HELD),
    ("keys", "show", "--db", HELD),
    ("staff", "import", "{staff}", "--db", HELD),
]
"""Every command that opens a store (``dealtrail --help``; ``demo`` moves a store aside and makes
its own, ``simulate``, ``export-schemas``, ``topics``, ``publish`` and ``worker`` open none)."""

READERS = {"evidence", "verify-package", "verify", "digest", "replay", "report", "schedule", "verify-signoff"}
READERS |= {"users list", "keys show", "access-log forward", "sign-report", "users token"}
"""Commands for which a missing store is an error (the others make a new store, as documented)."""

EXIT_CODES = {0: "done", 1: "failed (a busy store)", 2: "usage or input error", 5: "a write of the store failed"}
"""The documented exit codes (``dealtrail --help``) a command may end with here."""


@pytest.fixture(scope="module")
def world(
    audited_shift: Path, small_shift: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """A store with a manager, a signed period report revision, an evidence package, a staff
    file and a signing key file: what the commands take besides the store."""
    tmp = tmp_path_factory.mktemp("unusable")
    db = tmp / "store.duckdb"
    shutil.copy(audited_shift, db)
    with Store(db) as s:
        auth.add_user(s.con, "meg", "manager", "meg-manager-pass", datetime(2026, 11, 1, tzinfo=UTC))
        table, finding = s.con.execute(
            "SELECT table_id, finding_id FROM dim_findings ORDER BY finding_id"
        ).fetchone() or ("", "")
    revisions = run_due(db, tmp / "signed", Schedule("0 * * * *"), NOW)
    sign(revisions[0], "meg", "manager", "Reviewed", NOW)
    key = tmp / "keys" / "signing.pem"
    key.parent.mkdir()
    create_key(key)
    con = duckdb.connect(str(db), read_only=True)
    try:
        limits = Plausibility(100_000, timedelta(hours=1))
        package = build_package(con, finding, limits, NOW, signer=load_key(key)).write(tmp / "package")
    finally:
        con.close()
    staff = tmp / "staff.csv"
    staff.write_text("staff_id,name,role\nD-1,Ann Lee,dealer\n")
    return {
        "store": str(db),
        "tmp": str(tmp),
        "finding": str(finding),
        "table": str(table),
        "package": str(package),
        "events": str(small_shift[0]),
        "revision": str(revisions[0]),
        "staff": str(staff),
        "key": str(key),
    }


class Ran(NamedTuple):
    """What a command printed and its exit code."""

    returncode: int
    stdout: str
    stderr: str


def _run(
    args: tuple[str, ...], db: Path, world: dict[str, str], tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> Ran:
    """Run ``dealtrail ARGS`` through its entry point (:func:`dealtrail.cli.main`, as the console
    script does: its last net included), in this process to spare a start per command."""
    from dealtrail.cli import main

    argv = [a.replace(HELD, str(db)).format(**{**world, "tmp": str(tmp)}) for a in args]
    monkeypatch.setenv("DEALTRAIL_ACCESS_FORWARD__JSONL_PATH", str(tmp / "forwarded.jsonl"))
    monkeypatch.setenv("DEALTRAIL_KAFKA_BOOTSTRAP", "127.0.0.1:9")  # nothing listens: no command may wait for one
    monkeypatch.setenv("DEALTRAIL_DB", str(db))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("DEALTRAIL_SIGNING__KEY_FILE", raising=False)
    if args[0] == "keys":  # the key file they make (create) or replace (rotate); the others sign nothing here
        monkeypatch.setenv("DEALTRAIL_SIGNING__KEY_FILE", world["key"] if args[1] == "rotate" else str(tmp / "new.pem"))
    monkeypatch.setattr(sys, "argv", ["dealtrail", *argv])
    monkeypatch.setattr(sys, "stdin", io.StringIO("meg-manager-pass\nmeg-manager-pass\n"))
    capsys.readouterr()
    umask = os.umask(0o022)
    os.umask(umask)
    code: Any = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    finally:
        os.umask(umask)  # main() sets 077 for the process
    out = capsys.readouterr()
    return Ran(code if isinstance(code, int) else 1, out.out, out.err)


def _one_error_line(r: Ran, what: str) -> str:
    out = r.stdout + r.stderr
    assert "Traceback" not in out, (what, out[-3000:])
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, (what, r.returncode, out[-3000:])
    assert r.returncode in EXIT_CODES and r.returncode != 0, (what, r.returncode, out)
    return errors[0]


@pytest.fixture(scope="module")
def held(world: dict[str, str]) -> Iterator[Path]:
    """The store held by another process's write connection (as a console or a projector holds it)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
         "time.sleep(600)", world["store"]],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield Path(world["store"])
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(x for x in a[:2] if not x.startswith("{")))
def test_a_command_against_a_held_store_ends_with_one_error_line_and_exit_1(
    args: tuple[str, ...],
    held: Path,
    world: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    key = Path(world["key"]).read_bytes()
    r = _run(args, held, world, tmp_path, monkeypatch, capsys)
    line = _one_error_line(r, " ".join(args))
    assert r.returncode == 1, (args, line)
    assert "held" in line or "writing it" in line or "holds" in line, line
    # nothing was made or moved on the way: no key file made (create), the key kept in place (rotate)
    assert not (tmp_path / "new.pem").exists() and Path(world["key"]).read_bytes() == key
    assert sorted(p.name for p in Path(world["key"]).parent.iterdir()) == ["signing.pem"]


def test_verify_package_opens_no_store_unless_given_one(
    held: Path, world: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # the default store (DEALTRAIL_DB) is held by a console: the package is still checked, without it
    r = _run(("verify-package", "{package}"), held, world, tmp_path, monkeypatch, capsys)
    assert r.returncode == 0 and "verified:" in r.stdout, r.stdout + r.stderr
    assert "validity period was NOT checked" in " ".join((r.stdout + r.stderr).split())


def _damaged(world: dict[str, str], tmp: Path) -> Path:
    """A copy of the store whose header no DuckDB of this version reads (as a file written by
    another DuckDB storage version, or damaged on the disk)."""
    db = tmp / "other.duckdb"
    shutil.copy(world["store"], db)
    with db.open("r+b") as f:
        f.seek(12)
        f.write((38).to_bytes(8, "little"))  # the storage version number of the main header
    return db


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(x for x in a[:2] if not x.startswith("{")))
def test_a_command_against_a_store_it_cannot_read_or_a_missing_one_ends_with_one_error_line(
    args: tuple[str, ...], world: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    name = " ".join(a for a in args[:2] if not a.startswith("{") and not a.startswith("-"))
    r = _run(args, _damaged(world, tmp_path), world, tmp_path, monkeypatch, capsys)
    _one_error_line(r, f"{name} (damaged)")
    if name in READERS or args[0] in READERS:
        r = _run(args, tmp_path / "none.duckdb", world, tmp_path, monkeypatch, capsys)
        _one_error_line(r, f"{name} (missing)")


def test_users_unlock_against_a_missing_store_makes_none_and_says_so(tmp_path: Path) -> None:
    # noticed while testing issue 47: it created an empty store and said "unlocked"
    from typer.testing import CliRunner

    from dealtrail.cli import app

    missing = tmp_path / "none.duckdb"
    r = CliRunner().invoke(app, ["users", "unlock", "rita", "--db", str(missing)])
    assert r.exit_code == 2 and "no dealtrail database" in r.output and "unlocked" not in r.output, r.output
    assert not missing.exists()
