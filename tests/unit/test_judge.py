"""The worker's judge (streams.judge): the same findings as the engine folded over the trail,
table entries written byte for byte as before, a stale table value never undoes a newer
state, and its process called in order over a socket from an event loop."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from dealtrail.settings import Settings
from dealtrail.simulator.run import write_simulation
from schemas.codec import decode
from streams.clock import FixedClock
from streams.engine import TableState, apply
from streams.judge import (
    _STATE,
    FINDING,
    FORGET,
    ROUND,
    STORED,
    Judge,
    JudgeFailed,
    JudgeProcess,
    Outcome,
    Stored,
    stored_json,
)

LATER = FixedClock(datetime(2100, 1, 1, tzinfo=UTC))
"""A clock after every simulated event (none is refused as recorded in the future)."""


def _trail(tmp_path: Path, tables: int = 2) -> list[bytes]:
    path = tmp_path / "events.jsonl"
    write_simulation(path, tables=tables, hours=0.5, seed=11, error_rate=0.05)
    return path.read_bytes().splitlines()


def _judge(tmp_path: Path) -> Judge:
    return Judge(Settings(namespace="nsjudge"), LATER, tmp_path)


def _records(lines: list[bytes], first: int = 0) -> list[tuple[int, int, bytes | None, bytes, int | None]]:
    """The lines as messages of partition 0 from offset ``first``, keyed by their tables (with no
    record timestamp: the judge's clock decides)."""
    return [(0, first + i, decode(line).table_id.encode(), line, None) for i, line in enumerate(lines)]


def _call(judge: Judge, number: int, carried: int, method: str, *args: object) -> Outcome:
    judge.begin(number, carried)
    out: Outcome = getattr(judge, method)(*args)
    return out


def test_the_judge_sends_the_findings_of_the_engine_folded_over_each_table_in_seq_order(tmp_path: Path) -> None:
    lines = _trail(tmp_path)
    expected: list[str] = []
    states: dict[str, TableState | None] = {}
    for line in lines:
        event = decode(line)
        states[event.table_id], found = apply(states.get(event.table_id), event, line)
        expected += [f.model_dump_json() for f in found]
    assert expected, "the simulated trail has findings"
    judge = _judge(tmp_path)
    sent: list[str] = []
    rounds = 0
    tables = {line_table for line_table in (decode(line).table_id.encode() for line in lines)}
    for n, start in enumerate(range(0, len(lines), 97)):  # batches of 97 messages
        handed = {key: None for key in tables} if n == 0 else {}
        out = _call(judge, n, n - 1, "batch", _records(lines[start : start + 97], start), handed, n % 3 == 0)
        sent += [value.decode() for kind, _, value in out.actions if kind == FINDING]
        rounds += sum(kind == ROUND for kind, _, _ in out.actions)
        assert not any(kind == FORGET for kind, _, _ in out.actions)  # nothing loaded from the table
    assert sorted(sent) == sorted(expected)
    assert rounds > 0


def test_a_written_entry_is_what_the_worker_wrote_before_the_judge_moved_to_its_own_process(tmp_path: Path) -> None:
    lines = _trail(tmp_path, tables=1)
    judge = _judge(tmp_path)
    key = decode(lines[0]).table_id.encode()
    out = _call(judge, 0, -1, "batch", _records(lines[:40]), {key: None}, True)
    ((written, partition, offset, state_json, unfit, held),) = out.writes
    assert (written, partition, offset, unfit, held) == (key, 0, 39, False, ())
    assert out.wrote and out.loaded == [key]
    state: TableState | None = None
    for line in lines[:40]:
        state, _ = apply(state, decode(line), line)
    assert state is not None
    finding = b'{"a": "\\u00e9 \\"quoted\\""}'
    entry = Stored(39, state, (finding,), (b"{}",), 0, False, ())
    assert stored_json(39, state_json, (finding,), (b"{}",), 0, False, ()) == STORED.dump_json(entry)


@given(
    offset=st.integers(0, 2**62),
    findings=st.lists(st.text(max_size=30).map(lambda t: json.dumps({"t": t}).encode()), max_size=3),
    partition=st.none() | st.integers(0, 999),
    unfit=st.booleans(),
    held=st.lists(
        st.tuples(st.integers(0, 99), st.integers(0, 2**40), st.text(max_size=20).map(str.encode)), max_size=3
    ),
)
def test_an_entry_made_from_its_parts_is_the_entry_pydantic_writes(
    offset: int, findings: list[bytes], partition: int | None, unfit: bool, held: list[tuple[int, int, bytes]]
) -> None:
    state = _a_state()
    entry = Stored(offset, state, tuple(findings), tuple(reversed(findings)), partition, unfit, tuple(held))
    made = stored_json(
        offset, _STATE.dump_json(state), tuple(findings), tuple(reversed(findings)), partition, unfit, tuple(held)
    )
    assert made == STORED.dump_json(entry)
    assert STORED.validate_json(made) == entry


@functools.cache
def _a_state() -> TableState:
    """The state of a table after its first simulated event."""
    with tempfile.TemporaryDirectory() as folder:
        first = _trail(Path(folder), tables=1)[0]
    state, _ = apply(None, decode(first), first)
    return state


def test_a_table_value_older_than_the_judges_own_entry_is_not_loaded(tmp_path: Path) -> None:
    # call 0 takes the table's first events and hands its entry over to be written; call 1 is made
    # before the worker carried call 0 out, so the table value it hands over (none yet) is stale
    lines = _trail(tmp_path, tables=1)
    judge = _judge(tmp_path)
    key = decode(lines[0]).table_id.encode()
    first = _call(judge, 0, -1, "batch", _records(lines[:30]), {key: None}, True)
    assert first.writes
    second = _call(judge, 1, -1, "batch", _records(lines[30:60], 30), {key: None}, True)
    assert second.loaded == []
    ((_, _, offset, state_json, _, _),) = second.writes
    assert offset == 59
    assert json.loads(state_json)["last_seq"] == decode(lines[59]).seq  # not a table started again
    # once the worker has carried call 1 out, a value it hands over is the table's: loaded
    stored = stored_json(offset, state_json, (b'{"f": 1}',), (), 0, False, ())
    third = _call(judge, 2, 1, "batch", _records(lines[60:61], 60), {key: stored}, False)
    assert third.loaded == [key]
    assert third.actions[:2] == [(FORGET, key, b""), (FINDING, key, b'{"f": 1}')]  # its outbox sent again


def test_the_judge_process_answers_in_order_and_a_dead_one_fails_the_calls_waiting(tmp_path: Path) -> None:
    lines = _trail(tmp_path, tables=1)
    key = decode(lines[0]).table_id.encode()
    judge = JudgeProcess(Settings(namespace="nsjudgep"), LATER, tmp_path)
    judge.start()
    pid = judge._proc.pid if judge._proc is not None else 0

    async def run() -> tuple[list[Outcome], BaseException | None]:
        futures = [
            judge.submit(
                "batch", n, n - 1, _records(lines[n * 50 : n * 50 + 50], n * 50), {key: None} if n == 0 else {}, True
            )
            for n in range(4)
        ]
        outs = [await f for f in futures]
        os.kill(pid, signal.SIGKILL)
        late = judge.submit("write", 4, 3)
        try:
            await asyncio.wait_for(late, 30)
        except JudgeFailed as exc:
            return outs, exc
        return outs, None

    try:
        outs, failed = asyncio.run(run())
    finally:
        judge.close()
    assert [o.writes[0][2] for o in outs] == [49, 99, 149, 199]  # in the order of the calls
    assert isinstance(failed, JudgeFailed) and "gone" in str(failed)


def test_the_judge_process_ends_when_the_worker_closes_its_end(tmp_path: Path) -> None:
    judge = JudgeProcess(Settings(namespace="nsjudgec"), LATER, tmp_path)
    judge.start()
    proc = judge._proc
    assert proc is not None and proc.poll() is None
    judge.close(timeout=10)
    assert proc.poll() == 0
