"""``make bench-engine`` changes copies of the engine by exact text: the patches must still match
the code, and the copy they make must behave as the variant's name says."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _variants() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_variants", ROOT / "bench" / "engine_variants.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_patch_matches_the_code_exactly_once() -> None:
    ev = _variants()
    for rel, old, new in (*ev.IN_PLACE, *ev.MYPYC):
        text = (ROOT / rel).read_text()
        assert text.count(old) == 1, f"{rel}: a bench-engine patch no longer matches"
        assert old != new


def test_the_in_place_copy_changes_states_in_place_and_the_code_here_does_not(tmp_path: Path) -> None:
    ev = _variants()
    copy = ev._variant(tmp_path, "in-place", ev.IN_PLACE, compile_=False)
    probe = (
        "from streams.engine.state import WagerInfo\n"
        "w = WagerInfo(wager_id='w', seat='SEAT_1', wager_type='ANTE', amount=5, event_id='e')\n"
        "c = w.model_copy(update={'active': False})\n"
        "print(c is w, w.active)\n"
    )
    out = {}
    for name, where in (("copy", copy), ("here", ROOT)):
        env = {**os.environ, "PYTHONPATH": str(where)}
        done = subprocess.run(
            [sys.executable, "-c", probe], cwd=where, env=env, capture_output=True, text=True, check=True
        )
        out[name] = done.stdout.split()
    assert out["copy"] == ["True", "False"]
    assert out["here"] == ["False", "True"]
