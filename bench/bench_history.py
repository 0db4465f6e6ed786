"""Benchmark of the read side at a day and a month of history: the report, the console's pages and
API, the read replica and the archive of a month, on stores of 8 tables dealt around the clock.

Run with ``make bench-history`` (``BENCH_HISTORY_ARGS`` for the options below).

The stores are built once and kept in a cache folder (``--cache``, default ``$DEALTRAIL_BENCH_CACHE``
or ``.cache/bench-history/``, git-ignored), one sub-folder per store named by a key of the options
that shape it (tables, hours, seed, error rate, start) and of the code that shapes a store (the
schemas, the engine, the simulator, the audit, the store's DDL): a change of any of them builds a
new store; ``--rebuild`` builds again anyway. A store is built the way a user builds one: the floor
is simulated to an event file, which is audited (:func:`dealtrail.ingest.audit.audit_file`, the workers
``dealtrail audit`` picks, the settings' memory limit, snapshot interval, plausibility limits and
remedy window) into the store; nothing is shifted or copied between days, so every store is a
real, chain-valid store. The
simulator is one process and the larger half of a build, so its tables are shared among
``--simulators`` processes (default: one per core) whose files are merged into the very bytes
:func:`dealtrail.simulator.floor.simulate` writes (each table's simulation depends only on its own
ID; a test checks the bytes). Progress goes to stderr with the rate and the time left.

Each store starts half its length before 1 November 2026 (00:00 UTC), so it holds two calendar
months and the older one (October: the first half of the store) can be archived for real.

A store holds every event simulated for it, or the bench stops (:class:`StoreIncomplete`): the
audit's clock stands an hour after the last simulated event (:func:`audit_clock`), since the
tables that close owing a remedy deal up to a day and a half past the store's nominal end.

Prints on stdout, for each store, lines beginning with its length (``1 day``, ``30 days``)::

  1 day events simulated = events stored: N  (or the bench stops: the store is not whole)
  1 day store events: N                   the events stored
  1 day store bytes/event: N              the store file's size / its events
  1 day report s (whole store): N         `dealtrail report` of the whole store (a new process,
                                          wall time, Python's start-up included)
  1 day report MB: N                      its report.html
  1 day page p95 ms floor: N              the floor page ``/`` (suffixed lines: its rows fragment
                                          ``/floor/tables`` that refreshes every few seconds)
  1 day page p95 ms findings (page 1): N  the findings list unfiltered; (deep page K) its last
                                          page K; (table T) filtered by the table
                                          with the most findings; (rule R) by its most frequent rule
  1 day page p95 ms findings: N           the largest of those four
  1 day page p95 ms finding: N            one finding's page (a different finding each request)
  1 day page p95 ms dealer: N             the page of the dealer with the most rounds
  1 day page p95 ms table: N              the page of the table with the most findings
  1 day api p95 ms findings: N            ``/api/v1/findings`` (its default limit: 1,000)
  1 day replica s: N                      :func:`projections.store.replica.write_replica`, the whole copy
  1 day archive s (one month): N          :func:`projections.store.archive.archive` of October (copy to
                                          Parquet, check, delete)

Pages are requested in this process through FastAPI's TestClient (the application ``dealtrail
serve`` runs) by a viewer added to a copy of the store and logged in with the login form; each
after ``--warmup`` requests, ``--requests`` times; p95 of the wall times. The replica and the
archive work on that copy too: the cached store is never written.

Options: ``--days`` (list, default 1,30), ``--tables`` (8), ``--cache DIR``, ``--rebuild``,
``--only`` (stages: build, report, pages, replica, archive; default all), ``--requests`` (60: the
p95 of 20 is their second-slowest, which one slow request moves), ``--warmup`` (3),
``--simulators`` (one per core), ``--keep-events`` (keep each simulated event file in the cache,
in a folder named by the simulator's code, and audit it again instead of simulating when a change
of the engine, audit or store makes a store's key new: a third of a month's build; 12.4 GB for 30 days),
``--quick`` (a smoke check: one store of 3 tables and 1 hour, 3 requests).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGES = ("build", "report", "pages", "replica", "archive")
BOUNDARY = datetime(2026, 11, 1, tzinfo=UTC)
"""Every store is centred on this instant: its first half is in October, its second in November."""
SHAPING = ("schemas", "streams/engine", "dealtrail/simulator", "dealtrail/ingest/audit.py",
           "projections/store/store.py", "projections/store/event_rows.py", "projections/store/summaries.py",
           "projections/store/sql")  # fmt: skip
"""The code that decides what a store holds (its key; the DDL files are the numbered ones)."""
SIMULATING = ("schemas", "dealtrail/simulator", "projections/store/private.py")
"""The code that decides what the simulated event file holds (besides :func:`simulate_floor`)."""
SEED, ERROR_RATE = 23, 0.05
PASSWORD = "bench-history-viewer-pass"


def log(msg: str) -> None:
    """One progress line on stderr."""
    print(f"[bench-history {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class StoreSpec:
    """One store to build: ``tables`` dealt for ``hours`` around :data:`BOUNDARY`."""

    tables: int
    hours: float

    @property
    def label(self) -> str:
        """The store's length as the printed lines begin: ``1 day``, ``30 days``, ``1 hour``."""
        if self.hours < 24:
            return f"{self.hours:g} hour{'s' if self.hours != 1 else ''}"
        days = self.hours / 24
        return f"{days:g} day{'s' if days != 1 else ''}"

    @property
    def start(self) -> datetime:
        """The first deal: half the store's length before :data:`BOUNDARY`."""
        return BOUNDARY - timedelta(hours=self.hours / 2)


def _digest_files(digest: Any, names: tuple[str, ...]) -> None:
    """Feed ``digest`` the path and bytes of each Python file and numbered DDL file under ``names``."""
    for name in names:
        path = ROOT / name
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file() and (f.suffix == ".py" or re.fullmatch(r"\d{3}_.*\.sql", f.name)):
                digest.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())


def code_version() -> str:
    """A digest of the files that shape a store (:data:`SHAPING`)."""
    digest = hashlib.sha256()
    _digest_files(digest, SHAPING)
    return digest.hexdigest()[:12]


def store_key(spec: StoreSpec) -> str:
    """The cache folder's name for ``spec`` with the code as it is."""
    # "audit": the audit's options (a store built before it awaited remedies for ever); "clock": the
    # audit's clock (a store built with it at the nominal end lost three tables' last day)
    options = {"tables": spec.tables, "hours": float(spec.hours), "seed": SEED, "error_rate": ERROR_RATE,
               "start": spec.start.isoformat(), "audit": "settings' limits",
               "clock": "an hour after the last event"}  # fmt: skip
    # hours as a float: StoreSpec(8, 24) and StoreSpec(8, 24.0) are one store
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:8]
    return f"{spec.label.replace(' ', '')}-{spec.tables}t-{digest}-{code_version()}"


def events_key(spec: StoreSpec) -> str:
    """The folder name of ``spec``'s simulated event file kept by ``--keep-events``: its options
    and a digest of the code that writes it (:data:`SIMULATING` and this bench's merge of the
    simulators' parts), so a change of the engine, audit or store reuses it and one of the
    simulator does not."""
    options = {"tables": spec.tables, "hours": float(spec.hours), "seed": SEED, "error_rate": ERROR_RATE,
               "start": spec.start.isoformat()}  # fmt: skip
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    _digest_files(digest, SIMULATING)
    for merge in (_simulate_tables, simulate_floor):
        digest.update(inspect.getsource(merge).encode())
    return f"events-{spec.label.replace(' ', '')}-{spec.tables}t-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class Simulated:
    """What a simulation wrote: ``events`` lines, the latest ``recorded_at`` among them (``last``)."""

    events: int
    last: datetime


def _simulate_tables(floor: Any, indexes: list[int], out: Path) -> Simulated:
    """Simulate the tables of ``floor`` at ``indexes`` to ``out``, each line prefixed with its merge
    key (UTC time, table, seq; tab-separated), in the order :func:`dealtrail.simulator.floor.simulate`
    gives them. Each table's simulation depends on its own ID and index only, so a table simulated
    here deals exactly what it deals in a whole floor."""
    import heapq

    from dealtrail.simulator.floor import GAMES
    from dealtrail.simulator.table import TableSim, table_ids
    from projections.store.private import open_private
    from schemas.codec import encode

    tables = table_ids(floor.tables)
    sims = [TableSim(floor, tables[i][0], tables[i][1], i // 3, [], GAMES[tables[i][1]]) for i in indexes]
    n, last = 0, floor.start
    with open_private(out, binary=True) as fh:
        for e in heapq.merge(*(s.events() for s in sims), key=lambda e: (e.occurred_at, e.table_id, e.seq)):
            at = e.occurred_at.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%f")
            fh.write(f"{at}\t{e.table_id}\t{e.seq}\t".encode() + encode(e) + b"\n")
            last = max(last, e.recorded_at)
            n += 1
            if n % 500_000 == 0:
                log(f"a simulator of {len(indexes)} tables: {n:,} events")
    return Simulated(n, last)


def simulate_floor(floor: Any, out: Path, processes: int) -> Simulated:
    """Write the events of ``floor`` to ``out``, byte for byte as :func:`simulate` and
    :func:`schemas.codec.encode` give them, with the tables shared among ``processes``
    simulators whose files are then merged by (time, table, seq) as ``simulate`` merges them.

    Returns:
        The events written and the latest ``recorded_at`` among them: a table that closes owing a
        remedy (the simulator's ``closed-owing-remedy``) stays closed past the remedy window and
        then deals the rest of its shift, so a floor's events run up to a day and more past
        ``floor.start + floor.hours``.
    """
    import heapq
    from concurrent.futures import ProcessPoolExecutor

    from projections.store.private import open_private

    groups = [g for g in (list(range(k, floor.tables, processes)) for k in range(processes)) if g]
    parts = [out.with_name(f"{out.name}.part{k}") for k in range(len(groups))]
    with ProcessPoolExecutor(len(groups)) as pool:
        done = list(pool.map(_simulate_tables, [floor] * len(groups), groups, parts))

    def keyed(path: Path) -> Iterator[tuple[tuple[bytes, bytes, int], bytes]]:
        with path.open("rb") as fh:
            for line in fh:
                at, table, seq, event = line.split(b"\t", 3)
                yield (at, table, int(seq)), event

    n = 0
    with open_private(out, binary=True) as fh:
        for _, event in heapq.merge(*(keyed(p) for p in parts), key=lambda pair: pair[0]):
            fh.write(event)
            n += 1
    for part in parts:
        part.unlink()
    return Simulated(n, max(d.last for d in done))


def audit_clock(simulated: Simulated) -> datetime:
    """The audit's fixed clock for a store: an hour after the latest ``recorded_at`` simulated, so
    that no simulated event is refused as ``recorded_in_future`` (a store built with the clock at
    the nominal end lost the three tables that close owing a remedy from their closing on)."""
    return simulated.last + timedelta(hours=1)


class StoreIncomplete(SystemExit):
    """A store holds fewer (or more) events than were simulated for it: its figures would not
    describe the history the bench says they do."""


def check_whole(label: str, simulated: int, stored: int, dead: dict[str, int] | None = None) -> str:
    """The line ``<label> events simulated = events stored: N``, or raise :class:`StoreIncomplete`.

    Args:
        label: the store's length (``1 day``).
        simulated: events the simulator wrote.
        stored: rows of the store's ``events`` table.
        dead: the audit's dead letters by reason, when known (named in the error).

    Raises:
        StoreIncomplete: ``simulated != stored``.
    """
    if simulated != stored:
        why = ", ".join(f"{reason}: {n:,}" for reason, n in sorted((dead or {}).items()))
        raise StoreIncomplete(
            f"{label} store is not whole: {simulated:,} events simulated, {stored:,} stored"
            + (f" (dead letters {why})" if why else "")
        )
    return f"{label} events simulated = events stored: {stored:,}"


def build(spec: StoreSpec, folder: Path, rebuild: bool, processes: int, kept: Path | None = None) -> Path:
    """The store of ``spec`` in ``folder`` (built there unless it is there already).

    The events are simulated to ``events.jsonl`` (by ``processes`` simulators: :func:`simulate_floor`)
    and audited into ``store.part``, renamed to
    ``store.duckdb`` at the end (an interrupted build leaves no store that looks whole); the event
    file is deleted once the store is built. ``kept``: a folder (:func:`events_key`) whose
    ``events.jsonl`` is audited instead of simulating again when it is there, and where the
    simulated file is kept (``--keep-events``; a month of 8 tables is 12.4 GB) when it is not.
    """
    from dealtrail.ingest.audit import audit_file
    from dealtrail.settings import Settings
    from dealtrail.simulator.floor import FloorSpec
    from projections.store.private import make_private_dirs, write_private_text
    from projections.store.store import Store
    from streams.clock import FixedClock

    db = folder / "store.duckdb"
    if db.exists() and not rebuild:
        return db
    make_private_dirs(folder)
    db.unlink(missing_ok=True)
    events = folder / "events.jsonl"
    if kept is not None and (kept / "simulated.json").exists():  # written once the file was whole
        events = kept / "events.jsonl"
        kept_file = json.loads((kept / "simulated.json").read_text(encoding="utf-8"))
        simulated = Simulated(int(kept_file["events"]), datetime.fromisoformat(kept_file["last"]))
        n, sim_s = simulated.events, 0.0
        log(f"{spec.label}: auditing the {n:,} events simulated before, kept in {events}")
    else:
        if kept is not None:
            make_private_dirs(kept)
            events = kept / "events.jsonl"
        expected = spec.tables * spec.hours * 3_800  # about 3,800 events a table-hour (the demo: 3,816)
        log(f"{spec.label}: simulating {spec.tables} tables for {spec.hours:g} h (about {expected:,.0f} events) "
            f"in {min(processes, spec.tables)} processes")  # fmt: skip
        t0 = time.monotonic()
        floor = FloorSpec(tables=spec.tables, hours=spec.hours, seed=SEED, error_rate=ERROR_RATE, start=spec.start)
        simulated = simulate_floor(floor, events, min(processes, spec.tables))
        n = simulated.events
        sim_s = time.monotonic() - t0
        log(f"{spec.label}: simulated {n:,} events in {sim_s:,.0f} s ({n / sim_s:,.0f}/s), the last recorded at "
            f"{simulated.last.isoformat()}; auditing")  # fmt: skip
        if kept is not None:
            kept_file = {"events": n, "last": simulated.last.isoformat(), "simulate_s": round(sim_s, 1)}
            write_private_text(kept / "simulated.json", json.dumps(kept_file) + "\n")
    size, done, t1, last = events.stat().st_size, 0, time.monotonic(), time.monotonic()

    def progress(read: int) -> None:
        nonlocal done, last
        done += read
        now = time.monotonic()
        if now - last >= 30:
            last = now
            rate = done / (now - t1)
            left = (size - done) / rate
            log(f"{spec.label}: audited {done / size:.0%}, {rate / 1e6:.1f} MB/s, about {left:,.0f} s left")

    part = folder / "store.part"
    part.unlink(missing_ok=True)
    settings = Settings()
    with Store(part, settings.duckdb_memory_limit) as store:
        summary = audit_file(  # as `dealtrail audit` does, with the settings' limits and window
            events,
            store,
            progress=progress,
            max_record_bytes=settings.max_record_bytes,
            snapshot_every=settings.snapshot_every,
            limits=settings.plausibility,
            reorder=settings.reorder.limits,
            # audited as if just after the history was dealt (its second half may lie after today):
            # after its last event, which a table closed owing a remedy deals a day and more late
            clock=FixedClock(audit_clock(simulated)),
        )
        stored = store.con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
    audit_s = time.monotonic() - t1
    log(f"{spec.label}: audited {summary.events:,} events in {audit_s:,.0f} s ({summary.events / audit_s:,.0f}/s)")
    check_whole(spec.label, n, stored, dict(summary.dead_letters))  # no store.duckdb unless it is whole
    part.rename(db)
    if kept is None:
        events.unlink()
    built = {"events": n, "last": simulated.last.isoformat(), "simulate_s": round(sim_s, 1),
             "audit_s": round(audit_s, 1), "built_at": datetime.now(UTC).isoformat(),
             "events_file": str(events) if kept else None}  # fmt: skip
    write_private_text(folder / "build.json", json.dumps(built) + "\n")
    return db


def p95(times: list[float]) -> float:
    """The 95th percentile (nearest rank) of ``times``, in ms."""
    ordered = sorted(times)
    return 1000 * ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def timed(get: Callable[[str], Any], paths: Iterator[str], warmup: int, requests: int) -> float:
    """p95 ms of ``requests`` GETs after ``warmup`` (each the next path of ``paths``); all must answer 200."""
    times = []
    slowest = (0.0, "")
    for i in range(warmup + requests):
        path = next(paths)
        t0 = time.perf_counter()
        response = get(path)
        elapsed = time.perf_counter() - t0
        if response.status_code != 200:
            raise SystemExit(f"GET {path} answered {response.status_code}")
        if i >= warmup:
            times.append(elapsed)
            slowest = max(slowest, (elapsed, path))
    log(f"GET {slowest[1]}: the slowest of {requests}, {1000 * slowest[0]:,.0f} ms")
    return p95(times)


def forever(*paths: str) -> Iterator[str]:
    """The paths in turn, again and again."""
    while True:
        yield from paths


def report_lines(db: Path, label: str) -> list[str]:
    """`dealtrail report` of the whole store in a new process (wall time) and its page's size."""
    with tempfile.TemporaryDirectory(prefix="bench-history-report-") as tmp:
        out = Path(tmp) / "report"
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "dealtrail.cli", "report", "--db", str(db), "--out", str(out)],
                              check=False, capture_output=True, text=True)  # fmt: skip
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"dealtrail report failed:\n{done.stdout}{done.stderr}")
        html = (out / "report.html").stat().st_size
    return [f"{label} report s (whole store): {seconds:.1f}", f"{label} report MB: {html / 1e6:.2f}"]


def page_lines(db: Path, label: str, warmup: int, requests: int) -> None:
    """Print the console's pages and the findings API on ``db`` (a writable copy), p95 ms each."""
    from fastapi.testclient import TestClient

    from dealtrail.cli.common import review_due
    from dealtrail.console import auth
    from dealtrail.console.app import ConsoleConfig, create_app
    from dealtrail.settings import Settings
    from projections.store.store import Store

    settings = Settings()
    store = Store(db, settings.duckdb_memory_limit)
    stack = contextlib.ExitStack()
    try:
        con = store.con
        last = con.execute("SELECT max(occurred_at) FROM events").fetchone()[0]  # type: ignore[index]
        auth.add_user(con, "bench", "viewer", PASSWORD, last)
        now = last + timedelta(hours=1)  # the console's clock: an hour after the last event
        app = create_app(store, ConsoleConfig(review_due(settings), "b" * 48, clock=lambda: now))
        client = stack.enter_context(TestClient(app))  # entered: the app's lifespan runs, as under `dealtrail serve`
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
        form = {"username": "bench", "password": PASSWORD, "csrf": csrf.group(1) if csrf else "", "next": "/"}
        if client.post("/login", data=form).status_code != 200:
            raise SystemExit("the bench user could not log in")

        def one(sql: str) -> Any:
            row = con.execute(sql).fetchone()
            return row[0] if row else None

        total = one("SELECT count(*) FROM findings")
        table = one("SELECT table_id FROM findings GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1")
        rule = one("SELECT rule_id FROM findings GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1")
        dealer = one("SELECT dealer_id FROM rounds GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1")
        ids = [r[0] for r in con.execute("SELECT DISTINCT finding_id FROM findings ORDER BY 1 LIMIT 200").fetchall()]
        if not (table and rule and dealer and ids):
            raise SystemExit(f"the store {db} holds no finding with a table, rule and dealer to ask for")
        shown = re.search(r"page 1 of ([0-9,]+)", client.get("/findings").text)
        if shown is None:
            raise SystemExit("the findings page does not say how many pages it has ('page 1 of N')")
        deep = int(shown.group(1).replace(",", ""))  # the last page: the deepest offset
        log(f"{label}: {total:,} findings, {deep:,} list pages; table {table}, rule {rule}, dealer {dealer}")

        def ms(*paths: str) -> float:
            return timed(client.get, forever(*paths), warmup, requests)

        from urllib.parse import quote, urlencode

        def emit(line: str) -> None:
            print(line, flush=True)

        floor, fragment = ms("/"), ms("/floor/tables")
        emit(f"{label} page p95 ms floor (rows fragment): {fragment:.0f}")
        emit(f"{label} page p95 ms floor: {floor:.0f}")
        lists = {}
        for name, path in (
            ("page 1", "/findings"),
            (f"deep page {deep}", f"/findings?page={deep}"),
            (f"table {table}", "/findings?" + urlencode({"table": table})),
            (f"rule {rule}", "/findings?" + urlencode({"rule": rule})),
        ):
            lists[name] = ms(path)
            emit(f"{label} page p95 ms findings ({name}): {lists[name]:.0f}")
        emit(f"{label} page p95 ms findings: {max(lists.values()):.0f}")
        emit(f"{label} page p95 ms finding: {ms(*(f'/findings/{quote(i)}' for i in ids)):.0f}")
        emit(f"{label} page p95 ms dealer: {ms('/dealers/' + quote(dealer)):.0f}")
        # the dealer's page over its last 30 days with its control chart (issue 50), by week (the
        # default) and by shift (the most points)
        for slot in ("week", "shift"):
            path = f"/dealers/{quote(dealer)}?period=30d&slot={slot}"
            emit(f"{label} page p95 ms dealer (30 days, chart by {slot}): {ms(path):.0f}")
        emit(f"{label} page p95 ms table: {ms('/tables/' + quote(table)):.0f}")
        emit(f"{label} api p95 ms findings: {ms('/api/v1/findings'):.0f}")
    finally:
        stack.close()
        store.close()


def replica_line(db: Path, label: str) -> str:
    """One copy of ``db`` to a replica beside it (the whole copy, seconds)."""
    from projections.store.replica import write_replica
    from projections.store.store import Store

    with Store(db) as store:
        copy = write_replica(store.con, db, db.with_name("replica.duckdb"))
    db.with_name("replica.duckdb").unlink()
    log(f"{label}: replica held the writer {copy.locked_seconds:.2f} s of {copy.total_seconds:.2f} s")
    return f"{label} replica s: {copy.total_seconds:.2f}"


def archive_line(db: Path, label: str) -> str:
    """The archive of the store's older month (October) from ``db`` to Parquet (copy, check, delete)."""
    from projections.store.archive import archive
    from projections.store.store import Store

    with Store(db) as store:
        result = archive(store.con, db, f"{BOUNDARY:%Y-%m}", db.with_name("archive"), datetime.now(UTC))
    seconds = result.copy_seconds + result.verify_seconds + result.delete_seconds
    log(f"{label}: archived {result.events:,} events ({len(result.parts)} parts): copy {result.copy_seconds:.1f} s, "
        f"check {result.verify_seconds:.1f} s, delete {result.delete_seconds:.1f} s")  # fmt: skip
    return f"{label} archive s (one month): {seconds:.1f}"


def measure(db: Path, spec: StoreSpec, stages: set[str], warmup: int, requests: int) -> None:
    """Print the figures of one store (see the module docstring)."""
    import duckdb

    label = spec.label
    con = duckdb.connect(str(db), read_only=True)
    events = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
    con.close()
    built = json.loads(db.with_name("build.json").read_text(encoding="utf-8"))
    print(check_whole(label, int(built["events"]), events), flush=True)  # a cached store too
    print(f"{label} store events: {events:,}", flush=True)
    print(f"{label} store bytes/event: {db.stat().st_size / events:.0f}", flush=True)
    if "report" in stages:
        for line in report_lines(db, label):
            print(line, flush=True)
    if not stages & {"pages", "replica", "archive"}:
        return
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:  # $TMPDIR: room for a copy
        copy = Path(tmp) / "store.duckdb"
        shutil.copyfile(db, copy)
        copy.chmod(0o600)
        # on disk before anything is timed: the kernel writes a 5 GB copy back over the next
        # half minute, and a commit's sync waits behind it (a finding's page records its read in
        # the access log, and the next pages wait for that commit): 420 to 520 ms at p95 for the
        # month's finding page measured during the writeback, 168 ms after it
        with copy.open("rb") as written:
            os.fsync(written.fileno())
        if "pages" in stages:
            page_lines(copy, label, warmup, requests)
        if "replica" in stages:
            print(replica_line(copy, label), flush=True)
        if "archive" in stages:
            print(archive_line(copy, label), flush=True)


def main() -> None:
    """Build the stores asked for (once) and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", default="1,30", help="store lengths in days, comma-separated (default 1,30)")
    parser.add_argument("--tables", type=int, default=8)
    default_cache = os.environ.get("DEALTRAIL_BENCH_CACHE") or str(ROOT / ".cache" / "bench-history")
    parser.add_argument("--cache", type=Path, default=Path(default_cache))
    parser.add_argument("--rebuild", action="store_true", help="build the stores again")
    parser.add_argument("--only", default=",".join(STAGES), help=f"stages, comma-separated: {', '.join(STAGES)}")
    parser.add_argument("--requests", type=int, default=60, help="requests per page after the warm-up")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--simulators", type=int, default=os.cpu_count() or 1, help="simulator processes")
    parser.add_argument(
        "--keep-events",
        action="store_true",
        help="keep each simulated event file in the cache (12.4 GB for 30 days) for builds after a store change",
    )
    parser.add_argument("--quick", action="store_true", help="smoke check: 3 tables for 1 hour, 3 requests a page")
    args = parser.parse_args()
    stages = {s.strip() for s in args.only.split(",") if s.strip()}
    if unknown := stages - set(STAGES):
        parser.error(f"unknown stage {', '.join(sorted(unknown))} (stages: {', '.join(STAGES)})")
    try:
        hours = [float(d) * 24 for d in args.days.split(",") if d.strip()]
    except ValueError:
        parser.error(f"--days takes numbers of days, comma-separated: not {args.days!r}")
    specs = [StoreSpec(args.tables, h) for h in hours]
    if args.quick:
        specs, args.requests, args.warmup = [StoreSpec(3, 1.0)], 3, 1
    for spec in specs:
        folder = args.cache / store_key(spec)
        db = folder / "store.duckdb"
        if "build" in stages or args.rebuild:
            # a kept event file is audited whenever it is there; --keep-events keeps a new one
            kept = args.cache / events_key(spec)
            kept_or_not = kept if args.keep_events or (kept / "simulated.json").exists() else None
            db = build(spec, folder, args.rebuild, args.simulators, kept_or_not)
        elif not db.exists():
            log(f"{spec.label}: no store in {folder} (run with the build stage)")
            continue
        log(f"{spec.label}: store {db} ({db.stat().st_size / 1e6:,.1f} MB)")
        measure(db, spec, stages, args.warmup, args.requests)


if __name__ == "__main__":
    main()
