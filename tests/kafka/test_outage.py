"""Broker outages ridden out, on the real broker (the one .ci/run started, stopped and started
again through ops/kafka/broker with the same environment, and left up whatever happens).

A simulated shift is published at 500 events/s while the broker is stopped three times for
30 s; the publisher, two workers and the projector run as real subprocesses. No process exits,
each says once that Kafka is away and once that it is back, nothing is lost, no finding is
doubled, and the projected findings equal the embedded audit of the same file. A stop
(SIGTERM) during an outage ends the projector and a worker within compose's 10 s grace.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

import pytest

from tests.kafka.conftest import (
    Cluster,
    _broker,
    count_rows,
    describe_findings,
    findings_of,
    stop,
)

pytestmark = [pytest.mark.kafka, pytest.mark.restarts_broker]

RATE = 500
DOWN_FOR = 30.0
OUTAGES = 3
UP_FOR = 10.0  # between two outages: long enough for every process to see the broker back
GRACE = 10.0  # compose's default stop grace (seconds)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(cluster: Cluster, log: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    """``dealtrail ARGS`` in the background, in the cluster's namespace with ``env`` added."""
    with log.open("ab") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "dealtrail.cli", *args],
            env={**cluster.env, **env},
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _readyz(port: int) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _down() -> None:
    done = _broker("down", timeout=120)
    assert done.returncode == 0, done.stderr


def _up() -> None:
    done = _broker("up")
    assert done.returncode == 0, f"the broker did not come back:\n{done.stdout}\n{done.stderr}"


def _ensure_up() -> None:
    """Leave the shared broker up for the tests after this one, whatever happened."""
    if _broker("status", timeout=60).returncode != 0:
        _up()


def _wait(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def _lines(log: Path, text: str) -> int:
    return sum(text in line for line in log.read_text(errors="replace").splitlines())


class Feeder:
    """Writes the lines of a file to the publisher's stdin at :data:`RATE` lines a second, until
    :meth:`finish` (or the file's end); what it wrote is also kept in ``fed`` (the file the
    embedded audit then reads: the same events, in the same order)."""

    def __init__(self, source: Path, sink: IO[bytes], fed: Path) -> None:
        self.lines = [line for line in source.read_bytes().splitlines(keepends=True) if line.strip()]
        self.sink, self.fed = sink, fed
        self.sent = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            with self.fed.open("wb") as out:
                for n, line in enumerate(self.lines):
                    if self.done.is_set():
                        break
                    ahead = started + n / RATE - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
                    self.sink.write(line)
                    out.write(line)
                    self.sent += 1
        except BrokenPipeError:  # the publisher ended early: the test says so
            pass
        finally:
            self.done.set()
            with contextlib.suppress(BrokenPipeError):
                self.sink.close()

    @property
    def feeding(self) -> bool:
        return not self.done.is_set()

    def finish(self) -> None:
        self.done.set()
        self.thread.join(timeout=30)


def test_three_30_s_outages_during_a_publish_lose_nothing_double_nothing_and_stop_no_process(
    cluster: Cluster, tmp_path: Path
) -> None:
    shift, events, audited = tmp_path / "shift.jsonl", tmp_path / "events.jsonl", tmp_path / "audit.duckdb"
    # 24 tables for 1.3 hours (~115,000 events): more than the publish needs at 500/s however
    # slowly the broker restarts; the publish stops a few seconds after the third outage, and the
    # lines sent (events.jsonl) are what the embedded audit reads
    cluster.cli("simulate", "--out", str(shift), "--tables", "24", "--hours", "1.3", "--seed", "19")
    db, port = tmp_path / "stream.duckdb", _free_port()
    logs = {name: tmp_path / f"{name}.log" for name in ("w1", "w2", "projector", "publish", "audit")}
    workers = [
        _start(cluster, logs[w], "worker", DEALTRAIL_WORKER__ALIVE_FILE=str(tmp_path / f"{w}.alive"))
        for w in ("w1", "w2")
    ]
    projector = _start(cluster, logs["projector"], "project", "--db", str(db), DEALTRAIL_HEALTH__PORT=str(port))
    procs = {"w1": workers[0], "w2": workers[1], "projector": projector}
    publisher: subprocess.Popen[bytes] | None = None
    auditor: subprocess.Popen[bytes] | None = None
    feeder: Feeder | None = None
    started = time.monotonic()

    def note(what: str) -> None:
        print(f"{time.monotonic() - started:6.1f} s  {what}")

    try:
        _wait(lambda: cluster.members() == 2, 90, "two workers holding partitions")
        _wait(lambda: _readyz(port)[0] == 200, 90, "the projector ready")
        with logs["publish"].open("ab") as fh:
            publisher = subprocess.Popen(
                [sys.executable, "-m", "dealtrail.cli", "publish", "--rate", str(RATE), "/dev/stdin"],
                env=cluster.env,
                stdin=subprocess.PIPE,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        assert publisher.stdin is not None
        feeder = Feeder(shift, publisher.stdin, events)
        feeder.start()
        note("publishing")
        for n in range(OUTAGES):
            time.sleep(UP_FOR)
            assert feeder.feeding and publisher.poll() is None, f"outage {n + 1} should come during the publish"
            _down()
            note(f"broker down ({n + 1}), {feeder.sent:,} lines sent")
            time.sleep(DOWN_FOR / 2)
            status, body = _readyz(port)
            assert (status, body["kafka"]) == (503, "disconnected"), body
            for w in ("w1", "w2"):
                assert time.time() - (tmp_path / f"{w}.alive").stat().st_mtime < 10, f"{w}: alive file stale"
            time.sleep(DOWN_FOR / 2)
            _up()
            note(f"broker up ({n + 1})")
            for name, proc in procs.items():
                assert proc.poll() is None, f"{name} exited:\n{logs[name].read_text()[-3000:]}"
        time.sleep(UP_FOR)
        assert feeder.feeding, "the publish should last until after the third outage"
        feeder.finish()
        note(f"{feeder.sent:,} lines sent")
        # the embedded audit of the same lines, while the stream catches up
        auditor = _start(cluster, logs["audit"], "audit", str(events), "--db", str(audited))
        assert publisher.wait(timeout=300) == 0, logs["publish"].read_text()
        note("published")
        cluster.wait_consumed(timeout=180)
        _wait(lambda: _lag(port) == 0, 180, "the projector caught up")
        note("projected")
        for name, proc in procs.items():
            assert proc.poll() is None, f"{name} exited:\n{logs[name].read_text()[-3000:]}"
        assert _readyz(port)[0] == 200
        assert auditor.wait(timeout=300) == 0, logs["audit"].read_text()
    finally:
        if feeder is not None:
            feeder.finish()
        for proc in (publisher, auditor):
            if proc is not None:
                stop(proc)
        note("stopping")
        codes = {name: stop(proc, timeout=30) for name, proc in procs.items()}
        _ensure_up()
    assert codes == {"w1": 0, "w2": 0, "projector": 0}, {n: logs[n].read_text()[-2000:] for n in procs}
    stream, expected = findings_of(db), findings_of(audited)
    assert expected, "the shift should raise findings"
    if stream != expected:
        pytest.fail(
            f"missing {describe_findings(audited, expected - stream)}\nextra {describe_findings(db, stream - expected)}"
        )
    assert count_rows(db, "events") == count_rows(audited, "events") == feeder.sent
    assert count_rows(db, "findings") == len(stream), "a finding revision stored twice"
    assert count_rows(db, "rounds") == count_rows(audited, "rounds")
    assert count_rows(db, "dead_letters") == count_rows(audited, "dead_letters") == 0
    # what the operator sees: a line when Kafka goes and one when it is back, not one per retry
    # (a process that did not see the broker between two outages counts them as one)
    for name in procs:
        text = logs[name].read_text(errors="replace")
        lost, back = _lines(logs[name], "lost the connection to Kafka"), _lines(logs[name], "is back after")
        assert 1 <= lost <= OUTAGES and lost == back, f"{name}: {lost} lost, {back} back\n{text[-3000:]}"
        retries = [line for line in text.splitlines() if "Connect call failed" in line or "ECONNREFUSED" in line]
        assert len(retries) <= lost, f"{name}: the client's per-retry lines are held back:\n{retries[:5]}"
        assert "Traceback" not in text, text[-3000:]


def _lag(port: int) -> int | None:
    """The projector's lag in messages, from its ``/readyz`` (None while unknown or disconnected)."""
    _, body = _readyz(port)
    lag = body.get("lag_messages")
    return lag if isinstance(lag, int) and body.get("kafka") == "connected" else None


def test_a_stop_during_an_outage_ends_the_projector_and_a_worker_within_the_grace(
    cluster: Cluster, tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    cluster.cli("simulate", "--out", str(events), "--tables", "3", "--hours", "0.2", "--seed", "5")
    db = tmp_path / "stream.duckdb"
    worker = _start(cluster, tmp_path / "w.log", "worker")
    projector = _start(cluster, tmp_path / "p.log", "project", "--db", str(db))
    try:
        cluster.cli("publish", str(events))
        cluster.wait_consumed(timeout=120)
        time.sleep(3)
        _down()
        time.sleep(8)  # both have noticed
        started = time.monotonic()
        for proc in (worker, projector):
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=60) for proc in (worker, projector)]
        took = time.monotonic() - started
    finally:
        stop(worker, signal.SIGKILL)
        stop(projector, signal.SIGKILL)
        _ensure_up()
    assert took < GRACE, f"stopping took {took:.1f} s"
    assert codes == [0, 0], ((tmp_path / "w.log").read_text()[-2000:], (tmp_path / "p.log").read_text()[-2000:])
    assert "stopped: projected" in (tmp_path / "p.log").read_text()
    assert count_rows(db, "events") > 0, "the store keeps what was projected"
