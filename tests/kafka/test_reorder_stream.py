"""One answer whatever the arrival order, through the stream (issue 19 item 6): the same
shuffled trail gives the same findings from ``audit``, publish -> worker -> projector, and
``reaudit``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dealtrail.audit import audit_file
from dealtrail.reaudit import reaudit
from projections.store import Store
from streams.engine.reorder import ReorderLimits
from tests.kafka.conftest import Cluster, count_rows, findings_of, project_all, stop
from tests.reorder_trails import chained, shuffled

pytestmark = pytest.mark.kafka

WINDOW = ReorderLimits(events=50, seconds=30)


def test_a_shuffled_trail_gives_the_same_findings_from_audit_stream_and_reaudit(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path
) -> None:
    events, _ = shift
    # chained in seq order (as a device that chains its events), then merged out of order:
    # swaps within the window and a few events moved far beyond it
    trail = shuffled(chained(events, tmp_path / "chained.jsonl"), tmp_path / "shuffled.jsonl", far=3, far_by=600)
    audited = tmp_path / "audit.duckdb"
    with Store(audited) as store:
        audit_file(trail, store, workers=1, reorder=WINDOW)
    expected = findings_of(audited)
    assert expected

    cluster.cli("publish", str(trail))
    log = tmp_path / "worker.log"
    worker = cluster.start_worker(log, DEALTRAIL_REORDER__EVENTS="50", DEALTRAIL_REORDER__SECONDS="30")
    try:
        cluster.wait_consumed(timeout=180)
        time.sleep(8)  # a window still holding events is released after reorder.idle (5 s)
    finally:
        assert stop(worker) == 0, log.read_text()
    streamed = tmp_path / "stream.duckdb"
    project_all(cluster, streamed)
    assert findings_of(streamed) == expected
    assert count_rows(streamed, "events") == count_rows(audited, "events")

    with Store(audited) as store:
        result = reaudit(store, workers=1, reorder=WINDOW)
    assert result.no_change, result.diff
