"""What two redesigns of the engine would save, measured on copies of the code (issue #13).

Run with ``make bench-engine`` (or ``.venv/bin/python bench/engine_variants.py [--events N]``).
Each variant is a copy of ``schemas/``, ``streams/``, ``projections/`` and ``dealtrail/`` in a
temporary folder, changed there and never here:

  as is           the engine as it is.
  in place        an upper bound for a state mutated in place: ``model_copy`` updates the
                  object itself, ``apply`` works on the state's own field dict and the draft
                  never copies the decks. Rules then see the state after the event as the state
                  before it, so the findings differ: this only bounds what copying costs.
  mypyc           the engine's modules (``engine``, ``reducer``, ``context``, ``remedies``,
                  the rules) compiled to C by mypyc (mypy's compiler, in the dev
                  dependencies; needs a C compiler). The state dataclasses stay Python: compiled
                  to native classes, their copies (``dataclasses.replace``) cost more than the
                  dict copy they replace (measured 2026-12-01: twice the instructions).

For each it prints ``engine instructions/event (<variant>): N`` (valgrind's cachegrind: the
instructions of decoding and applying N events less those of decoding them alone, divided by
N; counts repeat within about 1 % from run to run, timings on this machine by a third) and
``engine us/event (<variant>): N`` (CPU time of ``apply`` over the same events, held decoded
and frozen out of the garbage collector, best of three). Without valgrind, only the timings.

Options: ``--events N`` (10,000 for the instruction count, from the cached bench file, simulated
first if missing, which takes minutes; the timings use 10 times as many), ``--keep DIR`` (build
the variants in DIR/as-is, DIR/in-place and DIR/mypyc, replacing those folders if they are
there, and keep them).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "streams", "projections", "dealtrail")
ENGINE_MODULES = (
    "streams/engine/engine.py",
    "streams/engine/reducer.py",
    "streams/engine/context.py",
    "streams/engine/remedies.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "streams/engine/rules").glob("*.py")),
)

# (file, text as it is, text of the variant): each must match exactly once, or the run stops
IN_PLACE = (
    (
        "streams/engine/state.py",
        """        new = object.__new__(self.__class__)
        fields = self.__dict__.copy()
        if update:
            fields.update(update)
        object.__setattr__(new, "__dict__", fields)
        return new""",
        """        if update:
            self.__dict__.update(update)
        return self""",
    ),
    ("streams/engine/engine.py", "fields = state.__dict__.copy()", "fields = state.__dict__"),
    (
        "streams/engine/reducer.py",
        """            self.state.__dict__["decks"] = dict(self.state.decks)
            self._decks_copied = True""",
        """            self._decks_copied = True""",
    ),
)
MYPYC = (  # mypyc cannot compile cls.__new__(cls) on a native class: the same draft, built by __init__
    (
        "streams/engine/reducer.py",
        """        draft = cls.__new__(cls)
        state = object.__new__(TableState)
        object.__setattr__(state, "__dict__", fields)
        draft.state = state
        draft._round_copied = False
        draft._decks_copied = False
        return draft""",
        """        state = object.__new__(TableState)
        object.__setattr__(state, "__dict__", fields)
        return cls(state)""",
    ),
    (
        "streams/engine/reducer.py",
        "        self.state = base.model_copy(update=changes)",
        "        self.state = base.model_copy(update=changes) if changes else base",
    ),
)

RUNNER = """
import gc, itertools, sys, time
from schemas.codec import decode
from streams.engine import apply
path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "rb") as fh:
    lines = list(itertools.islice(fh, n))
if mode == "time":
    events = [decode(line) for line in lines]
    gc.freeze()
    best = None
    for _ in range(3):
        states = {}
        t0 = time.process_time()
        for event, line in zip(events, lines):
            states[event.table_id], _ = apply(states.get(event.table_id), event, line)
        us = (time.process_time() - t0) / len(events) * 1e6
        best = us if best is None else min(best, us)
    print(f"{best:.1f}")
else:
    states = {}
    for line in lines:
        event = decode(line)
        if mode == "apply":
            states[event.table_id], _ = apply(states.get(event.table_id), event, line)
"""


def _variant(folder: Path, name: str, patches: tuple[tuple[str, str, str], ...], compile_: bool) -> Path:
    """A copy of the packages in ``folder/name`` with ``patches`` applied (and compiled).

    Raises:
        SystemExit: a patch no longer matches the code exactly once (the code has changed:
            update the patch), or mypyc failed.
    """
    dest = folder / name
    shutil.rmtree(dest, ignore_errors=True)  # a variant kept by an earlier --keep is built again
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for rel, old, new in patches:
        path = dest / rel
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"engine-variants: {name}: the patch of {rel} no longer matches; update it")
        path.write_text(text.replace(old, new))
    if compile_:
        mypyc = Path(sys.executable).with_name("mypyc")
        done = subprocess.run([str(mypyc), *ENGINE_MODULES], cwd=dest, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"engine-variants: mypyc failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return dest


def _run(src: Path, args: list[str], valgrind: bool) -> str:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, "-c", RUNNER, *args]
    if valgrind:
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *cmd]
    done = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, check=True)
    return done.stderr if valgrind else done.stdout.strip()


def _instructions(src: Path, path: Path, n: int) -> int:
    counts = []
    for mode in ("decode", "apply"):
        found = re.search(r"I\s+refs:\s+([\d,]+)", _run(src, [str(path), mode, str(n)], valgrind=True))
        assert found is not None, "cachegrind printed no instruction count"
        counts.append(int(found.group(1).replace(",", "")))
    return (counts[1] - counts[0]) // n


def main() -> None:
    """Print each variant's engine instructions and CPU time per event."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_audit import ensure_events  # the cached, chained bench events

    path = ensure_events(100_000 if args.events * 10 <= 100_000 else 1_000_000)
    with path.open("rb") as fh:
        available = sum(1 for _ in itertools.islice(fh, args.events * 10))
    folder = args.keep or Path(tempfile.mkdtemp(prefix="engine-variants-"))
    folder.mkdir(parents=True, exist_ok=True)
    valgrind = shutil.which("valgrind") is not None
    if not valgrind:
        print("engine-variants: valgrind not found: timings only", file=sys.stderr)
    try:
        variants = {
            "as is": _variant(folder, "as-is", (), compile_=False),
            "in place": _variant(folder, "in-place", IN_PLACE, compile_=False),
            "mypyc": _variant(folder, "mypyc", MYPYC, compile_=True),
        }
        for name, src in variants.items():
            if valgrind:
                print(f"engine instructions/event ({name}): {_instructions(src, path, args.events)}", flush=True)
            print(f"engine us/event ({name}): {_run(src, [str(path), 'time', str(available)], False)}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
