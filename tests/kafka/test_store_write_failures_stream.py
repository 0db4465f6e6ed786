"""The projector on a full file system (issue 32): one line with what the store kept and the
command that resumes, exit 5, no traceback; run again with room, it goes on from the offsets
stored with the rows and ends with every event of the topic, once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from dealtrail.cli.common import STORE_WRITE_FAILED
from tests.helpers import can_mount, remount, tmpfs
from tests.kafka.conftest import Cluster

pytestmark = [pytest.mark.kafka, pytest.mark.skipif(not can_mount(), reason="needs root and mount (a tmpfs)")]


def _events(db: Path) -> list[tuple[str, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [
            (str(e), str(h))
            for e, h in con.execute("SELECT event_id, payload_hash FROM events ORDER BY 1, 2").fetchall()
        ]
    finally:
        con.close()


def test_a_projector_onto_a_full_file_system_says_what_it_kept_and_a_rerun_completes_it(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, replay = shift
    cluster.cli("publish", str(events))
    with tmpfs(tmp_path / "disk", "2m") as disk:
        db = disk / "store.duckdb"
        args = ("project", "--db", str(db), "--once", "--timeout", "120", "--batch", "500")
        done = subprocess.run(
            [sys.executable, "-m", "dealtrail.cli", *args],
            env=cluster.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        out = done.stdout + done.stderr
        assert done.returncode == STORE_WRITE_FAILED, out
        assert "Traceback" not in out, out
        [line] = [ln for ln in out.splitlines() if "could not write the store" in ln]
        assert f"could not write the store {db} (no space left on device): kept " in line, line
        assert f"to resume, run: dealtrail project --db {db} --once" in line, line
        con = duckdb.connect(str(db), read_only=True)  # readable afterwards, and as the line says
        try:
            last = con.execute("SELECT table_id, max(seq) FROM events GROUP BY 1 ORDER BY 1").fetchall()
        finally:
            con.close()
        assert last
        for table, seq in last:
            assert f"{table} seq {seq} (" in line, line
        remount(disk, "size=256m")
        cluster.cli(*args[:-2])  # the same command with room: it goes on from the stored offsets
        assert _events(db) == _events(replay)
