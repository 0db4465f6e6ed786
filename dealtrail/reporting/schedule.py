"""Scheduled compliance reports: one report per closed period (shift, day or a cron schedule),
revised while what it says changes.

A period is closed once its end has passed (wall clock). Each closed period that holds any part
of the trail (a period starting after the last stored event is not reported until events
arrive) gets a folder ``<out>/<period>/`` with one revision folder per report written
(``rev-0001/``: ``report.html``, ``findings.csv``, ``findings.parquet``, ``summary.json``) and a
``manifest.json`` (``projections.records.report_revisions``). A report is *final* or *provisional*
(``projections.reports.report.judge_status``: every table that dealt in the period has an event past its
end, or the newest stored event is ``grace`` past it, in event time). A period already written
gets a new revision when its latest one is stale: its status, or what it covers (per table the
last event, the review watermark, finding revisions, rounds, dead letters, the generation),
changed *and* the figures' digest differs; the old revisions stay where they are, marked
superseded in the manifest. Each report is as of the clock's time: it counts only the reviews
made up to then, so the same store and the same as-of time give the same bytes. The clock is a
parameter, so tests control it.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import duckdb

from projections.models.reviews import ReviewDue
from projections.records.report_revisions import add_revision, latest
from projections.reports.report import FINAL, PROVISIONAL, coverage, judge_status, write_report
from projections.store.archive import reading_archive
from projections.store.store import connect_read_only

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from projections.models.control import ControlArgs

SHIFT_STARTS = (6, 14, 22)
"""Hours (local time) when the three 8-hour shifts start."""

_FIXED = {"day": "0 0 * * *", "shift": "0 6,14,22 * * *"}
"""The cron expressions of the named schedules."""

DEFAULT_GRACE = timedelta(minutes=15)
"""The grace time of :func:`run_due` when none is given (``DEALTRAIL_REPORTS__GRACE_MINUTES`` resolves it)."""

_MAX_OFFSET = timedelta(hours=26)
"""More than the widest gap between two zones' UTC offsets (-12:00 to +14:00)."""


class ScheduleError(ValueError):
    """An unknown schedule or time zone."""


@dataclass(frozen=True)
class Period:
    """A reporting period [start, end) (UTC instants) and its folder name."""

    start: datetime
    end: datetime
    label: str


@dataclass(frozen=True)
class Schedule:
    """``every`` is ``shift``, ``day`` or a cron expression (5 fields); ``tz`` an IANA zone.

    Periods follow the wall clock of ``tz`` (``zoneinfo``) and are turned into UTC instants at
    their edges, so a day in a zone with daylight saving has 23, 24 or 25 hours and still starts
    at the same local time. A start that falls in the hour skipped in spring moves to the end of
    the gap (``30 2 * * *`` starts at 03:00 that day). A start in the hour repeated in autumn
    counts once (at its first occurrence), unless the cron's hour field is ``*``: an hourly or
    quarter-hourly cron then starts a period at both occurrences, so every period lasts its
    usual length across both transitions (as cron itself runs wildcard-hour jobs).
    """

    every: str
    tz: str = "UTC"

    def __post_init__(self) -> None:
        try:
            ZoneInfo(self.tz)
        except Exception as exc:
            raise ScheduleError(f"unknown time zone {self.tz!r}") from exc
        if self.every not in _FIXED:
            from croniter import CroniterBadDateError, croniter

            if not croniter.is_valid(self.every):
                raise ScheduleError(f"--every must be shift, day or a cron expression; got {self.every!r}")
            if len(croniter(self.every).expanded) != 5:
                raise ScheduleError(
                    f"--every {self.every!r} has a seconds field: give a cron expression of five fields "
                    "(minute hour day-of-month month day-of-week); periods are whole minutes"
                )
            try:  # a date that never comes (31 February): croniter gives up after decades of search
                croniter(self.every, datetime(2000, 1, 1)).get_next(datetime)
            except CroniterBadDateError:
                raise ScheduleError(f"--every {self.every!r} never fires: no date matches it") from None

    @property
    def zone(self) -> ZoneInfo:
        """The zone of the periods."""
        return ZoneInfo(self.tz)

    def label(self, start: datetime) -> str:
        """The folder name of the period starting at ``start``: its local start (with the UTC
        offset, which tells the two 01:00s of an autumn night apart) and the zone, e.g.
        ``2026-11-01_America-New_York`` (day), ``2026-11-01T0600-0500_America-New_York_shift``,
        ``2026-11-01T0100-0400_America-New_York`` (cron). A UTC day and a New York day of the
        same date never share a folder."""
        local = start.astimezone(self.zone)
        zone = self.tz.replace("/", "-")
        if self.every == "day":
            return f"{local:%Y-%m-%d}_{zone}"
        return f"{local:%Y-%m-%dT%H%M%z}_{zone}" + ("_shift" if self.every == "shift" else "")

    def periods(self, first: datetime, now: datetime) -> Iterator[Period]:
        """The closed periods from the one containing ``first`` up to ``now`` (timezone-aware)."""
        starts = self._starts(first)
        start = next(starts)
        for end in starts:
            if end <= first:
                start = end
                continue
            if end > now:
                return
            yield Period(start, end, self.label(start))
            start = end

    def _starts(self, first: datetime) -> Iterator[datetime]:
        """Period starts as UTC instants, strictly increasing, from one at or before ``first``."""
        import heapq

        from croniter import croniter

        cron = _FIXED.get(self.every, self.every)
        zone = self.zone
        every_hour = croniter(cron).expanded[1] == ["*"]
        back = croniter(cron, first.astimezone(zone).replace(tzinfo=None) + timedelta(minutes=1))
        for _ in range(3):  # a few starts back: offsets move wall times by hours
            wall = back.get_prev(datetime)
        walls = croniter(cron, wall - timedelta(seconds=1))
        pending: list[datetime] = []
        last: datetime | None = None
        while True:
            wall = walls.get_next(datetime)
            for instant in _instants(wall, zone, every_hour):
                heapq.heappush(pending, instant)
            # a later wall time's instant is later than this one's, less the widest offset gap
            horizon = wall.replace(tzinfo=UTC) - _MAX_OFFSET
            while pending and pending[0] < horizon:
                instant = heapq.heappop(pending)
                if instant != last:
                    yield instant
                    last = instant


def _instants(wall: datetime, zone: ZoneInfo, every_hour: bool) -> list[datetime]:
    """The UTC instants of the naive local time ``wall`` in ``zone``: one; none that exists (the
    spring gap: the end of the gap instead); or two (the autumn repeat: the first only, unless
    ``every_hour``)."""
    early = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    late = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if early == late:
        return [early]
    if early.astimezone(zone).replace(tzinfo=None) == wall:  # repeated
        return [early, late] if every_hour else [early]
    return [_transition(min(early, late), max(early, late), zone)]


def _transition(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The instant in (before, after] where ``zone``'s offset changes to the one of ``after``."""
    target = after.astimezone(zone).utcoffset()
    lo, hi = int(before.timestamp()), int(after.timestamp())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, UTC).astimezone(zone).utcoffset() == target:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


def trail_span(con: duckdb.DuckDBPyConnection) -> tuple[datetime, datetime] | None:
    """When the store's trail starts and ends (None for an empty store)."""
    rows = con.execute("SELECT min(occurred_at), max(occurred_at) FROM events").fetchall()
    if not rows or rows[0][0] is None:
        return None
    return rows[0][0], rows[0][1]


_ADDED: dict[str, str] = {
    "events": "SELECT min(occurred_at), max(occurred_at) FROM events WHERE rowid >= $mark",
    "rounds": "SELECT min(completed_at), max(completed_at) FROM rounds WHERE rowid >= $mark",
    "findings": """SELECT min(d.observed_at), max(d.observed_at) FROM findings f
                   JOIN findings d ON d.finding_id = f.finding_id AND d.revision = 0 WHERE f.rowid >= $mark""",
    "reviews": """SELECT min(d.observed_at), max(d.observed_at) FROM reviews r
                  JOIN findings d ON d.finding_id = r.finding_id AND d.revision = 0 WHERE r.rowid >= $mark""",
    "dead_letters": "SELECT min(stated_at), max(stated_at) FROM stg_dead_letters WHERE row_no >= $mark",
    "dead_letter_counts": """SELECT min(coalesce(first_occurred_at, occurred_at)),
                                    max(coalesce(last_occurred_at, occurred_at))
                             FROM dead_letter_counts WHERE rowid >= $mark""",
    "generations": "SELECT TIMESTAMPTZ '1970-01-01 00:00:00+00', TIMESTAMPTZ '9999-01-01 00:00:00+00'"
    " FROM generations WHERE rowid >= $mark LIMIT 1",
}
"""Per append-only table: the span of report periods its rows added since a mark (a row count)
can change (a finding's or review's period is the one its finding was detected in; a new
generation changes every period)."""


@dataclass
class ReportWatch:
    """What :func:`run_due` remembers between the calls of one long-running caller (the
    projector's ``--report-every``, ``schedule`` without ``--once``), so that a call looks only at
    the periods the rows added since the previous call can change, and at those not yet final.

    The first call looks at every period. ``marks``: rows per table at the previous call (the
    tables are append-only, so the rows added since have a rowid at or above the mark);
    ``known``: label -> the status of its latest revision; ``unchanged``: label -> a coverage
    key found to change no figure (its report was written and thrown away).
    """

    marks: dict[str, int] = field(default_factory=dict)
    known: dict[str, str | None] = field(default_factory=dict)
    unchanged: dict[str, str] = field(default_factory=dict)

    def touched(self, con: duckdb.DuckDBPyConnection) -> list[tuple[datetime, datetime]] | None:
        """The time spans the rows added since the previous call fall in (None at the first
        call: everything), and remember the new marks."""
        first = not self.marks
        spans: list[tuple[datetime, datetime]] = []
        for table, sql in _ADDED.items():
            exists = con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND schema_name = 'main'", [table]
            ).fetchall()[0][0]
            if not exists:
                continue
            count = int(con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])
            mark = self.marks.get(table, 0)
            if not first and count > mark:
                low, high = con.execute(sql, {"mark": mark}).fetchall()[0]
                if low is not None:
                    spans.append((low, high))
            self.marks[table] = count
        return None if first else spans


def _unchanged_key(cover: dict[str, Any] | None, status: str | None) -> str | None:
    """What decides whether a period must be looked at again: its coverage but for the as-of
    time, and its status (None without a recorded coverage)."""
    if cover is None:
        return None
    return json.dumps({"coverage": {k: v for k, v in cover.items() if k != "as_of"}, "status": status}, sort_keys=True)


def run_due(
    db: Path | duckdb.DuckDBPyConnection,
    out: Path,
    schedule: Schedule,
    now: datetime,
    force: bool = False,
    property_name: str | None = None,
    review_due: ReviewDue | None = None,
    console_url: str | None = None,
    grace: timedelta | None = None,
    watch: ReportWatch | None = None,
    max_listed: int | None = None,
    archive: Path | None = None,
    signer: Ed25519PrivateKey | None = None,
    control: ControlArgs | None = None,
) -> list[Path]:
    """Write the report of every closed period not written yet, and a new revision of every
    period whose latest report is stale.

    A written period is looked at again only when its coverage (as of ``now``) or its status
    differs from its latest revision's (a few aggregate queries); a report is then written as
    of ``now`` into a temporary folder and kept as the next revision only if its digest
    (figures, finding rows, review states, status) differs from the latest's.

    Args:
        db: the store's path (opened read-only) or the writer's own connection.
        out: the folder that holds one sub-folder per period.
        schedule: which periods.
        now: the current time (timezone-aware): the periods closed by then are reported, each
            report is as of it (reviews made later are not counted) and says so in its header.
        force: write a new revision of every closed period, stale or not.
        property_name: the casino property the report headers name (resolved settings).
        review_due: review due times per severity (resolved settings); None: lateness not judged.
        console_url: the console's address the reports link to (resolved settings); None: no links.
        grace: a report is final once the newest stored event is this far past its period's
            end, in event time, even if some table has not dealt past it (resolved settings,
            ``DEALTRAIL_REPORTS__GRACE_MINUTES``).
        watch: kept by a caller that calls again and again (the projector, the schedule
            loop): each call after the first looks only at the periods that rows added since
            the previous call can change and at those not final yet (:class:`ReportWatch`);
            None: every period is looked at (``schedule --once``).
        max_listed: how many voiding and integrity incidents each report lists (resolved
            ``DEALTRAIL_REPORTS__MAX_LISTED``, see :func:`projections.reports.report.write_report`);
            None: every one.
        archive: the folder of the store's archived months (resolved ``--archive`` /
            ``DEALTRAIL_ARCHIVE__DIR``), read with the live rows as ``write_report`` reads
            them; None: the folder the store's manifest names.
        signer: the property's signing key (resolved ``DEALTRAIL_SIGNING__KEY_FILE``): each
            revision's ``manifest-sha256.txt`` is signed with it; None: each revision is written
            unsigned and says so (:func:`projections.records.report_revisions.seal`).
        control: the control charts' minimum rounds of a point, CUSUM k and h and the dealers' slot (resolved
            ``DEALTRAIL_CONTROL__*``); None: their defaults.

    Returns:
        The revision folders written by this call (``<out>/<period>/rev-NNNN``).

    Raises:
        projections.store.archive.ArchiveError: the store has archived months and their folder, or
            a file of it, is missing.
    """
    own = not isinstance(db, duckdb.DuckDBPyConnection)
    store = db if isinstance(db, duckdb.DuckDBPyConnection) else connect_read_only(db)
    grace = DEFAULT_GRACE if grace is None else grace
    written: list[Path] = []
    stack = contextlib.ExitStack()
    try:
        touched = watch.touched(store) if watch is not None else None  # rows added: always the store's own
        # the archived months read with the live rows, as the reports read them
        con = stack.enter_context(reading_archive(store, archive))
        span = trail_span(con)
        if span is None:
            return []
        for period in schedule.periods(span[0], now):
            if period.start > span[1]:
                break  # no dealing event at all in this or any later period (yet)
            if watch is not None and touched is not None and period.label in watch.known and not force:
                hit = any(low < period.end and high >= period.start for low, high in touched)
                if not hit and (watch.known[period.label] == FINAL or not touched):
                    continue  # final (or nothing added at all), and nothing added since can change it
            folder = out / period.label
            last = latest(folder)
            judged = judge_status(con, period.start, period.end, grace)
            status = judged["status"] if judged else PROVISIONAL
            key = _unchanged_key(coverage(con, period.start, period.end, now), status)
            recorded = _unchanged_key(last["coverage"], last["status"]) if last is not None else None
            if watch is not None and last is not None:
                watch.known[period.label] = last["status"]
            seen = last is not None and key in (recorded, watch.unchanged.get(period.label) if watch else None)
            if seen and not force:
                continue
            previous = last["digest"] if last is not None and not force else None
            made = _next_revision(
                con,
                folder,
                (period.start, period.end, schedule.tz, period.label),
                previous,
                _ReportOptions(
                    now, property_name, review_due, console_url, grace, max_listed, archive, signer, control
                ),
            )
            if watch is not None:
                if made is None and key is not None:
                    watch.unchanged[period.label] = key
                elif made is not None:
                    watch.unchanged.pop(period.label, None)
                    watch.known[period.label] = status
            if made is not None:
                written.append(made)
    finally:
        stack.close()
        if own:
            store.close()
    return written


def run_forever(
    db: Path,
    out: Path,
    schedule: Schedule,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
    poll_seconds: float = 60.0,
    on_written: Callable[[list[Path]], None] | None = None,
    iterations: int | None = None,
    on_busy: Callable[[str], None] | None = None,
    property_name: str | None = None,
    review_due: ReviewDue | None = None,
    console_url: str | None = None,
    grace: timedelta | None = None,
    max_listed: int | None = None,
    archive: Path | None = None,
    signer: Ed25519PrivateKey | None = None,
    control: ControlArgs | None = None,
) -> None:
    """Write each period's report as it closes, and a new revision of each stale one (see
    :func:`run_due`); check every ``poll_seconds`` (seconds).

    A store that a writer holds (an audit or projector running for a while) is not an error
    here: the check is made again at the next poll. ``on_busy`` hears of it once per busy spell
    (one line, not one per poll), and again only after the store was readable in between.

    Args:
        db: the store (opened read-only at each poll).
        out: the folder of the period folders.
        schedule: which periods.
        clock: the current time (tests pass their own).
        sleep: waits that many seconds (tests pass their own).
        poll_seconds: seconds between checks.
        on_written: told the folders each poll wrote.
        iterations: bounds the loop (tests); None runs until interrupted.
        on_busy: told, once per busy spell, that the store could not be opened and why.
        property_name: the casino property the report headers name.
        review_due: review due times per severity; None: lateness not judged.
        console_url: the console's address the reports link to; None: no links.
        grace: see :func:`run_due`.
        max_listed: see :func:`run_due`.
        archive: see :func:`run_due`.
        signer: see :func:`run_due`.
        control: see :func:`run_due`.

    Raises:
        FileNotFoundError: there is no store at ``db``.
    """
    n = 0
    busy = False
    watch = ReportWatch()
    while iterations is None or n < iterations:
        try:
            written = run_due(
                db,
                out,
                schedule,
                clock(),
                property_name=property_name,
                review_due=review_due,
                console_url=console_url,
                grace=grace,
                watch=watch,
                max_listed=max_listed,
                archive=archive,
                signer=signer,
                control=control,
            )
        except duckdb.IOException as exc:  # a writer holds the file's lock
            if not busy and on_busy is not None:
                on_busy(f"{db} is busy (a writer holds it); trying again every {poll_seconds:g} s: {exc}")
            busy = True
        else:
            busy = False
            if written and on_written is not None:
                on_written(written)
        n += 1
        if iterations is None or n < iterations:
            sleep(poll_seconds)


def stale_since(con: duckdb.DuckDBPyConnection, period: Path, now: datetime) -> str | None:
    """Why the latest revision of the period in the folder ``period`` no longer says what the
    store says, or None while it is current (or cannot be judged: no revision, no recorded
    coverage, no manifest).

    A revision is current while no dealing event, finding revision, round, dead letter or review
    of the period's findings has been stored since it was written: its recorded coverage (but
    for the as-of time) equals the store's as of ``now``.

    Args:
        con: a connection to the store (read; the archived months are not consulted).
        period: a period's folder (``<reports>/<label>``).
        now: the current time (timezone-aware).

    Returns:
        A short reason in words (``"2 reviews since its as-of"``), or None.
    """
    last = latest(period)
    info = _manifest(period)
    if last is None or info is None or last.get("coverage") is None:
        return None
    recorded = last["coverage"]
    current = coverage(con, info[0], info[1], now)
    if _unchanged_key(current, None) == _unchanged_key(recorded, None):
        return None
    why = []
    reviews = (current.get("reviews") or {}).get("count", 0) - (recorded.get("reviews") or {}).get("count", 0)
    if reviews:
        why.append(f"{reviews} review(s) since its as-of")
    events = sum(t.get("events", 0) for t in (current.get("tables") or {}).values())
    events -= sum(t.get("events", 0) for t in (recorded.get("tables") or {}).values())
    if events:
        why.append(f"{events} event(s) since its as-of")
    return "; ".join(why) or "findings or rounds changed since its as-of (a re-audit or a late event)"


def _manifest(period: Path) -> tuple[datetime, datetime, str, str] | None:
    """The period's (start, end, zone, label) from its ``manifest.json``, or None if unreadable."""
    try:
        body = json.loads((period / "manifest.json").read_text(encoding="utf-8"))
        start, end = datetime.fromisoformat(body["start"]), datetime.fromisoformat(body["end"])
        return start.astimezone(UTC), end.astimezone(UTC), str(body.get("zone") or "UTC"), str(body["label"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_revision(
    con: duckdb.DuckDBPyConnection,
    period: Path,
    now: datetime,
    property_name: str | None = None,
    review_due: ReviewDue | None = None,
    console_url: str | None = None,
    grace: timedelta | None = None,
    max_listed: int | None = None,
    archive: Path | None = None,
    signer: Ed25519PrivateKey | None = None,
    control: ControlArgs | None = None,
) -> Path | None:
    """Write a new revision of the written period in the folder ``period`` as of ``now``, as
    the schedule does, from the process that holds the store (``serve``, ``project --serve``):
    the console's "Write a new revision" button. Nothing is written when the new report would
    say what the latest revision says (its digest is the same).

    Args:
        con: the store's connection (the console's own, or the projector's).
        period: a period's folder (``<reports>/<label>``) with its ``manifest.json``.
        now: the report's as-of time (timezone-aware).
        property_name: as :func:`run_due` (resolved settings).
        review_due: as :func:`run_due`.
        console_url: as :func:`run_due`.
        grace: as :func:`run_due`.
        max_listed: as :func:`run_due`.
        archive: as :func:`run_due`.
        signer: as :func:`run_due`.
        control: see :func:`run_due`.

    Returns:
        The new revision's folder, or None when nothing changed.

    Raises:
        LookupError: the folder holds no readable manifest (no period written there).
        projections.archive.ArchiveError: the archived months' folder is missing.
    """
    info = _manifest(period)
    if info is None:
        raise LookupError(f"no period report at {period.name}")
    start, end, zone, label = info
    last = latest(period)
    previous = last["digest"] if last is not None else None
    grace = DEFAULT_GRACE if grace is None else grace
    with reading_archive(con, archive) as reader:
        options = _ReportOptions(
            now, property_name, review_due, console_url, grace, max_listed, archive, signer, control
        )
        return _next_revision(reader, period, (start, end, zone, label), previous, options)


@dataclass(frozen=True)
class _ReportOptions:
    """What every revision of a period's report is written with (as :func:`run_due`'s arguments)."""

    now: datetime
    property_name: str | None
    review_due: ReviewDue | None
    console_url: str | None
    grace: timedelta
    max_listed: int | None
    archive: Path | None
    signer: Ed25519PrivateKey | None = None
    control: ControlArgs | None = None


def _next_revision(
    con: duckdb.DuckDBPyConnection,
    folder: Path,
    period: tuple[datetime, datetime, str, str],
    previous: str | None,
    options: _ReportOptions,
) -> Path | None:
    """THE writing of a period's next report revision, for the schedule and the console alike:
    the report of ``period`` (start, end, IANA zone, label) into ``folder``'s next revision, kept
    only if its digest differs from ``previous`` (None: always kept).

    Returns:
        The new revision's folder, or None when the report says what ``previous`` said.
    """
    start, end, zone, label = period

    def write(tmp: Path, number: int) -> bool:
        files = write_report(
            con,
            tmp,
            start,
            end,
            None,  # the title from the property and the period (report_title)
            tz=ZoneInfo(zone),
            property_name=options.property_name,
            review_due=options.review_due,
            generated_at=options.now,
            console_url=options.console_url,
            grace=options.grace,
            revision=number,
            max_listed=options.max_listed,
            archive=options.archive,
            control=options.control,
        )
        return files.report is None or files.report["digest"] != previous

    info = {"label": label, "start": start.isoformat(), "end": end.isoformat(), "zone": zone}
    return add_revision(folder, write, info, options.signer)
