"""Helpers shared by test modules (fixtures live in the conftest files)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path


def unchained_lines(lines: Iterable[bytes]) -> list[bytes]:
    """JSON Lines events with ``prev_hash`` and ``hash`` removed, each ending in a newline."""
    out = []
    for line in lines:
        doc = json.loads(line)
        doc.pop("prev_hash", None)
        doc.pop("hash", None)
        out.append(json.dumps(doc).encode() + b"\n")
    return out


def write_unchained(events: Path, out: Path) -> Path:
    """Write ``events`` to ``out`` without the chain fields; returns ``out``."""
    out.write_bytes(b"".join(unchained_lines(events.read_bytes().splitlines())))
    return out
