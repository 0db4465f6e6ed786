"""Benchmark of a group of properties: each property's daily exports and the group report over them.

Run with ``make bench-group`` (``BENCH_GROUP_ARGS`` for the options below).

Each property is a store of the history bench (:mod:`bench_history`: ``--tables`` tables dealt for
``--days`` days around 1 November 2026, built once and cached, every simulated event stored or the
bench stops), with a seed of its own (23, 24, 25, ...). Each property gets a fresh signing key,
exports every gaming day its store dealt in (UTC days, up to the day after its last event) to a
folder (``dealtrail export``'s :func:`dealtrail.reporting.exports.export_day`), and the group
report reads and verifies them all (:func:`dealtrail.reporting.group.read_group`,
:func:`write_group_report`).

Prints on stdout::

  group property P events simulated = events stored: N   (per property; or the bench stops)
  group export s per property-day (mean): N               each day's export, wall time
  group export s per property-day (max): N
  group report s (P properties): N                        verify and read every export, write the report
  group report s (1 property): N                          the same for the first property alone
  group report / one property: N                          the ratio (grows with the property-days; target 30 s)
  group view reading s (P properties): N                 one reading of the whole period: list, verify, sum
  group pages p95 ms (cached, P properties): N            the slowest p95 of the group view's floor and a
  group pages p95 ms (cached, 1 property): N                property's page (by day, by week), signed in,
  group pages (cached) / one property: N                    over the whole period; "reading beside": the
  group pages p95 ms (reading beside, ...): N                 refresh at 0, a background reading under way

Options: ``--properties`` (3), ``--days`` (30), ``--tables`` (8), ``--cache DIR`` (the history
bench's), ``--simulators``, ``--requests`` (60 a page) and ``--warmup`` (3), ``--report-to DIR``
(keep the group report of every property there), ``--keep-events`` (keep each simulated event file in
the cache, as the history bench's option: a file kept there is audited instead of simulating again),
``--quick`` (3 properties of 3 tables for half an hour across a midnight: the smoke check a test runs).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _history() -> object:
    """The history bench's module (its stores and their cache)."""
    spec = importlib.util.spec_from_file_location("bench_history", ROOT / "bench" / "bench_history.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_history"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    """Build (once) and export the properties' stores, then time the group report."""
    import duckdb

    from dealtrail.reporting.exports import due_days, export_day
    from dealtrail.reporting.group import read_group, write_group_report
    from dealtrail.reporting.objectstore import open_location
    from projections.records.signing import create_key, public_pem
    from projections.store.store import connect_read_only

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--properties", type=int, default=3)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--tables", type=int, default=8)
    default_cache = os.environ.get("DEALTRAIL_BENCH_CACHE") or str(ROOT / ".cache" / "bench-history")
    parser.add_argument("--cache", type=Path, default=Path(default_cache))
    parser.add_argument("--simulators", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--quick", action="store_true", help="smoke check: 3 properties of 3 tables, half an hour")
    parser.add_argument("--requests", type=int, default=60, help="requests per page after the warm-up")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--report-to", type=Path, help="keep the group report of every property here (to look at)")
    parser.add_argument(
        "--keep-events",
        action="store_true",
        help="keep each simulated event file in the cache (12.4 GB for 30 days) for builds after a store change",
    )
    args = parser.parse_args()
    hours = 0.5 if args.quick else args.days * 24
    if args.quick:
        args.requests, args.warmup = 3, 1
    tables = 3 if args.quick else args.tables
    simulators = 1 if args.quick else args.simulators  # a process pool costs more than 3 small tables
    bench: object = _history()
    spec = bench.StoreSpec(tables, hours)  # type: ignore[attr-defined]
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="bench-group-") as tmp:
        exports = open_location(str(Path(tmp) / "exports"))
        keys = Path(tmp) / "keys"
        keys.mkdir(mode=0o700)
        ids, export_s, exported_days = [], [], set()
        for k in range(args.properties):
            property_id = f"property-{k + 1}"
            bench.SEED = 23 + k  # type: ignore[attr-defined]
            folder = args.cache / bench.store_key(spec)  # type: ignore[attr-defined]  # the history bench's for seed 23
            # a kept event file (the history bench's --keep-events) is audited instead of simulating
            kept = args.cache / bench.events_key(spec)  # type: ignore[attr-defined]
            kept_or_not = kept if args.keep_events or (kept / "simulated.json").exists() else None
            db = bench.build(spec, folder, False, simulators, kept_or_not)  # type: ignore[attr-defined]
            built = json.loads((folder / "build.json").read_text(encoding="utf-8"))
            stored = duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM events").fetchone()
            line = bench.check_whole(f"group {property_id}", int(built["events"]), stored[0] if stored else 0)  # type: ignore[attr-defined]
            print(line, flush=True)
            key = create_key(Path(tmp) / f"{property_id}.key")
            (keys / f"{property_id}.pem").write_bytes(public_pem(key))
            con = connect_read_only(db)
            try:
                # the days the store dealt in, closed by the day after its last event (not today's
                # clock: a month of empty days since would be exported too)
                last = con.execute("SELECT max(recorded_at) FROM events").fetchone()
                until = (last[0] if last and last[0] else now) + timedelta(days=1)
                for period in due_days(con, exports, property_id, "UTC", until):
                    exported_days.add(period.start.date())  # UTC gaming days
                    t0 = time.perf_counter()
                    export_day(con, exports, property_id, period, "UTC", key, now)
                    export_s.append(time.perf_counter() - t0)
            finally:
                con.close()
            ids.append(property_id)
        print(f"group export s per property-day (mean): {statistics.fmean(export_s):.2f}", flush=True)
        print(f"group export s per property-day (max): {max(export_s):.2f}", flush=True)
        from dealtrail.reporting.group import registered_keys

        registered = registered_keys(keys)
        # the period the exports cover, as a manager would ask for it (the report's heading says it)
        first, end = min(exported_days).isoformat(), (max(exported_days) + timedelta(days=1)).isoformat()
        timings = {}
        for label, chosen in ((f"{len(ids)} properties", registered), ("1 property", {ids[0]: registered[ids[0]]})):
            t0 = time.perf_counter()
            views = [v for v in read_group(exports, chosen, first, end, now) if v.property_id in chosen]
            if not all(v.ok for v in views):
                raise SystemExit(f"a property failed verification: {[v.problems for v in views if not v.ok]}")
            files = write_group_report(views, Path(tmp) / "report", exports.url, first, end, now)
            timings[label] = time.perf_counter() - t0
            if args.report_to and len(chosen) == len(registered):
                shutil.copytree(files.folder, args.report_to, dirs_exist_ok=True)
            print(f"group report s ({label}): {timings[label]:.2f}", flush=True)
        print(
            f"group report / one property: {timings[f'{len(ids)} properties'] / timings['1 property']:.2f}", flush=True
        )
        first_day, last_day = _days_exported(exports)
        one = open_location(str(Path(tmp) / "exports-1"))  # a group of the first property alone
        shutil.copytree(Path(tmp) / "exports" / f"property={ids[0]}", Path(tmp) / "exports-1" / f"property={ids[0]}")
        keys_1 = Path(tmp) / "keys-1"
        keys_1.mkdir(mode=0o700)
        shutil.copy(keys / f"{ids[0]}.pem", keys_1 / f"{ids[0]}.pem")
        pages: dict[str, float] = {}
        for label, location, folder in ((f"{len(ids)} properties", exports, keys), ("1 property", one, keys_1)):
            t0 = time.perf_counter()
            end_day = (datetime.strptime(last_day, "%Y-%m-%d") + timedelta(days=1)).strftime("%Y-%m-%d")
            read_group(location, registered_keys(folder), first_day, end_day, now)
            print(f"group view reading s ({label}): {time.perf_counter() - t0:.2f}", flush=True)
            for cached in (True, False):
                worst = page_p95(location, folder, ids[0], first_day, last_day, cached, args.warmup, args.requests)
                how = "cached" if cached else "reading beside"
                pages[f"{label} {how}"] = worst
        for how in ("cached", "reading beside"):
            many, single = pages[f"{len(ids)} properties {how}"], pages[f"1 property {how}"]
            print(f"group pages p95 ms ({how}, {len(ids)} properties): {many:.0f}", flush=True)
            print(f"group pages p95 ms ({how}, 1 property): {single:.0f}", flush=True)
            print(f"group pages ({how}) / one property: {many / single:.2f}", flush=True)


def _days_exported(exports: Any) -> tuple[str, str]:
    """The first and last gaming day any property exported."""
    days = sorted(
        d.removeprefix("gaming_day=")
        for p in exports.folders(exports.root)
        for d in exports.folders(exports.path(p))
        if d.startswith("gaming_day=")
    )
    return days[0], days[-1]


def page_p95(
    location: Any, keys: Path, property_id: str, first_day: str, last_day: str, cached: bool, warmup: int, requests: int
) -> float:
    """The slowest p95 (ms) among the group view's pages over the whole period, signed in as a
    director: the floor, a property's page by gaming day and by week. ``cached``: the view's
    reading of the exports is fresh (``DEALTRAIL_GROUP__REFRESH_SECONDS`` not yet passed); else
    the refresh is 0, so every page finds a background reading of every export under way beside
    it (a page never waits for one: :class:`dealtrail.console.group_view.GroupReader`)."""
    from datetime import timedelta

    from fastapi.testclient import TestClient

    from dealtrail.console.auth import hash_password
    from dealtrail.console.group_view import GroupReader, GroupUser, create_group_app
    from dealtrail.console.guard import SecurityPolicy

    history: Any = sys.modules["bench_history"]
    refresh = timedelta(hours=1) if cached else timedelta(0)
    reader = GroupReader(location, keys, refresh, lambda: datetime.now(UTC))
    users = {"bench": GroupUser("bench", hash_password(PAGE_PASSWORD), "director")}
    app = create_group_app(reader, users, "b" * 48, SecurityPolicy(), echo=lambda _: None)
    with TestClient(app) as client:
        page = client.get("/login").text
        csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        form = {"username": "bench", "password": PAGE_PASSWORD, "csrf": csrf, "next": "/"}
        if client.post("/login", data=form, follow_redirects=False).status_code != 303:
            raise SystemExit("the bench user could not sign in to the group view")
        period = f"from={first_day}&to={last_day}"
        worst = 0.0
        for name, path in (
            ("floor", f"/?{period}"),
            ("property by day", f"/properties/{property_id}?{period}"),
            ("property by week", f"/properties/{property_id}?{period}&slot=week"),
        ):
            ms = history.timed(client.get, history.forever(path), warmup, requests)
            how = "cached" if cached else "reading beside"
            history.log(f"group page p95 ms {name} ({how}, {location.url}): {ms:.0f}")
            worst = max(worst, ms)
    return worst


PAGE_PASSWORD = "bench-group-director-pass"


if __name__ == "__main__":
    main()
