"""Scheduled reports written by the projector while a shift streams in: provisional while the
trail of a period is not all in, final once it is and equal to ``dealtrail report`` of the period,
revised (beside the old revisions) by a review made afterwards and by ``schedule --once``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from projections.records.report_revisions import history
from projections.reports.report import coverage
from schemas.reviews import FindingAcknowledged, FindingDisposed
from tests.kafka.conftest import Cluster, stop

pytestmark = pytest.mark.kafka

EVERY = "*/15 * * * *"  # quarter-hour periods: the 45-minute shift spans three
START, END = "2026-11-27T18:15:00+00:00", "2026-11-27T18:30:00+00:00"
LABEL = "2026-11-27T1815+0000_UTC"


def _wait(what: str, probe: Callable[[], Any], timeout: float, log: Path) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout:.0f} s\n{log.read_text()[-3000:]}")


def _figures(summary: Path) -> dict[str, Any]:
    figures: dict[str, Any] = json.loads(summary.read_text())
    figures.pop("report")
    figures["reviews"].pop("as_of", None)  # the instant lateness is judged at: each report's own as-of
    return figures


def _publish_review(cluster: Cluster, review: FindingAcknowledged | FindingDisposed) -> None:
    from streams.review_publish import ReviewPublisher

    s = cluster.settings()
    publisher = ReviewPublisher(s.kafka, s.topics)
    try:
        publisher.send(review)
    finally:
        publisher.close()


def test_a_shift_published_in_two_halves_ends_with_a_final_report_equal_to_the_report_of_the_period(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, replay = shift
    lines = events.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["occurred_at"] >= "2026-11-27T18:22")
    halves = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    halves[0].write_bytes(b"".join(lines[:cut]))
    halves[1].write_bytes(b"".join(lines[cut:]))
    con = duckdb.connect(str(replay), read_only=True)
    try:
        # what the period's report covers once the whole shift is in (the audit of the same file)
        whole_trail = coverage(con, datetime.fromisoformat(START), datetime.fromisoformat(END), None)
        expected = {k: whole_trail[k] for k in ("tables", "finding_revisions", "rounds")}
        fid = str(
            con.execute(
                "SELECT finding_id FROM fct_detections WHERE observed_at >= ? AND observed_at < ? ORDER BY 1 LIMIT 1",
                [datetime.fromisoformat(START), datetime.fromisoformat(END)],
            ).fetchall()[0][0]
        )
    finally:
        con.close()
    db, reports, log = tmp_path / "s.duckdb", tmp_path / "periods", tmp_path / "projector.log"
    period = reports / LABEL
    env = {**cluster.env, "DEALTRAIL_REPORTS__CHECK_SECONDS": "0.5"}
    worker = cluster.start_worker(tmp_path / "worker.log")
    with log.open("ab") as fh:
        projector = subprocess.Popen(
            [sys.executable, "-m", "dealtrail.cli", "project", "--db", str(db), "--report-every", EVERY,
             "--reports", str(reports)],
            env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        cluster.cli("publish", str(halves[0]))
        first = _wait("a provisional report of the half-published period", lambda: history(period), 180, log)
        assert first[-1]["status"] == "provisional", first
        time.sleep(3)  # the pause between the halves
        assert history(period)[-1]["status"] == "provisional"
        cluster.cli("publish", str(halves[1]))
        cluster.wait_consumed(timeout=180)

        def settled() -> list[dict[str, Any]] | None:
            revisions = history(period)
            if not revisions or revisions[-1]["status"] != "final":
                return None
            covered = revisions[-1]["coverage"]
            return revisions if {k: covered[k] for k in expected} == expected else None

        final = _wait("a final report once the whole shift is in", settled, 180, log)
        assert all(r["superseded_by"] == r["revision"] + 1 for r in final[:-1])
        # a review made after that adds a revision (the projector stores it and looks again)
        made = datetime.now(UTC)
        _publish_review(cluster, FindingAcknowledged(review_id="R1", finding_id=fid, user="rita", reviewed_at=made))
        reviewed = _wait(
            "a revision with the review",
            lambda: (h := history(period)) and h[-1]["coverage"]["reviews"]["count"] == 1 and h,
            120,
            log,
        )
        assert reviewed[-1]["status"] == "final" and reviewed[-1]["revision"] > final[-1]["revision"]
    finally:
        assert stop(worker) == 0
        assert stop(projector, signal.SIGTERM) in (0, -signal.SIGTERM, 143), log.read_text()[-3000:]

    latest = period / reviewed[-1]["folder"]
    whole = tmp_path / "whole"
    cluster.cli("report", "--db", str(db), "--out", str(whole), "--from", START, "--to", END)
    assert _figures(latest / "summary.json") == _figures(whole / "summary.json")
    assert (
        _figures(period / final[-1]["folder"] / "summary.json")["findings"]
        == _figures(whole / "summary.json")["findings"]
    )
    # the earlier revisions are all still there, each as it was written
    assert [r["revision"] for r in history(period)] == list(range(1, reviewed[-1]["revision"] + 1))

    # a review stored by a projector that writes no reports: schedule --once rewrites the stale report
    _publish_review(
        cluster,
        FindingDisposed(
            review_id="R2", finding_id=fid, user="rita", reviewed_at=datetime.now(UTC), cause="DEALER_ERROR"
        ),
    )
    cluster.cli("project", "--db", str(db), "--once", "--timeout", "120")
    out = cluster.cli("schedule", "--every", EVERY, "--db", str(db), "--out", str(reports), "--once").stdout
    assert "wrote 1 period report revisions" in out and LABEL in out, out
    last = history(period)[-1]
    assert last["revision"] == reviewed[-1]["revision"] + 1 and last["coverage"]["reviews"]["count"] == 2
    summary = json.loads((period / last["folder"] / "summary.json").read_text())
    assert summary["reviews"]["by_review_status"]["disposed"] == 1
