"""What the chain's RFC 8785 hashing costs per event (issue 35): 0.2.0's stamping (pydantic's
JSON, hashed once) against today's (the event's JSON dict written in RFC 8785 form, then hashed),
over simulated events; prints microseconds per event for each, best of five runs.

    .venv/bin/python bench/bench_chain_hash.py [--events 20000]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import time
from collections.abc import Callable
from typing import Any

from dealtrail.simulator.floor import FloorSpec, simulate
from schemas.chain import stamped


def legacy_stamped(event: Any, prev_hash: str | None) -> tuple[Any, bytes]:
    """0.2.0's stamping, kept here for the comparison."""
    base = event.model_copy(update={"prev_hash": prev_hash, "hash": None})
    data = base.__pydantic_serializer__.to_json(base)
    digest = hashlib.sha256(data.replace(b',"hash":null', b"", 1)).hexdigest()
    return base.model_copy(update={"hash": digest}), data


def best(fn: Callable[[Any, str | None], tuple[Any, bytes]], events: list[Any]) -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        prev = None
        for event in events:
            linked, _ = fn(event, prev)
            prev = linked.hash
        times.append(time.perf_counter() - start)
    return min(times) / len(events) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    spec = FloorSpec(tables=4, hours=8.0, seed=3, error_rate=0.0, duplicate_rate=0.0, floor_visit_rate=0.0)
    events = [
        e.model_copy(update={"prev_hash": None, "hash": None, "hash_version": None})
        for e in itertools.islice(simulate(spec), args.events)
    ]
    old, new = best(legacy_stamped, events), best(stamped, events)
    print(f"{len(events)} events: 0.2.0 stamping {old:.1f} us/event, RFC 8785 stamping {new:.1f} us/event")
    print(f"extra cost {new - old:.1f} us/event ({new / old:.2f}x)")


if __name__ == "__main__":
    main()
