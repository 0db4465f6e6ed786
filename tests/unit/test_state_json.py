"""A table state survives its JSON form unchanged (the store keeps it between audits, the
worker in its changelog)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dealtrail.ingest.audit import Auditor
from schemas.codec import decode
from streams.engine.state import dump_state, load_state


def test_every_state_of_a_shift_with_errors_survives_its_json_form(small_shift: tuple[Path, Path]) -> None:
    events, _ = small_shift
    auditor = Auditor()
    checked = mid_round = owing = 0
    for n, line in enumerate(events.read_bytes().splitlines()):
        event = decode(line)
        auditor.apply(event, line)
        if n % 13 == 0:  # states mid-round, with open remedies, faults and findings fired
            state = auditor.states[event.table_id]
            assert load_state(dump_state(state)) == state, f"line {n + 1}"
            checked += 1
            mid_round += state.round is not None
            owing += bool(state.obligations)
    assert checked > 1000 and mid_round > 500 and owing > 0


def test_the_same_state_dumps_to_the_same_text_whatever_the_hash_seed(small_shift: tuple[Path, Path]) -> None:
    """Sets in a state dump as sorted lists: two processes with other hash seeds store the same
    state text (and so the same snapshot hashes) for the same events."""
    events, _ = small_shift
    script = (
        "import sys, hashlib\n"
        "from dealtrail.ingest.audit import Auditor\n"
        "from schemas.codec import decode\n"
        "from streams.engine.state import dump_state\n"
        "a = Auditor()\n"
        "for line in open(sys.argv[1], 'rb').read().splitlines():\n"
        "    a.apply(decode(line), line)\n"
        "print(hashlib.sha256(''.join(dump_state(a.states[t]) for t in sorted(a.states)).encode()).hexdigest())\n"
    )
    texts = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script, str(events)], env=env, capture_output=True, text=True, check=True
        )
        texts.add(out.stdout.strip())
    assert len(texts) == 1


SET_FIELDS = {"voided_seats", "fired", "hands_set", "owed_wagers", "returned_wagers"}


def _set_lists(node: object) -> list[list[str]]:
    """Every list of a set field anywhere in a dumped state."""
    if isinstance(node, dict):
        out = [v for k, v in node.items() if k in SET_FIELDS and len(v) > 1]
        for v in node.values():
            out += _set_lists(v)
        return out
    if isinstance(node, list):
        return [x for v in node for x in _set_lists(v)]
    return []


def test_sets_in_a_state_dump_as_sorted_lists(small_shift: tuple[Path, Path]) -> None:
    events, _ = small_shift
    auditor = Auditor()
    seen = 0
    for n, line in enumerate(events.read_bytes().splitlines()):
        event = decode(line)
        auditor.apply(event, line)
        if n % 7 == 0:
            for values in _set_lists(json.loads(dump_state(auditor.states[event.table_id]))):
                assert values == sorted(values), f"line {n + 1}"
                seen += 1
    assert seen > 0
