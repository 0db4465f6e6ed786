"""A failed write of the store says what it kept (issue 32): a full file system, a read-only
store and a store whose folder vanished end ``audit``, ``project``, ``reaudit`` and ``archive``
with one line (the store, the last stored event per table or "nothing stored", the command that
resumes) and exit code 5, no traceback; the store stays readable, and the command run again on a
roomy disk completes it exactly (the same events and findings as a run never interrupted).

The full disk is a small tmpfs mounted for the test when the tests run as root and may mount,
else a file-size limit (``RLIMIT_FSIZE``, SIGXFSZ ignored) on a subprocess."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dealtrail.ingest.audit
from dealtrail.cli import app
from dealtrail.cli.common import STORE_WRITE_FAILED
from dealtrail.simulator.floor import FloorSpec, simulate
from projections.store.failures import StoreLostError, write_failure
from projections.store.store import Store, connect_read_only
from schemas.codec import encode
from tests.helpers import can_mount, remount, tmpfs

BATCH = 2_000
"""Events per audit batch in these tests (the default is 50,000): a few commits before the disk fills."""


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 tables dealt from 23:00 on 31 October to 01:00 on 1 November 2026 (UTC): about 13,000
    events across a month boundary."""
    path = tmp_path_factory.mktemp("trail") / "events.jsonl"
    spec = FloorSpec(tables=2, hours=2, seed=3, error_rate=0.1, start=datetime(2026, 10, 31, 23, tzinfo=UTC))
    with path.open("wb") as fh:
        for e in simulate(spec, []):
            fh.write(encode(e) + b"\n")
    return path


@pytest.fixture(scope="module")
def whole(trail: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trail audited on a roomy disk, never interrupted."""
    db = tmp_path_factory.mktemp("whole") / "store.duckdb"
    with Store(db) as store:
        dealtrail.ingest.audit.audit_file(trail, store, batch_lines=BATCH)
    return db


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's audit writes batches of :data:`BATCH` events."""
    monkeypatch.setattr(
        dealtrail.ingest.audit, "audit_file", functools.partial(dealtrail.ingest.audit.audit_file, batch_lines=BATCH)
    )


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output


def _the_line(out: str) -> str:
    """The one line that says the write failed (and that there is no traceback)."""
    assert "Traceback" not in out, out
    lines = [ln for ln in out.splitlines() if "could not write the store" in ln]
    assert len(lines) == 1, out
    assert lines[0].startswith("error: could not write the store") and "; to resume, run: dealtrail " in lines[0]
    return lines[0]


def _contents(db: Path) -> tuple[object, ...]:
    """What a store holds: every event ID with its payload hash, every finding revision, the rounds."""
    con = connect_read_only(db)
    try:
        return (
            con.execute("SELECT count(*), count(DISTINCT event_id) FROM events").fetchall(),
            con.execute("SELECT event_id, payload_hash FROM events ORDER BY event_id").fetchall(),
            con.execute(
                "SELECT finding_id, revision, rule_id, status FROM findings ORDER BY finding_id, revision"
            ).fetchall(),
            con.execute("SELECT table_id, round_id, completed_at FROM rounds ORDER BY table_id, round_id").fetchall(),
        )
    finally:
        con.close()


def _generations(db: Path) -> list[int]:
    """The generations of findings a store holds."""
    con = connect_read_only(db)
    try:
        return [int(g) for (g,) in con.execute("SELECT DISTINCT generation FROM findings ORDER BY 1").fetchall()]
    finally:
        con.close()


def _last_per_table(db: Path) -> list[tuple[str, int]]:
    con = connect_read_only(db)
    try:
        return [
            (str(t), int(s))
            for t, s in con.execute("SELECT table_id, max(seq) FROM events GROUP BY 1 ORDER BY 1").fetchall()
        ]
    finally:
        con.close()


def _says_what_it_kept(line: str, db: Path) -> None:
    """The line names each table's last stored event as the store holds it afterwards."""
    last = _last_per_table(db)  # the store is readable after the failure
    assert last, "the disk filled before the first batch: make the tmpfs larger"
    for table, seq in last:
        assert f"{table} seq {seq} (" in line, line


@pytest.mark.skipif(not can_mount(), reason="needs root and mount (the file-size limit test covers the rest)")
def test_an_audit_onto_a_full_file_system_says_what_it_kept_and_a_rerun_completes_it(
    trail: Path, whole: Path, tmp_path: Path, small_batches: None
) -> None:
    with tmpfs(tmp_path / "disk", "3m") as disk:
        db = disk / "store.duckdb"
        code, out = _run("audit", str(trail), "--db", str(db))
        assert code == STORE_WRITE_FAILED, out
        line = _the_line(out)
        assert f"could not write the store {db} (no space left on device): kept " in line
        assert f"to resume, run: dealtrail audit {trail} --db {db}" in line
        _says_what_it_kept(line, db)
        remount(disk, "size=64m")  # room again: the same command completes the store
        code, out = _run("audit", str(trail), "--db", str(db))
        assert code == 0, out
        assert _contents(db) == _contents(whole)


def test_an_audit_past_a_file_size_limit_says_what_it_kept_and_a_rerun_completes_it(
    trail: Path, whole: Path, tmp_path: Path
) -> None:
    """The same with a file-size limit on the process (SIGXFSZ ignored: the write fails with EFBIG)."""
    db = tmp_path / "store.duckdb"
    script = f"""
import functools, resource, signal, sys
import dealtrail.ingest.audit
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (2_500_000, 2_500_000))
dealtrail.ingest.audit.audit_file = functools.partial(dealtrail.ingest.audit.audit_file, batch_lines={BATCH})
from dealtrail.cli import main
sys.argv = ["dealtrail", "audit", {str(trail)!r}, "--db", {str(db)!r}]
main()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == STORE_WRITE_FAILED, out
    line = _the_line(out)
    assert "(file too large (file-size limit)): kept " in line
    _says_what_it_kept(line, db)
    code, out = _run("audit", str(trail), "--db", str(db))  # no limit: the same command completes it
    assert code == 0, out
    assert _contents(db) == _contents(whole)


def _read_only(folder: Path) -> contextlib.AbstractContextManager[None]:
    """The folder (and the store in it) read-only: a read-only mount as root, else permissions."""

    @contextlib.contextmanager
    def permissions() -> Iterator[None]:
        files = [p for p in folder.iterdir() if p.is_file()]
        for p in files:
            p.chmod(0o400)
        folder.chmod(0o500)
        try:
            yield
        finally:
            folder.chmod(0o700)
            for p in files:
                p.chmod(0o600)

    @contextlib.contextmanager
    def mounted() -> Iterator[None]:
        remount(folder, "ro")
        try:
            yield
        finally:
            remount(folder, "rw")

    return mounted() if os.path.ismount(folder) else permissions()


@pytest.fixture
def half_stored(trail: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(the store, the first half of the trail) audited into a folder of its own (a tmpfs as root)."""
    if not can_mount() and os.geteuid() == 0:
        pytest.skip("root ignores file permissions, and may not mount here")
    half = tmp_path / "half.jsonl"
    lines = trail.read_bytes().splitlines(keepends=True)
    half.write_bytes(b"".join(lines[: len(lines) // 2]))
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tmpfs(tmp_path / "disk", "64m")) if can_mount() else tmp_path / "disk"
        folder.mkdir(exist_ok=True)
        db = folder / "store.duckdb"
        with Store(db) as store:
            dealtrail.ingest.audit.audit_file(half, store, batch_lines=BATCH)
        yield db, half


def test_a_read_only_store_is_one_line_naming_what_it_holds_for_each_writer(
    trail: Path, whole: Path, half_stored: tuple[Path, Path]
) -> None:
    db, _ = half_stored
    with _read_only(db.parent):
        runs = {
            "audit": ("audit", str(trail), "--db", str(db), "--dead-letter", str(db.parent.parent / "rejected.jsonl")),
            "project": ("project", "--db", str(db), "--once", "--timeout", "5"),
            "reaudit": ("reaudit", "--db", str(db), "--workers", "1"),
            "archive": ("archive", "--db", str(db), "--before", "2026-11", "--to", str(db.parent.parent / "cold")),
        }
        for name, args in runs.items():
            code, out = _run(*args)
            assert code == STORE_WRITE_FAILED, (name, out)
            line = _the_line(out)
            assert f"could not write the store {db} (" in line and f"to resume, run: dealtrail {name} " in line
            _says_what_it_kept(line, db)
    code, out = _run("audit", str(trail), "--db", str(db))  # writable again: the same audit completes it
    assert code == 0, out
    assert _contents(db) == _contents(whole)


def test_a_store_whose_folder_vanishes_mid_audit_says_so_and_a_rerun_rebuilds_it(
    trail: Path, whole: Path, tmp_path: Path, small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is removed after the second batch: the next commit lands in a file no one can
    open again (DuckDB keeps writing its open file), so the writer stops at once and says so."""
    folder = tmp_path / "gone"
    db = folder / "store.duckdb"
    batches = 0
    write = Store.write_batch

    def write_then_vanish(self: Store, *args: object, **kwargs: object) -> object:
        nonlocal batches
        counts = write(self, *args, **kwargs)  # type: ignore[arg-type]
        batches += 1
        if batches == 2:
            shutil.rmtree(folder)
        return counts

    monkeypatch.setattr(Store, "write_batch", write_then_vanish)
    code, out = _run("audit", str(trail), "--db", str(db))
    assert code == STORE_WRITE_FAILED, out
    line = _the_line(out)
    assert "the store file was removed while this writer held it" in line
    assert f"no file at {db} any more: nothing of it is kept there" in line
    monkeypatch.undo()
    code, out = _run("audit", str(trail), "--db", str(db))
    assert code == 0, out
    assert _contents(db) == _contents(whole)


@pytest.mark.skipif(not can_mount(), reason="needs root and mount")
def test_reaudit_and_archive_on_a_full_file_system_say_what_was_kept_and_complete_when_run_again(
    whole: Path, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "disk", "64m") as disk:
        db = disk / "store.duckdb"
        shutil.copyfile(whole, db)
        used = shutil.disk_usage(disk).used
        remount(disk, f"size={used + 64 * 1024}")  # all but 64 KiB taken
        for args, resume in (
            (("reaudit", "--db", str(db), "--workers", "1"), f"dealtrail reaudit --db {db}"),
            (
                ("archive", "--db", str(db), "--before", "2026-11", "--to", str(tmp_path / "cold")),
                f"dealtrail archive --db {db} --before 2026-11 --to {tmp_path / 'cold'}",
            ),
        ):
            code, out = _run(*args)
            assert code == STORE_WRITE_FAILED, out
            line = _the_line(out)
            assert "(no space left on device): kept " in line and f"to resume, run: {resume}" in line
            _says_what_it_kept(line, db)
            if args[0] == "reaudit":  # the generation is stored whole or not at all, and the line says which
                stored = _generations(db)
                if "no new generation was stored" in line:
                    assert stored == [1]
                else:
                    assert "generation 2 was stored whole before it failed" in line and stored == [1, 2]
        assert _contents(db)[:2] == _contents(whole)[:2]  # every event still stored, none archived
        remount(disk, "size=64m")
        code, out = _run("reaudit", "--db", str(db), "--workers", "1")
        assert code == 0 and "no change" in out, out
        code, out = _run("archive", "--db", str(db), "--before", "2026-11", "--to", str(tmp_path / "cold"))
        assert code == 0 and "archived 2026-10" in out, out
        code, out = _run("verify", "--db", str(db))
        assert "reading archived months" in out and "Traceback" not in out


def test_only_failures_of_the_store_itself_are_reported_as_failed_writes(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    full = OSError(28, "No space left on device", str(db) + ".wal")
    assert write_failure(full, db) == "no space left on device"
    assert write_failure(OSError(28, "No space left on device", str(tmp_path / "report.html")), db) is None
    assert write_failure(OSError(13, "Permission denied", str(tmp_path)), db) == "permission denied"
    assert write_failure(ValueError("bad row"), db) is None
    lost = StoreLostError("the store file was replaced by another file while this writer held it")
    assert write_failure(RuntimeError("wrapped"), db) is None
    try:
        raise RuntimeError("wrapped") from lost
    except RuntimeError as exc:
        assert write_failure(exc, db) == str(lost)


def test_a_writer_notices_its_store_file_was_replaced(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    with Store(db) as store:
        store.check_held()
        moved = tmp_path / "moved.duckdb"
        os.replace(db, moved)
        db.write_bytes(b"")  # another file at the path
        with pytest.raises(StoreLostError, match="replaced by another file"):
            store.check_held()
        db.unlink()
        with pytest.raises(StoreLostError, match="removed"):
            store.check_held()
        os.replace(moved, db)
        store.check_held()
