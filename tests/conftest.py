"""Shared fixtures: small simulated shifts written to files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from dealtrail.simulator.run import write_simulation

# Property tests check properties, not speed (that is the benchmarks'): no per-example deadline,
# which a busy CI machine (or a first example that imports a module) can overrun for nothing.
hypothesis_settings.register_profile("dealtrail", deadline=None)
hypothesis_settings.load_profile("dealtrail")


@pytest.fixture(scope="session")
def small_shift(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 6-table, 1.5-hour shift with errors injected in 15 % of rounds: (events, truth)."""
    folder = tmp_path_factory.mktemp("shift")
    events, truth = folder / "events.jsonl", folder / "truth.jsonl"
    write_simulation(events, tables=6, hours=1.5, seed=11, error_rate=0.15, duplicate_rate=0.002, truth_path=truth)
    return events, truth


@pytest.fixture(scope="session")
def audited_shift(small_shift: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small shift audited into a DuckDB store (read it; copy it before changing it)."""
    from dealtrail.ingest.audit import audit_file
    from projections.store.store import Store

    events, _ = small_shift
    db = tmp_path_factory.mktemp("audited") / "shift.duckdb"
    with Store(db) as store:
        audit_file(events, store)
    return db


@pytest.fixture(scope="session")
def long_file(small_shift: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small shift's lines eight times over: an audit of it runs long enough (seconds, two
    worker processes) to be killed or interrupted mid-way."""
    events, _ = small_shift
    path = tmp_path_factory.mktemp("long") / "long.jsonl"
    data = events.read_bytes()
    with path.open("wb") as fh:
        for _ in range(8):
            fh.write(data)
    return path
