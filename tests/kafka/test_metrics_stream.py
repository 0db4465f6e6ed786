"""Seen by the platform team's own tools (issue 49, items 1, 2 and 5): a real Prometheus (Debian's
package) scrapes a worker, a projector and the console during a short stream on the real broker;
``promtool check metrics`` passes on each endpoint; Prometheus's answers for consumer lag and
committed offset per partition equal what ``dealtrail status`` reads from the broker, and its
findings by rule equal the store's.

Needs the broker and Prometheus; under ``DEALTRAIL_REQUIRE_PROMETHEUS=1`` (.ci/run) a missing
Prometheus fails the test.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.kafka.conftest import Cluster, stop
from tests.prom import Prometheus, check_metrics

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path_factory.mktemp("prometheus"))
    yield server
    server.stop()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        body: bytes = resp.read()
    return body


def _eventually(check: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, AssertionError) as exc:
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"{what} within {seconds:.0f} s; last: {last!r}")


def _status(cluster: Cluster) -> dict[str, Any]:
    out = cluster.cli("status", "--json", timeout=60).stdout
    data: dict[str, Any] = json.loads(out)
    return data


def _offsets(status: dict[str, Any]) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(group, topic, partition) -> (committed, lag) of the partitions the group committed."""
    return {
        (g["group"], p["topic"], str(p["partition"])): (p["committed"], p["lag"])
        for g in status["groups"]
        for p in g["partitions"]
        if p["committed"] is not None
    }


def _prometheus_offsets(prometheus: Prometheus) -> dict[tuple[str, str, str], tuple[int, int]]:
    def series(name: str) -> dict[tuple[str, str, str], int]:
        return {
            (r["metric"]["group"], r["metric"]["topic"], r["metric"]["partition"]): int(float(r["value"][1]))
            for r in prometheus.query(name)
        }

    committed, lag = series("dealtrail_consumer_group_committed_offset"), series("dealtrail_consumer_group_lag")
    return {k: (v, lag[k]) for k, v in committed.items() if k in lag}


def test_prometheus_scrapes_worker_projector_and_console_and_agrees_with_status_and_the_store(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path, prometheus: Prometheus
) -> None:
    began = time.monotonic()
    events, _ = shift
    db = tmp_path / "stream.duckdb"
    worker_port, projector_port, console_port, console_metrics = _port(), _port(), _port(), _port()
    cluster.cli("publish", str(events))
    worker = cluster.start_worker(tmp_path / "worker.log", DEALTRAIL_METRICS__PORT=str(worker_port))
    with (tmp_path / "projector.log").open("ab") as fh:
        projector = subprocess.Popen(
            [sys.executable, "-m", "dealtrail.cli", "project", "--db", str(db)],
            env={**cluster.env, "DEALTRAIL_METRICS__PORT": str(projector_port)},
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    console: subprocess.Popen[bytes] | None = None
    try:
        prometheus.set_targets("dealtrail-worker", [f"127.0.0.1:{worker_port}"])
        prometheus.set_targets("dealtrail-projector", [f"127.0.0.1:{projector_port}"])
        cluster.wait_consumed()

        def caught_up() -> dict[str, Any] | None:
            status = _status(cluster)
            groups = {g["group"]: g for g in status["groups"]}
            topics = cluster.settings().topics
            worker_group, projector_group = groups[topics.app_id], groups[topics.projector_group]
            done = (
                worker_group["lag"] == 0
                and projector_group["lag"] == 0
                and all(p["committed"] is not None for p in worker_group["partitions"])
                and len(worker_group["members"]) == 1
            )
            return status if done else None

        status = _eventually(caught_up, 180, "the worker and the projector caught up")
        text = cluster.cli("status", timeout=60).stdout  # the table a person reads
        topics = cluster.settings().topics
        assert f"workers: consumer group {topics.app_id} (Stable, 1 member), lag 0 records" in text
        assert f"projector: consumer group {topics.projector_group}" in text and topics.findings.name in text
        # promtool check metrics: Prometheus's conventions on both endpoints
        for port in (worker_port, projector_port):
            verdict = check_metrics(_scrape(port))
            assert verdict.returncode == 0, verdict.stdout + verdict.stderr
        worker_text = _scrape(worker_port).decode()
        judged = re.search(r"^dealtrail_events_judged_total (\S+)$", worker_text, re.M)
        timed = re.search(r"^dealtrail_round_record_latency_seconds_count (\S+)$", worker_text, re.M)
        rounds = re.search(r"^dealtrail_rounds_total (\S+)$", worker_text, re.M)
        assert judged and timed and rounds and float(judged[1]) > 0
        assert 0 < float(timed[1]) <= float(rounds[1])  # rounds completed by a batch are timed
        assert re.search(r"^dealtrail_reorder_window_events 0\.0$", worker_text, re.M)  # all released
        assert "dealtrail_store_write_seconds_count" in _scrape(projector_port).decode()
        # Prometheus's answer per partition equals what dealtrail status reads from the broker
        expected = _offsets(status)
        assert {k[0] for k in expected} == {cluster.settings().topics.app_id, cluster.settings().topics.projector_group}
        _eventually(
            lambda: _prometheus_offsets(prometheus) == expected, 30, "Prometheus's lag per partition equal to status"
        )
        assert prometheus.rules_loaded() == 8
        assert stop(projector) == 0, (tmp_path / "projector.log").read_text()
        # findings by rule: what the worker counted equals what the store holds
        con = duckdb.connect(str(db), read_only=True)
        try:
            stored = dict(con.execute("SELECT rule_id, count(*) FROM findings GROUP BY rule_id").fetchall())
            stored_rounds = con.execute("SELECT count(*) FROM rounds").fetchone()
        finally:
            con.close()
        assert stored and stored_rounds
        assert float(rounds[1]) == stored_rounds[0]

        def findings_by_rule() -> bool:
            rows = prometheus.query('sum by (rule) (dealtrail_findings_total{job="dealtrail-worker"})')
            return {r["metric"]["rule"]: int(float(r["value"][1])) for r in rows} == stored

        _eventually(findings_by_rule, 30, "Prometheus's findings by rule equal to the store's")
        # the console over the store: its endpoint passes too, and Prometheus reads the store's size
        with (tmp_path / "console.log").open("ab") as fh:
            console = subprocess.Popen(
                [sys.executable, "-m", "dealtrail.cli", "serve", "--db", str(db), "--port", str(console_port)],
                env={**cluster.env, "DEALTRAIL_METRICS__PORT": str(console_metrics)},
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        body = _eventually(lambda: _scrape(console_metrics), 60, "the console's metrics")
        verdict = check_metrics(body)
        assert verdict.returncode == 0, verdict.stdout + verdict.stderr
        prometheus.set_targets("dealtrail-console", [f"127.0.0.1:{console_metrics}"])
        size = db.stat().st_size

        def console_size() -> bool:
            rows = prometheus.query('dealtrail_store_size_bytes{job="dealtrail-console"}')
            return bool(rows) and int(float(rows[0]["value"][1])) >= size

        _eventually(console_size, 30, "Prometheus reading the console's store size")
    finally:
        for job in Prometheus.JOBS:
            prometheus.set_targets(job, [])
        if console is not None:
            stop(console)
        stop(projector)
        assert stop(worker) == 0, (tmp_path / "worker.log").read_text()
    print(f"metrics stream test: {time.monotonic() - began:.1f} s")  # the CI time it adds
