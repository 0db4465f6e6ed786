"""A parallel audit whose worker dies, at any moment of a write, ends at once with one error
naming the worker and its exit code: the writer never waits for the rest of a message a killed
worker left half written (each worker has a pipe of its own; its death closes it)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dealtrail.ingest.audit import AuditSummary, AuditWorkerError, ScanOptions, _parallel, audit_file
from projections.store.store import Store


class DiesMidMessage(ScanOptions):
    """A worker's scan that starts handing over a 256 MB message and is killed (SIGKILL, by
    itself) 50 ms later, while it is being pickled or written: the writer has at most its first
    bytes, never the rest. (With 64 MB and 200 ms, a writer reading at once could take the whole
    message before the kill on a busy machine: seen once in a full run.)"""

    def scan(self, path: Path, shard: int, shards: int, stage_dir: Path, emit: Callable[..., None], resume: Any) -> Any:
        threading.Thread(target=emit, args=(b"x" * (256 * 1024 * 1024),), daemon=True).start()
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)


def _ends(run: Callable[[], object], within: float) -> list[object]:
    outcome: list[object] = []

    def target() -> None:
        try:
            outcome.append(run())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=within)
    assert not thread.is_alive(), f"the audit still waits {within:.0f} s after its worker died"
    return outcome


def test_a_worker_killed_in_the_middle_of_a_message_ends_the_audit_with_its_exit_code(tmp_path: Path) -> None:
    lines = tmp_path / "any.jsonl"
    lines.write_text("{}\n")
    stage = tmp_path / "stage"
    stage.mkdir()
    written: list[object] = []
    outcome = _ends(
        lambda: _parallel(lines, 2, stage, written.append, lambda t, s: None, DiesMidMessage(batch_lines=10)),
        within=30,
    )
    assert len(outcome) == 1 and isinstance(outcome[0], AuditWorkerError), outcome
    assert "died (exit code -9)" in str(outcome[0])
    assert written == [], "half a message is never handed to the store"


@pytest.fixture
def load() -> Iterator[None]:
    """Two busy processes beside the audit (the machine's cores shared, as under CI)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for b in burners:
            b.kill()
            b.wait()


def _kill_one_worker_of_an_audit(
    long_file: Path, db: Path, after: float, rng: random.Random
) -> tuple[bool, list[object]]:
    """Audit ``long_file`` with two workers, SIGKILL one of them ``after`` seconds after they
    started; (whether the signal found it alive, what the audit ended with)."""
    import multiprocessing as mp

    outcome: list[object] = []

    def target() -> None:
        try:
            with Store(db) as store:
                outcome.append(audit_file(long_file, store, workers=2, batch_lines=500))
        except BaseException as exc:
            outcome.append(exc)

    before = {p.pid for p in mp.active_children()}
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    victims: list[int] = []
    while not victims and time.monotonic() < deadline:
        victims = [p.pid for p in mp.active_children() if p.pid not in before and p.pid is not None]
        time.sleep(0.01)
    assert victims, "no audit worker started"
    time.sleep(after)  # anywhere in the worker's life: reading, staging, handing a batch over
    killed = True
    try:
        os.kill(rng.choice(victims), signal.SIGKILL)
    except ProcessLookupError:
        killed = False  # it had finished its share already
    thread.join(timeout=75)
    assert not thread.is_alive(), f"the audit hangs after its worker was killed {after:.2f} s in"
    return killed, outcome


def test_audit_workers_killed_at_random_points_under_load_end_the_audit_with_one_error(
    long_file: Path, tmp_path: Path, load: None
) -> None:
    rng = random.Random(46)
    died = 0
    for attempt in range(4):
        after = rng.uniform(0.05, 2.5)
        killed, outcome = _kill_one_worker_of_an_audit(long_file, tmp_path / f"killed-{attempt}.duckdb", after, rng)
        assert len(outcome) == 1, outcome
        if isinstance(outcome[0], AuditSummary):
            continue  # the worker had handed over its last batch before the signal came
        assert killed and isinstance(outcome[0], AuditWorkerError), (after, outcome)
        assert "died (exit code -9)" in str(outcome[0]) and "\n" not in str(outcome[0]), outcome
        died += 1
    assert died >= 2, "the signals should find most workers at work"
