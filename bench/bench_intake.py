"""Peak memory of `dealtrail audit` on hostile input against an ordinary file of the same size.

Prints, for each of
  (a) an ordinary simulated event file of about S MB (default 100),
  (b) a file of one S MB line without a newline (JSON-like, schema-valid in its beginning),
  (c) the ordinary file with one 10 MB schema-valid line (a HandSet of two million cards) in
      the middle,
the exit code of `dealtrail audit`, its dead letters by reason, and the RSS high-water mark of
the audit process and of its largest worker (MB), with (b) and (c) as a share of (a). The
done-when of issue #10: (b) and (c) within 10 % of (a), the long lines dead-lettered.

Not part of `make test`: run `.venv/bin/python bench/bench_intake.py [--size-mb 100]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"


def ordinary(size_mb: int) -> Path:
    """A simulated event file of at least ``size_mb`` MB, cached in bench/data/."""
    from dealtrail.simulator.floor import FloorSpec, simulate
    from schemas.codec import encode

    path = DATA / f"events-{size_mb}mb.jsonl"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    spec = FloorSpec(tables=48, hours=240.0, seed=3, error_rate=0.03)
    tmp = path.with_suffix(".part")
    written = 0
    with tmp.open("wb") as fh:
        for event in simulate(spec):
            line = encode(event) + b"\n"
            fh.write(line)
            written += len(line)
            if written >= size_mb * 1024 * 1024:
                break
    tmp.rename(path)
    return path


def hand_line(template: bytes, cards: int) -> bytes:
    """A HandSet line like ``template`` (a real one) with ``cards`` cards in its five-card hand."""
    doc = json.loads(template)
    doc.pop("hash", None)
    doc.pop("prev_hash", None)
    doc["event_id"] = "E-HUGE-HAND"
    head = json.dumps({k: v for k, v in doc.items() if k != "five_card"})[:-1].encode()
    return head + b', "five_card": [' + b'"AS", ' * (cards - 1) + b'"AS"]}'


def single_line(path: Path, template: bytes, size_mb: int) -> None:
    """One line of ``size_mb`` MB and no newline, written in pieces."""
    doc = json.loads(template)
    head = json.dumps({k: v for k, v in doc.items() if k != "five_card"})[:-1].encode() + b', "five_card": ['
    with path.open("wb") as fh:
        fh.write(head)
        left = size_mb * 1024 * 1024 - len(head)
        piece = b'"AS", ' * 100_000
        while left > len(piece):
            fh.write(piece)
            left -= len(piece)
        fh.write(b" " * max(0, left - 5) + b'"AS"]')


def with_big_line(src: Path, dst: Path, line: bytes) -> None:
    """``src`` with ``line`` after its middle line, copied in pieces (this process stays small:
    a child process starts with its parent's peak RSS as its own high-water mark)."""
    half = src.stat().st_size // 2
    with src.open("rb") as fh, dst.open("wb") as out:
        while fh.tell() < half:
            out.write(fh.read(min(1 << 20, half - fh.tell())))
        out.write(fh.readline())
        out.write(line + b"\n")
        while piece := fh.read(1 << 20):
            out.write(piece)


def audit(path: Path, folder: Path) -> dict[str, object]:
    db, dead = folder / f"{path.stem}.duckdb", folder / f"{path.stem}.rejected.jsonl"
    usage = folder / f"{path.stem}.rusage.json"
    code = f"""
import json, resource, sys
from dealtrail.cli import main
sys.argv = ["dealtrail", "audit", {str(path)!r}, "--db", {str(db)!r}, "--dead-letter", {str(dead)!r}]
try:
    main()
    rc = 0
except SystemExit as exc:
    rc = exc.code if isinstance(exc.code, int) else 1
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
with open({str(usage)!r}, "w") as fh:
    json.dump({{"rc": rc, "self_mb": me.ru_maxrss / 1024, "worker_mb": kids.ru_maxrss / 1024}}, fh)
"""
    # through a shell that forks it: the audit's high-water mark must not start at this process's
    # (Linux carries a process's peak RSS over exec, and vfork shares the parent's memory)
    shell = 'python="$1"; shift; "$python" "$@"; status=$?; exit $status'
    proc = subprocess.run(
        ["sh", "-c", shell, "sh", sys.executable, "-c", code], check=False, capture_output=True, text=True
    )
    if not usage.exists():
        raise SystemExit(f"the audit of {path} did not finish:\n{proc.stdout}\n{proc.stderr}")
    result: dict[str, object] = json.loads(usage.read_text())
    reasons: Counter[str] = Counter()
    if dead.exists():
        with dead.open("rb") as fh:
            for raw in fh:
                reasons[json.loads(raw)["reason"]] += 1
    result["dead"] = dict(reasons)
    result["mb"] = path.stat().st_size / 1024 / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--hand-mb", type=int, default=10)
    args = parser.parse_args()
    base = ordinary(args.size_mb)
    template = next(line for line in base.open("rb") if b'"HandSet"' in line)
    with tempfile.TemporaryDirectory(prefix="bench-intake-") as tmp:
        folder = Path(tmp)
        one_line = folder / "one-line.jsonl"
        single_line(one_line, template, args.size_mb)
        big_hand = folder / "big-hand.jsonl"
        with_big_line(base, big_hand, hand_line(template, args.hand_mb * 1024 * 1024 // 6))
        runs = [
            ("(a) ordinary", audit(base, folder)),
            ("(b) one line, no newline", audit(one_line, folder)),
            (f"(c) ordinary + one {args.hand_mb} MB HandSet line", audit(big_hand, folder)),
        ]
    ref = float(runs[0][1]["self_mb"]) + float(runs[0][1]["worker_mb"])  # type: ignore[arg-type]
    for name, r in runs:
        total = float(r["self_mb"]) + float(r["worker_mb"])  # type: ignore[arg-type]
        print(
            f"{name}: {float(r['mb']):,.0f} MB file, exit {r['rc']}, dead letters {r['dead'] or 'none'}; "  # type: ignore[arg-type]
            f"peak RSS audit {float(r['self_mb']):,.0f} MB + largest worker {float(r['worker_mb']):,.0f} MB "  # type: ignore[arg-type]
            f"= {total:,.0f} MB ({total / ref:.0%} of (a))"
        )


if __name__ == "__main__":
    main()
