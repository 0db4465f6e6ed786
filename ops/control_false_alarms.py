"""How often a dealer's control chart signals by chance (issue 50): the figures behind the
compliance guide's *Why a dealer is judged by week*.

Simulates in-control months (:mod:`dealtrail.simulator.month`: 8 tables, 24 dealers, every dealer
at the floor's rate, with its ordinary overdispersion), one temporary store each, draws every
dealer's chart by ``--slot`` with the default settings and counts the points that signalled, by
rule, and the dealer-months with at least one signal. Prints one line per month and a summary::

  python ops/control_false_alarms.py --slot shift            # seeds 60 to 65, 28 days each
  python ops/control_false_alarms.py --slot week --seeds 60-65
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dealtrail.simulator.month import MonthSpec, write_month  # noqa: E402
from projections.models.control import RULES, SLOTS, ChartSpec, chart  # noqa: E402
from projections.store.store import connect_read_only  # noqa: E402


def main() -> None:
    """Simulate the months, chart every dealer and print the chance signals."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slot", choices=SLOTS, default="shift")
    parser.add_argument("--seeds", default="60-65", help="first-last seed of the months (default 60-65)")
    parser.add_argument("--days", type=int, default=28)
    args = parser.parse_args()
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    by_rule: Counter[str] = Counter()
    points = signals = dealer_months = flagged = 0
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "month.duckdb"
            write_month(str(db), MonthSpec(days=args.days, seed=seed))
            con = connect_read_only(db)
            try:
                pts = chart(con, ChartSpec("dealer", args.slot), None, None)
            finally:
                con.close()
        month_signals = [p for p in pts if p["signal"]]
        for p in month_signals:
            by_rule.update(rule for rule in RULES if p[rule])
        dealers = {p["subject_id"] for p in pts}
        hit = {p["subject_id"] for p in month_signals}
        points, signals = points + len(pts), signals + len(month_signals)
        dealer_months, flagged = dealer_months + len(dealers), flagged + len(hit)
        sigma_z = pts[0]["sigma_z"] if pts else float("nan")
        print(f"seed {seed}: {len(pts)} points, {len(month_signals)} signalled, {len(hit)} of {len(dealers)} "
              f"dealers, sigma_z {sigma_z:.3f}", flush=True)  # fmt: skip
    rules = ", ".join(f"{RULES[r]} {by_rule[r]}" for r in RULES)
    print(f"by {args.slot}: {points} points, {signals} signalled ({signals / max(points, 1):.2%}); {rules}; "
          f"dealer-months with a signal: {flagged} of {dealer_months}")  # fmt: skip


if __name__ == "__main__":
    main()
