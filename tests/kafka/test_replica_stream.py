"""The read replica while the projector runs: ``report`` and ``verify`` read the replica the
projector keeps (``--replica --replica-every``), while the projector holds the store."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from projections.store.replica import replica_info
from projections.store.store import connect_read_only
from tests.kafka.conftest import Cluster, count_rows, stop

pytestmark = pytest.mark.kafka


def _replica_events(replica: Path) -> int | None:
    """Events in the replica (None while there is none yet or it does not open)."""
    if not replica.exists():
        return None
    try:
        con = connect_read_only(replica)
    except (OSError, duckdb.Error):
        return None
    try:
        assert replica_info(con) is not None
        return int(con.execute("SELECT count(*) FROM events").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def _dealtrail(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", *args],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_report_and_verify_read_the_replica_while_the_projector_runs(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, replay = shift
    db, replica, log = tmp_path / "store.duckdb", tmp_path / "store.replica.duckdb", tmp_path / "projector.log"
    worker = cluster.start_worker(tmp_path / "worker.log")
    projector = cluster.start(log, "project", "--db", str(db), "--replica", str(replica), "--replica-every", "1s")
    try:
        cluster.cli("publish", str(events))
        cluster.wait_consumed(timeout=180)
        expected = count_rows(replay, "events")
        deadline = time.monotonic() + 180
        while _replica_events(replica) != expected:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            assert projector.poll() is None, log.read_text()[-3000:]
            time.sleep(1)
        # the projector holds the store (its copies leave its lock in place): the replica is what readers get
        busy = _dealtrail(cluster, "verify", "--db", str(db))
        assert busy.returncode == 1 and "cannot open" in busy.stderr, busy.stderr
        report = _dealtrail(cluster, "report", "--db", str(replica), "--out", str(tmp_path / "report"))
        assert report.returncode == 0, report.stdout + report.stderr
        assert f"reading replica {replica}, copied " in " ".join(report.stderr.split())
        assert (tmp_path / "report" / "report.html").is_file()
        verified = _dealtrail(cluster, "verify", "--db", str(replica))
        audited = _dealtrail(cluster, "verify", "--db", str(replay))  # the same shift, audited from the file
        assert verified.returncode == audited.returncode and verified.returncode in (0, 4), verified.stderr
        assert verified.stdout == audited.stdout
        assert "reading replica" in verified.stderr
        assert projector.poll() is None, "the projector ran on throughout"
        assert "writer held" in log.read_text()  # each copy says how long it held the projector
    finally:
        assert stop(worker) == 0
        assert stop(projector, signal.SIGTERM) in (0, -signal.SIGTERM, 143), log.read_text()[-3000:]
