"""One clock decides, once, through the stream (issue 46 item 2): with the worker's or the
projector's host clock a day ahead, an hour or two hours behind (libfaketime on that process only; the
broker, the producer and the other process on real time), each event recorded near the skew
limit is in the store's events or its dead letters exactly once, the store equals the embedded
audit's (whose clock agrees with the broker's), and a process whose clock is more than the
limit off says so in one line (the projector in ``/readyz`` too)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from tests.kafka.conftest import Cluster, findings_of, stop
from tests.kafka.test_poison_stream import _group_done

pytestmark = pytest.mark.kafka

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

NEAR = {"IN-57M": (57, True), "IN-30M": (30, True), "OUT-63M": (63, False), "OUT-2H": (120, False)}
"""Copies recorded this many minutes after now, and whether they are within the skew (1 hour)."""


def _faked(offset: str) -> dict[str, str]:
    """The environment that runs a process (and its children: the worker's judge) with its clock
    moved by ``offset`` (libfaketime syntax, ``+1d``, ``-1h``). Monotonic time is moved too (it
    still runs at the real rate): with ``FAKETIME_DONT_FAKE_MONOTONIC=1`` libfaketime 0.9.10 makes
    Python's ``time.sleep`` fail with EINVAL (its absolute monotonic deadline is moved anyway)."""
    if not LIBFAKETIME.exists():
        reason = "libfaketime not found: apt-get install faketime"
        if os.environ.get("DEALTRAIL_REQUIRE_KAFKA") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": offset}


def _start(cluster: Cluster, log: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "dealtrail.cli", *args],
            env={**cluster.env, **env},
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _event_id(raw: str) -> str:
    """The event ID in a dead letter's raw record (the raw text itself if it is not an event)."""
    try:
        return str(json.loads(raw)["event_id"])
    except (ValueError, KeyError, TypeError):
        return raw[:120]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_libfaketime_moves_a_python_process_and_its_children_and_sleep_still_works() -> None:
    code = (
        "import datetime, subprocess, sys, time;"
        "start = time.monotonic(); time.sleep(0.2); slept = time.monotonic() - start;"
        "print(datetime.datetime.now(datetime.UTC).timestamp(), slept);"
        "print(subprocess.run([sys.executable, '-c', 'import time; print(time.time())'],"
        " capture_output=True, text=True).stdout)"
    )
    for offset, seconds in (("+1d", 86_400), ("-1h", -3_600)):
        before = time.time()
        env = {**os.environ, **_faked(offset)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        wall, slept, child = (float(x) for x in out.stdout.split())
        assert abs(wall - before - seconds) < 60 and abs(child - before - seconds) < 60, out.stdout
        assert 0.19 < slept < 5, out.stdout


@pytest.mark.parametrize(
    ("who", "offset"),
    [
        ("worker", "+1d"),
        ("worker", "-1h"),
        ("worker", "-2h"),
        ("projector", "+1d"),
        ("projector", "-1h"),
        ("projector", "-2h"),
    ],
    ids=[
        "worker-a-day-ahead",
        "worker-an-hour-behind",
        "worker-two-hours-behind",
        "projector-a-day-ahead",
        "projector-an-hour-behind",
        "projector-two-hours-behind",
    ],
)
def test_each_event_near_the_skew_limit_is_stored_or_dead_lettered_exactly_once_with_one_host_clock_off(
    cluster: Cluster, tmp_path: Path, who: str, offset: str
) -> None:
    import httpx
    from kafka import KafkaProducer

    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.run import write_simulation
    from projections.store.store import Store
    from streams.clock import FixedClock

    faked = _faked(offset)
    shift = tmp_path / "shift.jsonl"
    write_simulation(shift, tables=2, hours=0.1, seed=23, error_rate=0.2, duplicate_rate=0.0)
    lines = shift.read_bytes().splitlines()
    now = datetime.now(UTC)
    out = list(lines)
    for n, (event_id, (minutes, _)) in enumerate(NEAR.items()):
        original = lines[len(lines) // 3 + 7 * n]
        doc = json.loads(original)
        when = (now + timedelta(minutes=minutes)).isoformat()
        doc.update(event_id=event_id, occurred_at=when, recorded_at=when, prev_hash=None, hash=None)
        out.insert(out.index(original) + 1, json.dumps(doc).encode())  # after the event of its seq
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    alone = tmp_path / "alone.duckdb"
    with Store(alone) as store:  # the clocks agree: the audit's is the broker's
        audit_file(path, store, workers=1, limits=cluster.settings().plausibility, clock=FixedClock(now))

    db, port = tmp_path / "stream.duckdb", _free_port()
    logs = {name: tmp_path / f"{name}.log" for name in ("worker", "projector")}
    worker = _start(cluster, logs["worker"], ["worker"], faked if who == "worker" else {})
    projector = _start(
        cluster,
        logs["projector"],
        ["project", "--db", str(db)],
        {"DEALTRAIL_HEALTH__PORT": str(port), **(faked if who == "projector" else {})},
    )
    ready: dict[str, object] = {}
    try:
        s = cluster.settings()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        for line in out:
            producer.send(s.topics.events.name, key=str(json.loads(line)["table_id"]).encode(), value=line)
        producer.flush()
        producer.close()
        cluster.wait_consumed(timeout=120)
        topics = [s.topics.events.name, s.topics.findings.name, s.topics.rounds.name, s.topics.dead_letter.name]
        deadline = time.monotonic() + 60
        while not _group_done(cluster, s.topics.projector_group, topics):
            assert time.monotonic() < deadline, logs["projector"].read_text()
            time.sleep(1)
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json()
    finally:
        stop(projector, signal.SIGINT)
        assert stop(worker) == 0, logs["worker"].read_text()

    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = [r[0] for r in con.execute("SELECT event_id FROM events").fetchall()]
        refused = [(str(a), _event_id(b)) for a, b in con.execute("SELECT reason, raw FROM dead_letters").fetchall()]
    finally:
        con.close()
    a = duckdb.connect(str(alone), read_only=True)
    try:
        audited = sorted(r[0] for r in a.execute("SELECT event_id FROM events").fetchall())
        rows = a.execute("SELECT reason, position FROM dead_letters").fetchall()  # the audit's: "line N"
        audit_refused = sorted((str(r), _event_id(out[int(p.split()[1]) - 1].decode())) for r, p in rows)
    finally:
        a.close()
    refused_ids = [e for _, e in refused]
    for event_id, (_, within) in NEAR.items():
        assert (stored.count(event_id), refused_ids.count(event_id)) == ((1, 0) if within else (0, 1)), event_id
    assert len(stored) + len(refused) == len(out)  # each record once: an event or a dead letter
    assert sorted(stored) == audited and sorted(refused) == audit_refused  # stream = audit
    assert {r for r, _ in refused} == {"recorded_in_future"}
    assert findings_of(db) == findings_of(alone)
    said = logs[who].read_text()
    clock = ready["host_clock"]
    if offset == "-1h":  # an hour behind is at the limit, not past it (a record is read after it is appended)
        assert "this host's clock is" not in said, said
        assert clock is None or (isinstance(clock, dict) and clock["off"] is False), ready
    else:  # more than the skew limit off: one line, and the projector's /readyz
        way = "1 day, 0:00:" if offset == "+1d" else "1:59:"  # less the time from append to read
        assert said.count(f"this host's clock is {way}") == 1, said
        assert ("ahead of" if offset == "+1d" else "behind") + " the broker's record timestamps" in said, said
        if who == "projector":
            assert isinstance(clock, dict) and clock["off"] is True, ready
    if who == "worker":  # the projector's clock is right
        assert clock is None or (isinstance(clock, dict) and clock["off"] is False), ready
