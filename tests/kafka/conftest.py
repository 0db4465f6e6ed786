"""Fixtures for the tests against the real Kafka broker (ops/kafka/broker, KRaft, loopback).

The session fixture uses a running broker or starts one from the Maven Central jars. Without
Java or Maven the tests skip and say what to install; under ``DEALTRAIL_REQUIRE_KAFKA=1`` (CI)
a broker that cannot start fails the run instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
BROKER = ROOT / "ops" / "kafka" / "broker"


def _broker(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEALTRAIL_PYTHON": sys.executable}
    return subprocess.run([str(BROKER), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _unavailable(reason: str) -> None:
    if os.environ.get("DEALTRAIL_REQUIRE_KAFKA") == "1":
        pytest.fail(f"Kafka broker required (DEALTRAIL_REQUIRE_KAFKA=1) but unavailable: {reason}")
    pytest.skip(f"Kafka broker unavailable: {reason}")


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap servers of a running broker (started here if needed, stopped if started here)."""
    port = os.environ.get("DEALTRAIL_KAFKA_PORT", "9092")
    if _broker("status", timeout=60).returncode == 0:
        yield f"127.0.0.1:{port}"
        return
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        _unavailable(
            f"{' and '.join(missing)} not found: install OpenJDK 17 and Maven"
            " (apt-get install openjdk-17-jdk-headless maven)"
        )
    up = _broker("up")
    if up.returncode != 0:
        _unavailable(f"ops/kafka/broker up failed:\n{up.stdout}\n{up.stderr}")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        _broker("down", timeout=120)


@dataclass
class Cluster:
    """One test's namespace on the shared broker: its own topics, worker group and projector group."""

    bootstrap: str
    namespace: str
    partitions: int

    @property
    def env(self) -> dict[str, str]:
        """Environment for dealtrail subprocesses of this namespace."""
        return {
            **os.environ,
            "DEALTRAIL_KAFKA_BOOTSTRAP": self.bootstrap,
            "DEALTRAIL_NAMESPACE": self.namespace,
            "DEALTRAIL_PARTITIONS": str(self.partitions),
            "DEALTRAIL_WORKER__LOGLEVEL": "warning",
        }

    def settings(self):  # type: ignore[no-untyped-def]
        from dealtrail.settings import Settings

        # the bootstrap through the one resolution path (a kafka_bootstrap= keyword is not read:
        # that field is filled from DEALTRAIL_KAFKA_BOOTSTRAP only)
        return Settings(namespace=self.namespace, partitions=self.partitions).with_bootstrap(self.bootstrap)

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``dealtrail ARGS`` in this namespace and return the finished process (checked)."""
        proc = subprocess.run(
            [sys.executable, "-m", "dealtrail.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert proc.returncode == 0, f"dealtrail {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
        return proc

    def start_worker(self, log: Path, **env: str) -> subprocess.Popen[bytes]:
        """Start ``dealtrail worker`` in the background (output to ``log``; ``env`` added)."""
        with log.open("ab") as fh:  # the child keeps its own descriptor
            return subprocess.Popen(
                [sys.executable, "-m", "dealtrail.cli", "worker"],
                env={**self.env, **env},
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start(self, log: Path, *args: str) -> subprocess.Popen[bytes]:
        """Start ``dealtrail ARGS`` in the background (output to ``log``)."""
        with log.open("ab") as fh:
            return subprocess.Popen(
                [sys.executable, "-m", "dealtrail.cli", *args],
                env=self.env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def consumed(self) -> tuple[int, int]:
        """(events the worker group is done with, end offsets), summed over the events topic.

        Per partition, "done" is the group's committed offset or, when Faust has not committed
        yet (it commits every few seconds, and not at all for a partition it is about to lose
        in a rebalance), one past the highest offset the worker's table states say they applied
        (read from its changelog).
        """
        import json

        from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

        s = self.settings()
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="dealtrail-test")
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, consumer_timeout_ms=1500)
        try:
            committed = admin.list_group_offsets(s.topics.app_id).get(s.topics.app_id, {})
            tps = [TopicPartition(s.topics.events.name, p) for p in range(self.partitions)]
            ends = consumer.end_offsets(tps)
            applied: dict[int, int] = {}
            changelog = f"{s.topics.app_id}-table-states-changelog"
            cparts = [TopicPartition(changelog, p) for p in sorted(consumer.partitions_for_topic(changelog) or ())]
            if cparts:
                consumer.assign(cparts)
                consumer.seek_to_beginning()
                for rec in consumer:
                    if rec.value:
                        applied[rec.partition] = max(applied.get(rec.partition, 0), json.loads(rec.value)["offset"] + 1)
            done = 0
            for tp in tps:
                offset = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else 0
                done += min(ends[tp], max(offset, applied.get(tp.partition, 0)))
            return done, sum(ends.values())
        finally:
            consumer.close()
            admin.close()

    def members(self) -> int:
        """Members of the worker group that hold at least one partition of the events topic."""
        import logging

        from kafka import KafkaAdminClient

        topic = self.settings().topics.events.name
        group_id = self.settings().topics.app_id
        logging.getLogger("kafka.admin").setLevel(logging.ERROR)  # Faust's user data does not decode
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="dealtrail-test")
        try:
            group = admin.describe_groups([group_id])[group_id]
        finally:
            admin.close()
        holding = 0
        for m in group.get("members", []):
            assignment = m.get("member_assignment")
            parts = assignment.get("assigned_partitions", []) if isinstance(assignment, dict) else []
            holding += any(p.get("topic") == topic and p.get("partitions") for p in parts)
        return holding

    def wait_consumed(self, timeout: float = 180, at_least: float = 1.0) -> None:
        """Wait until the worker group committed ``at_least`` (a share) of the events topic."""
        deadline = time.monotonic() + timeout
        done = end = 0
        while time.monotonic() < deadline:
            done, end = self.consumed()
            if end and done >= end * at_least:
                return
            time.sleep(0.5)
        raise AssertionError(f"worker group consumed {done} of {end} events in {timeout:.0f} s")

    def delete_topics(self) -> None:
        """Remove every topic of this namespace (the worker's changelog included)."""
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="dealtrail-test")
        try:
            mine = [t for t in admin.list_topics() if t.startswith(self.namespace)]
            if mine:
                admin.delete_topics(mine)
        finally:
            admin.close()


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 60) -> int:
    """Stop a worker (SIGTERM: clean shutdown; SIGKILL: crash) and return its exit code."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return proc.returncode


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that restart the shared broker after all the others."""
    items.sort(key=lambda item: item.get_closest_marker("restarts_broker") is not None)


def restart_broker(down_for: float) -> None:
    """Stop the shared broker (SIGTERM), wait ``down_for`` seconds and start it again."""
    down = _broker("down", timeout=120)
    assert down.returncode == 0, down.stderr
    time.sleep(down_for)
    up = _broker("up")
    assert up.returncode == 0, f"the broker did not come back:\n{up.stdout}\n{up.stderr}"


@pytest.fixture
def cluster(kafka_bootstrap: str) -> Iterator[Cluster]:
    """A fresh namespace (4 partitions) on the broker; its topics are deleted afterwards."""
    c = Cluster(kafka_bootstrap, f"t{uuid.uuid4().hex[:10]}", 4)
    c.cli("topics", "create", timeout=120)
    try:
        yield c
    finally:
        c.delete_topics()


@pytest.fixture(scope="session")
def shift(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A simulated shift (6 tables, all three games, errors and redeliveries) and its audit."""
    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.run import write_simulation
    from projections.store.store import Store

    folder = tmp_path_factory.mktemp("stream")
    events = folder / "events.jsonl"
    write_simulation(events, tables=6, hours=0.75, seed=21, error_rate=0.25, duplicate_rate=0.003)
    replay = folder / "replay.duckdb"
    with Store(replay) as store:
        audit_file(events, store, workers=1)
    return events, replay


def findings_of(db: Path) -> set[tuple[str, int, str]]:
    """``(finding_id, revision, status)`` of every finding revision in a DuckDB store."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            (a, int(b), c) for a, b, c in con.execute("SELECT finding_id, revision, status FROM findings").fetchall()
        }
    finally:
        con.close()


def describe_findings(db: Path, keys: set[tuple[str, int, str]]) -> list[tuple[object, ...]]:
    """The rule, table, round, status and message of the findings ``keys`` (the first ten)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [
            tuple(row)
            for finding_id, revision, _ in sorted(keys)[:10]
            for row in con.execute(
                "SELECT rule_id, table_id, round_id, status, message FROM findings"
                " WHERE finding_id = ? AND revision = ?",
                [finding_id, revision],
            ).fetchall()
        ]
    finally:
        con.close()


def count_rows(db: Path, table: str) -> int:
    """Rows of ``table`` in a DuckDB store (opened read-only)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        con.close()


def consume_all(cluster: Cluster, log: Path, timeout: float = 180) -> None:
    """Run one worker until the group has consumed the events topic, then stop it cleanly."""
    worker = cluster.start_worker(log)
    try:
        cluster.wait_consumed(timeout=timeout)
    finally:
        assert stop(worker) == 0, log.read_text()


def stream_file(cluster: Cluster, events: Path, tmp_path: Path) -> None:
    """Publish a file and let one worker audit it to the end (then stop it cleanly)."""
    cluster.cli("publish", str(events))
    consume_all(cluster, tmp_path / "worker.log")


def project_all(cluster: Cluster, db: Path) -> None:
    """Run the projector of ``cluster`` into ``db`` until it has caught up with the topics."""
    cluster.cli("project", "--db", str(db), "--once", "--timeout", "120", timeout=180)


def assert_stream_equals_replay(db: Path, replay: Path) -> None:
    """The streamed store has the replay's findings (revisions and status), events and rounds."""
    stream, expected = findings_of(db), findings_of(replay)
    assert expected, "the shift should raise findings"
    if stream != expected:
        pytest.fail(
            f"missing {describe_findings(replay, expected - stream)}\nextra {describe_findings(db, stream - expected)}"
        )
    assert count_rows(db, "events") == count_rows(replay, "events")
    assert count_rows(db, "rounds") == count_rows(replay, "rounds")


def publish_lines(cluster: Cluster, lines: list[bytes], path: Path) -> None:
    """Write ``lines`` to ``path`` and publish them."""
    path.write_bytes(b"".join(lines))
    cluster.cli("publish", str(path))
