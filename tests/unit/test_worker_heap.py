"""The worker's garbage-collector settings (streams.judge.settle_heap), checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

from streams.judge import GC_FIRST_GENERATION

PROBE = """
import gc, json
before = gc.get_threshold()
import streams.judge
streams.judge.settle_heap()
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count(),
                  "tracked": len(gc.get_objects())}))
"""


def test_the_worker_freezes_what_it_imported_and_collects_its_youngest_objects_less_often() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    got = json.loads(out)
    assert got["after"] == [GC_FIRST_GENERATION, got["before"][1], got["before"][2]]
    assert got["after"][0] > got["before"][0]
    # the modules imported (pydantic, faust, the engine ...) are out of the collector's walks
    assert got["frozen"] > 10_000
    assert got["tracked"] < got["frozen"] / 10
