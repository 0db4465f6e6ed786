"""Shuffled trails for the reorder tests: a simulated trail with events swapped with their
table's next event (within the window) and a few moved far later (across it), seq unchanged,
as when two device feeds are merged."""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterable
from pathlib import Path

from schemas.base import Envelope
from schemas.chain import Chainer
from schemas.codec import decode, encode


def chained(src: Path, dst: Path) -> Path:
    """``src`` with every event stamped into its table's hash chain in file (seq) order, as a
    device that chains its own events writes it: a shuffle then keeps the chain of seq order."""
    chainer = Chainer()
    with dst.open("wb") as out:
        for line in src.read_bytes().splitlines():
            if line.strip():
                _, data = chainer.stamp_encoded(decode(line))
                out.write((data if data is not None else line) + b"\n")
    return dst


def shuffled(src: Path, dst: Path, seed: int = 1, swap: float = 0.1, far: int = 0, far_by: int = 0) -> Path:
    """Write ``src`` with about ``swap`` of each table's events swapped with the table's next
    one (never its first event), and ``far`` events moved ``far_by`` lines later."""
    lines = [line for line in src.read_bytes().splitlines() if line.strip()]
    rng = random.Random(seed)
    by_table: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        by_table.setdefault(json.loads(line)["table_id"], []).append(i)
    pos = list(range(len(lines)))
    for idx in by_table.values():
        k = 1
        while k < len(idx) - 1:
            if rng.random() < swap:
                a, b = idx[k], idx[k + 1]
                pos[a], pos[b] = pos[b], pos[a]
                k += 2
            else:
                k += 1
    out = [lines[p] for p in pos]
    for _ in range(far):
        i = rng.randrange(len(out) // 10, len(out) - far_by - 10)
        out.insert(i + far_by, out.pop(i))
    dst.write_bytes(b"\n".join(out) + b"\n")
    return dst


def interleaved_with_a_floor(trails: Iterable[list[Envelope]], folder: Path) -> tuple[Path, Path]:
    """Rulebook 10.4.3's file: the trails' events merged by time and spread among a simulated floor's
    (3 tables, half an hour), then the same file shuffled within the reorder window. Returns
    (in order, swapped)."""
    from dealtrail.simulator.run import write_simulation  # the tests' own floor, not every caller's

    floor = folder / "floor.jsonl"
    write_simulation(floor, tables=3, hours=0.5, seed=8, error_rate=0.2, duplicate_rate=0.0)
    ours = [[(e.occurred_at, e.table_id, e.seq, encode(e)) for e in events] for events in trails]
    merged = [line for *_, line in heapq.merge(*ours)]
    floor_lines = [line for line in floor.read_bytes().splitlines() if line.strip()]
    mixed: list[bytes] = []
    step = max(1, len(floor_lines) // max(1, len(merged)))
    for i, line in enumerate(merged):  # the trails' events spread among the floor's
        mixed.extend(floor_lines[i * step : (i + 1) * step])
        mixed.append(line)
    mixed.extend(floor_lines[len(merged) * step :])
    in_order = folder / "interleaved.jsonl"
    in_order.write_bytes(b"\n".join(mixed) + b"\n")
    swapped = shuffled(in_order, folder / "swapped.jsonl", seed=3, swap=0.3)
    assert swapped.read_bytes() != in_order.read_bytes()
    return in_order, swapped
