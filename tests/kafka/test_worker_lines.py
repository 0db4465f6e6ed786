"""Workers say what they do at the compose file's log level (warning): one line at start, at
each assignment and revocation, and at stop; nothing per event."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.kafka.conftest import Cluster, stop

pytestmark = pytest.mark.kafka


def test_a_worker_says_its_start_assignments_revocations_and_stop_and_nothing_per_event(
    cluster: Cluster, tmp_path: Path
) -> None:
    from dealtrail.simulator.run import write_simulation

    events = tmp_path / "two.jsonl"
    write_simulation(events, tables=2, hours=0.1, seed=5, error_rate=0.0, duplicate_rate=0.0)
    sent = sum(1 for line in events.read_bytes().splitlines() if line.strip())
    cluster.cli("publish", str(events))
    s = cluster.settings()
    topic = s.topics.events.name
    a_log, b_log = tmp_path / "a.log", tmp_path / "b.log"
    a = cluster.start_worker(a_log)  # DEALTRAIL_WORKER__LOGLEVEL=warning, as in compose
    b = None
    try:
        cluster.wait_consumed(timeout=120)
        b = cluster.start_worker(b_log)  # a rebalance: a gives up partitions to b
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and cluster.members() < 2:
            time.sleep(1)
        assert cluster.members() == 2, a_log.read_text()
    finally:
        if b is not None:
            assert stop(b) == 0, b_log.read_text()
        assert stop(a) == 0, a_log.read_text()
    said = a_log.read_text()
    assert re.search(
        rf"worker starting: group {re.escape(s.topics.app_id)}, reading {re.escape(topic)}, writing .*"
        rf"Kafka at {re.escape(cluster.bootstrap)}; compression zstd",
        said,
    ), said
    assert f"assigned {topic}[0, 1, 2, 3]" in said, said
    assert f"revoked {topic}[0, 1, 2, 3]" in said, said
    assert len(re.findall(rf"assigned {re.escape(topic)}\[", said)) >= 2, said
    applied = re.search(r"worker stopped: (\d+) events applied, (\d+) findings sent, (\d+) dead letters", said)
    assert applied and int(applied.group(1)) == sent, said
    assert "worker starting" in b_log.read_text() and "worker stopped" in b_log.read_text()
    # nothing per event: a handful of lines for a few hundred events
    assert len(said.splitlines()) < 20, said
