"""Bounded intake through the audit (issue #10, items 3-5): lines over the record limit, lone CR
line ends, files joined with ``cat`` whose second part starts with a byte-order mark, and input
that is not events at all."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import audit_file
from projections.store.store import Store

BOM = b"\xef\xbb\xbf"


def _detections(db: Path) -> list[tuple[str, str, str | None]]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT rule_id, table_id, round_id FROM fct_detections ORDER BY ALL").fetchall()
    return [tuple(r) for r in rows]


def _audit(path: Path, db: Path, **kwargs: object) -> tuple[object, list[dict[str, object]]]:
    dl = db.with_suffix(".rejected.jsonl")
    with Store(db) as store, dl.open("w", encoding="utf-8") as fh:
        summary = audit_file(path, store, fh, **kwargs)  # type: ignore[arg-type]
    return summary, [json.loads(x) for x in dl.read_text(encoding="utf-8").splitlines()]


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, " ".join(r.output.split())


def test_a_line_over_the_record_limit_is_dead_lettered_and_the_audit_goes_on(
    small_shift: tuple[Path, Path], audited_shift: Path, tmp_path: Path
) -> None:
    events, _ = small_shift
    good = events.read_bytes().splitlines(keepends=True)
    first = json.loads(next(g for g in good if b'"HandSet"' in g))
    # schema-valid apart from its size: a HandSet with 100,000 cards (the Pai Gow hand has 7)
    huge = json.dumps({**first, "event_id": "E-HUGE", "seq": 99_999, "five_card": ["AS"] * 100_000})
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"".join([*good[:10], huge.encode() + b"\n", *good[10:]]))
    for workers in (1, 2):
        db = tmp_path / f"big{workers}.duckdb"
        summary, dead = _audit(path, db, workers=workers, batch_lines=2_000, max_record_bytes=64 * 1024)
        assert summary.dead_letters == {"too_large": 1}  # type: ignore[attr-defined]
        (rec,) = dead
        assert rec["line"] == 11 and rec["reason"] == "too_large"
        assert rec["raw_bytes"] == len(huge) and len(str(rec["raw"])) < len(huge)
        assert rec["raw_sha256"] == hashlib.sha256(huge.encode()).hexdigest()
        assert str(rec["raw_sha256"]) in str(rec["detail"])
        assert _detections(db) == _detections(audited_shift)


def test_a_schema_valid_hand_of_two_hundred_thousand_cards_is_a_schema_error_under_a_raised_limit(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    good = events.read_bytes().splitlines(keepends=True)
    first = json.loads(next(g for g in good if b'"HandSet"' in g))
    huge = json.dumps({**first, "event_id": "E-HUGE", "seq": 99_999, "five_card": ["AS"] * 200_000})
    path = tmp_path / "hand.jsonl"
    path.write_bytes(b"".join([*good[:10], huge.encode() + b"\n", *good[10:]]))
    summary, dead = _audit(path, tmp_path / "hand.duckdb", workers=1, max_record_bytes=4 * 1024 * 1024)
    assert [d["reason"] for d in dead] == ["schema_error"] and "five_card" in str(dead[0]["detail"])
    assert summary.events + summary.duplicates == len(good)  # type: ignore[attr-defined]


def test_cr_only_line_ends_are_line_ends(small_shift: tuple[Path, Path], audited_shift: Path, tmp_path: Path) -> None:
    events, _ = small_shift
    path = tmp_path / "mac.jsonl"
    path.write_bytes(events.read_bytes().replace(b"\n", b"\r"))
    _, dead = _audit(path, tmp_path / "mac.duckdb", workers=1)
    assert not dead
    assert _detections(tmp_path / "mac.duckdb") == _detections(audited_shift)


def _joined_days(events: Path, folder: Path, crlf: bool) -> tuple[Path, Path]:
    """Day 1 and day 2 of the shift (day 2 saved by an editor that writes a mark)."""
    lines = events.read_bytes().splitlines(keepends=True)
    if crlf:
        lines = [line.replace(b"\n", b"\r\n") for line in lines]
    half = len(lines) // 2
    day1, day2 = folder / "day1.jsonl", folder / "day2.jsonl"
    day1.write_bytes(b"".join(lines[:half]))
    day2.write_bytes(BOM + b"".join(lines[half:]))
    return day1, day2


def test_cat_of_two_days_the_second_with_a_byte_order_mark_loses_no_event(
    small_shift: tuple[Path, Path], audited_shift: Path, tmp_path: Path
) -> None:
    events, _ = small_shift
    plain = _detections(audited_shift)
    for crlf in (False, True):
        folder = tmp_path / ("crlf" if crlf else "lf")
        folder.mkdir()
        day1, day2 = _joined_days(events, folder, crlf)
        # the README's recipe through a pipe: one worker (a pipe can be read once)
        db = folder / "pipe.duckdb"
        shell = (
            f"cat {day1} {day2} | {sys.executable} -m dealtrail.cli audit /dev/stdin --db {db} "
            f"--dead-letter {folder / 'pipe.rejected.jsonl'}"
        )
        r = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, timeout=300, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "dead letters: 0" in r.stdout
        assert _detections(db) == plain  # no false DT-sequence-gap
        # /dev/stdin redirected from the joined file, read by two workers
        joined = folder / "joined.jsonl"
        joined.write_bytes(day1.read_bytes() + day2.read_bytes())
        code = (
            "import sys\n"
            "from pathlib import Path\n"
            "from dealtrail.ingest.audit import audit_file\n"
            "from projections.store.store import Store\n"
            "if __name__ == '__main__':\n"
            "    with Store(Path(sys.argv[1])) as s:\n"
            "        summary = audit_file(Path('/dev/stdin'), s, workers=2, batch_lines=2_000)\n"
            "    print(summary.workers, sum(summary.dead_letters.values()))\n"
        )
        script = folder / "two.py"
        script.write_text(code)
        db2 = folder / "two.duckdb"
        with joined.open("rb") as stdin:
            out = subprocess.run(
                [sys.executable, str(script), str(db2)],
                stdin=stdin,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["2", "0"]
        assert _detections(db2) == plain


def test_a_duckdb_file_a_csv_and_binary_files_are_refused_early_with_one_line(
    audited_shift: Path, tmp_path: Path
) -> None:
    import gzip

    csv = tmp_path / "findings.csv"
    csv.write_text("finding_id,rule_id,table_id\n" + "".join(f"F-{i},TCP-1,T-{i}\n" for i in range(500)))
    png = tmp_path / "logo.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 100)
    gz = tmp_path / "events.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"type":"TableConfigured"}\n' * 100))
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes((i * 7919) % 251 for i in range(200_000)))
    for path, words in [
        (audited_shift, "is a DuckDB database"),
        (csv, "does not look like an event file"),
        (png, "is a PNG image"),
        (gz, "gzip-compressed"),
        (noise, "does not look like an event file"),
    ]:
        dl = tmp_path / f"{path.name}.rejected.jsonl"
        db = tmp_path / f"{path.name}.out.duckdb"
        code, out = _run("audit", str(path), "--db", str(db), "--dead-letter", str(dl))
        assert code == 2 and "error:" in out and words in out, (path, out)
        assert dl.stat().st_size == 0, path  # nothing dead-lettered


def test_an_audit_that_accepts_no_line_exits_non_zero_with_its_summary(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "CardTeleported"}\n{"type": "CardDealt"}\n')
    dl = tmp_path / "bad.rejected.jsonl"
    code, out = _run("audit", str(path), "--db", str(tmp_path / "bad.duckdb"), "--dead-letter", str(dl))
    assert code == 1 and "nothing was accepted" in out
    assert "dead letters: 2" in out and "schema_error 1" in out and "unknown_event_type 1" in out
    assert f"the store keeps their raw lines in {tmp_path / 'bad.duckdb.dead-letters.jsonl'}" in out
    assert (tmp_path / "bad.duckdb.dead-letters.jsonl").read_text().count("\n") == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    code, out = _run("audit", str(empty), "--db", str(tmp_path / "empty.duckdb"))
    assert code == 1 and "holds no line" in out


def test_a_duckdb_file_that_is_not_a_dealtrail_store_gets_one_line_from_every_command(
    small_shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = small_shift
    empty, foreign = tmp_path / "empty.duckdb", tmp_path / "crm.duckdb"
    duckdb.connect(str(empty)).close()
    with duckdb.connect(str(foreign)) as con:
        con.execute("CREATE TABLE customers (id INTEGER, name VARCHAR)")
        con.execute("INSERT INTO customers VALUES (1, 'a')")
    for db, words in [(empty, "is an empty DuckDB database"), (foreign, "not a dealtrail store")]:
        for args in (
            ["report", "--out", str(tmp_path / "r")],
            ["replay", "--table", "TCP-01"],
            ["verify"],
            ["digest"],
            ["schedule", "--every", "day", "--once", "--out", str(tmp_path / "p")],
        ):
            code, out = _run(*args, "--db", str(db))
            assert code == 2 and "error:" in out and words in out, (db.name, args, out)
    code, out = _run("audit", str(events), "--db", str(foreign), "--dead-letter", str(tmp_path / "x.jsonl"))
    assert code == 2 and "does not write into another application's database" in out, out
    with duckdb.connect(str(foreign), read_only=True) as con:
        assert {r[0] for r in con.execute("SHOW TABLES").fetchall()} == {"customers"}
    code, out = _run("audit", str(events), "--db", str(empty), "--dead-letter", str(tmp_path / "y.jsonl"))
    assert code == 0, out  # a database with no table at all becomes a store
