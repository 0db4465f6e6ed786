"""Shuffled trails for the reorder tests: a simulated trail with events swapped with their
table's next event (within the window) and a few moved far later (across it), seq unchanged,
as when two device feeds are merged."""

from __future__ import annotations

import json
import random
from pathlib import Path

from schemas.chain import Chainer
from schemas.codec import decode


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
