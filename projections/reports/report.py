"""The compliance report: HTML (jinja2) plus ``findings.csv`` and ``findings.parquet``.

Reads the store read-only. All queries are parameterised (``projections/store/sql/rpt_*.sql``); the
HTML escapes every value taken from events. The output depends only on the store and the period,
so a re-run writes the same files.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import duckdb
import jinja2
import pyarrow as pa
from markupsafe import Markup

from projections.display.spreadsheet import neutralise_table
from projections.display.timefmt import iso_local, iso_utc, parsed, show, span, stamp, zone_name
from projections.models import incidents as incident_model
from projections.models import reviews
from projections.models.control import DEALER_SLOT, ChartSpec, ControlArgs
from projections.models.generations import generation_diff, generation_info
from projections.records import property as stored_property
from projections.records import signoff, staff
from projections.reports import executive
from projections.store.archive import event_sources, reading_archive
from projections.store.private import make_private, make_private_dirs, open_private, write_private_text
from projections.store.sql_files import read_sql
from projections.store.store import connect_read_only
from streams.engine.catalog import RULEBOOK_REVISION, RULES_BY_ID

FAR_PAST = datetime(1970, 1, 1, tzinfo=UTC)
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)
SEVERITIES = ("voiding", "integrity", "procedural")
SEVERITY_MEANING = {
    "voiding": "the rules void the round or its wagers (a remedy is required)",
    "integrity": "the deck, a device or the trail itself cannot be trusted as dealt",
    "procedural": "a dealing procedure was not followed; the round stands",
}


@dataclass(frozen=True)
class ReportFiles:
    """Where a report was written."""

    html: Path
    csv: Path
    parquet: Path
    findings: int
    summary: Path
    report: Mapping[str, Any] | None = None
    """The ``report`` section of ``summary.json``: status, as-of, coverage, digest (see :func:`write_report`)."""


def query(
    con: duckdb.DuckDBPyConnection,
    name: str,
    start: datetime | None = None,
    end: datetime | None = None,
    table_id: str | None = None,
    **extra: Any,
) -> pa.Table:
    """Run ``projections/store/sql/<name>.sql`` for the period [start, end) as an Arrow table.

    Args:
        con: a (read-only) connection.
        name: the query file's stem, e.g. ``rpt_findings``.
        start: start of the period, inclusive (timezone-aware); None means unbounded.
        end: end of the period, exclusive; None means unbounded.
        table_id: restrict to one table (bound as a parameter, never spliced into SQL).
        **extra: further parameters the query names (e.g. ``consequences`` of ``rpt_by_dealer``).

    A query that names ``{live_events}`` or ``{archived_events}`` gets the store's own table
    and its archived months there (:func:`projections.store.archive.event_sources`).
    """
    params = {"start": start or FAR_PAST, "end": end or FAR_FUTURE, "table_id": table_id, **extra}
    sql = read_sql(f"{name}.sql")
    if "{live_events}" in sql:
        for placeholder, source in event_sources(con).items():
            sql = sql.replace("{" + placeholder + "}", source)
    return con.sql(sql, params=params).to_arrow_table()


def _svg(fig: Any) -> str:
    """A matplotlib figure as inline SVG, the same bytes on every run (fixed ids, no date)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.StringIO()
    plt.rcParams["svg.hashsalt"] = "dealtrail"
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg") :]


def time_slots(rows: list[dict[str, Any]], tz: tzinfo = UTC) -> tuple[int, dict[datetime, Counter[str]]]:
    """Findings per time slot and severity for the chart over time: ``(minutes per slot, {slot
    start (wall clock of tz, naive): counts by severity})``, every slot from the first finding's
    to the last one's present, in order (a slot without a finding is all zeros, never skipped).
    Slots are 60 minutes when the findings span more than 6 hours, else 15."""
    if not rows:
        return 60, {}
    times = [r["detected_at"].astimezone(tz).replace(tzinfo=None) for r in rows]
    span = max(times) - min(times)
    minutes = 60 if span > timedelta(hours=6) else 15
    found: dict[datetime, Counter[str]] = defaultdict(Counter)
    for t, r in zip(times, rows, strict=True):
        found[t.replace(minute=t.minute - t.minute % minutes, second=0, microsecond=0)][r["severity"]] += 1
    slots: dict[datetime, Counter[str]] = {}
    slot, last = min(found), max(found)
    while slot <= last:
        slots[slot] = found.get(slot, Counter())
        slot += timedelta(minutes=minutes)
    return minutes, slots


def _chart_svg(rows: list[dict[str, Any]], tz: tzinfo = UTC) -> str:
    """Findings per hour, stacked by severity, as an inline SVG (empty string if no finding);
    the time axis is the wall clock of ``tz``, labelled."""
    if not rows:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    minutes, buckets = time_slots(rows, tz)
    hours = list(buckets)
    fig, ax = plt.subplots(figsize=(9, 3), dpi=100)
    bottom = [0] * len(hours)
    colours = {"voiding": "#b2182b", "integrity": "#ef8a62", "procedural": "#67a9cf"}
    for sev in SEVERITIES:
        vals = [buckets[h][sev] for h in hours]
        ax.bar(hours, vals, width=minutes / 1440 * 0.9, bottom=bottom, label=sev, color=colours[sev], align="edge")  # type: ignore[arg-type]
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel(f"findings per {minutes} min" if minutes != 60 else "findings per hour")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"time ({zone_name(tz)})")
    ax.legend(loc="upper right", fontsize=8)
    fig.autofmt_xdate()
    return _svg(fig)


def _env(tz: tzinfo = UTC) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("projections.reports", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )

    def when(value: datetime | str) -> str:
        return show(datetime.fromisoformat(value) if isinstance(value, str) else value, tz)

    def stamp(value: datetime) -> str:
        # the date and time with its offset; the column header names the zone
        return show(value, tz).rsplit(" ", 1)[0]

    env.filters["when"] = when
    env.filters["stamp"] = stamp
    return env


CONSEQUENCE_RULES = ("DT-remedy-overdue", "DT-chain-broken")
"""Rules whose finding can be the consequence of another (``cause_finding_id`` in ``rpt_findings``)."""


def incidents(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The finding rows that count as incidents: every row but the consequences shown under
    their cause (a DT-remedy-overdue under the voiding finding whose remedy was skipped, a
    DT-chain-broken under the DT-sequence-gap that broke the chain; see ``rpt_findings.sql``)."""
    return [f for f in findings if not f.get("cause_finding_id")]


def consequences_by_cause(findings: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The consequence rows of ``findings`` keyed by the finding ID of their cause."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in findings:
        if f.get("cause_finding_id"):
            out[f["cause_finding_id"]].append(f)
    return dict(out)


def summarise(findings: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's aggregates over finding rows (as from ``rpt_findings``), counting incidents:
    a consequence (``cause_finding_id`` set) is left out here and shown under its cause."""
    findings = incidents(findings)
    by_rule: dict[str, Counter[str]] = defaultdict(Counter)
    revisions: dict[str, set[int]] = defaultdict(set)
    for f in findings:
        by_rule[f["rule_id"]][f["status"]] += 1
        revisions[f["rule_id"]].add(int(f.get("rulebook_revision") or 1))
    rules = []
    for rule_id, counts in sorted(by_rule.items()):
        spec = RULES_BY_ID.get(rule_id)
        rules.append(
            {
                "rule_id": rule_id,
                "citation": spec.citation if spec else "",
                "summary": spec.summary if spec else "",
                "severity": spec.severity.value if spec else "",
                "provisional": bool(spec and spec.provisional),
                "integrity": rule_id.startswith("DT-"),
                "total": sum(counts.values()),
                "open": counts["open"],
                "remedied": counts["remedied"],
                "overdue": counts["overdue"],
                "rulebook_revisions": ", ".join(str(r) for r in sorted(revisions[rule_id])),
            }
        )
    by_game_sev: dict[str, Counter[str]] = defaultdict(Counter)
    by_table: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for f in findings:
        by_game_sev[f["game"]][f["severity"]] += 1
        by_table[(f["game"], f["table_id"])][f["severity"]] += 1
    return {
        "total": len(findings),
        "by_severity": Counter(f["severity"] for f in findings),
        "by_status": Counter(f["status"] for f in findings),
        "by_game": {g: dict(c) for g, c in sorted(by_game_sev.items())},
        "by_table": [
            {"game": g, "table_id": t, **{s: c[s] for s in SEVERITIES}, "total": sum(c.values())}
            for (g, t), c in sorted(by_table.items())
        ],
        "rules": rules,
        "regulation_rules": [r for r in rules if not r["integrity"]],
        "integrity_rules": [r for r in rules if r["integrity"]],
    }


def _with_rulebook_revisions(con: duckdb.DuckDBPyConnection, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Finding rows with the ``rulebook_revision`` each was judged under (1 in a store written
    before the column existed, which a read-only connection cannot add)."""
    has_column = con.execute(
        "SELECT count(*) FROM information_schema.columns"
        " WHERE table_name = 'findings' AND column_name = 'rulebook_revision'"
    ).fetchall()
    revision: dict[str, int] = {}
    if has_column[0][0]:
        # dim_findings: the generation being reported (a finding keeps its revision across its revisions)
        rows = con.execute("SELECT finding_id, rulebook_revision FROM dim_findings").fetchall()
        revision = {str(fid): int(rev) for fid, rev in rows}
    return [{**f, "rulebook_revision": revision.get(f["finding_id"], 1)} for f in findings]


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def build_summary(
    con: duckdb.DuckDBPyConnection,
    findings: list[dict[str, Any]],
    start: datetime | None,
    end: datetime | None,
    review_due: reviews.ReviewDue | None = None,
    as_of: datetime | None = None,
    reviews_until: datetime | None = None,
) -> dict[str, Any]:
    """Every figure of the report, JSON-ready (``summary.json`` holds exactly these).

    The incident counts (``findings``: total, records, by severity, status and table, the open
    split; ``reviews``) come from the incidents read model (:mod:`projections.models.incidents`), the
    same as the CLI, the console, the API and the digest. ``as_of`` is the instant review
    lateness is judged at (None: the period's end or its last detection, whichever is earlier);
    ``reviews_until`` the report's as-of time: reviews made after it are not counted (None: every
    review).

    Keys: ``period`` (``start`` and ``end`` as asked, None when unbounded; ``first_event`` and
    ``last_event``: the first and last dealing event in it), ``rounds`` (total, voided, by game,
    by table), ``findings`` (``total`` counts incidents: every finding but the consequences shown
    under their cause, see :func:`incidents`; ``records`` counts every finding row, as in the CSV;
    ``consequences``: rule -> consequences left out of the counts; by severity, status, game,
    rule and table count incidents; ``by_status.open``
    counts every open incident, split into ``open_remedy_owed``, a remedy owed and the next round
    not started yet, and ``open_no_remedy``, no remedy prescribed and left for review;
    ``remedy_overdue_records`` counts the DT-remedy-overdue records, each the
    consequence of a finding counted ``overdue``, not another incident; ``per_1000_rounds``:
    findings per 1,000 rounds dealt by game and by table, None without a round), ``dealers``
    (rounds and findings per dealer, with ``per_1000_rounds``),
    ``stub_compliance`` (per table: rounds, exempt, with a count, longest run without one),
    ``remedies`` (owed, done on time, done late, open, overdue, delays in seconds),
    ``device_faults`` (each fault and the findings that followed), ``data_quality`` (sequence
    gaps, chain breaks caused by one of them (``chain_breaks_after_gap``) and without one
    (``chain_breaks_alone``), ``incidents``: the gaps plus the chain breaks alone, unverifiable
    rounds, dead letters dated in the period and undated, and both by reason
    in ``dead_letters_by_reason``: reason -> ``{"in_period": n, "undated": n}``;
    ``dead_letters_unattributable``, and ``"unattributable"`` by reason, only when not 0: counted
    rejected lines whose stated times meet the period but do not all fall in it, see
    docs/integrity.md). Times are ISO
    8601 in UTC; ``period.events`` counts the dealing events in the period, and
    ``period.no_events`` is true when there is none (nothing was audited: no finding and no
    remedy means nothing then). ``reviews``
    (incidents by review status, the NOT_A_VIOLATION dispositions apart, by cause, how many
    reviews are late at ``reviews.as_of`` and how many of those are still not disposed; late is
    None without ``review_due``). ``findings.open`` is every open incident.
    """
    rounds = query(con, "rpt_rounds", start, end).to_pylist()
    by_game: Counter[str] = Counter()
    for r in rounds:
        by_game[r["game"]] += r["rounds"]
    agg = summarise(findings)
    events = query(con, "rpt_event_count", start, end).to_pylist()[0]["events"]
    quality = query(con, "rpt_data_quality", start, end).to_pylist()[0]
    # a figure that is 0 (every dead letter's time attributable) is left out: a report then says
    # what it said before there were counted groups, and its digest is the same
    if not quality["dead_letters_unattributable"]:
        del quality["dead_letters_unattributable"]
    quality["dead_letters_by_reason"] = {
        r["reason"]: {"in_period": r["in_period"], "undated": r["undated"]}
        | ({"unattributable": r["unattributable"]} if r["unattributable"] else {})
        for r in query(con, "rpt_dead_letters_by_reason", start, end).to_pylist()
    }
    span = query(con, "rpt_span", start, end).to_pylist()[0]
    consequence_ids = [f["finding_id"] for f in findings if f.get("cause_finding_id")]
    dealers = query(con, "rpt_by_dealer", start, end, consequences=consequence_ids).to_pylist()
    for d in dealers:
        d["per_1000_rounds"] = per_1000(d["findings"], d["rounds"])
    by_table_rounds = {r["table_id"]: r["rounds"] for r in rounds}
    game_findings = {g: sum(c.values()) for g, c in agg["by_game"].items()}
    # a DT-remedy-overdue is the consequence of its cause's overdue remedy, not a remedy owed itself
    consequences = [f for f in findings if f["rule_id"] == "DT-remedy-overdue"]
    gaps = {f["finding_id"] for f in findings if f["rule_id"] == "DT-sequence-gap"}
    breaks = [f for f in findings if f["rule_id"] == "DT-chain-broken"]
    quality["chain_breaks_after_gap"] = sum(1 for f in breaks if f.get("cause_finding_id") in gaps)
    quality["chain_breaks_alone"] = sum(1 for f in breaks if not f.get("cause_finding_id"))
    quality["incidents"] = len(gaps) + quality["chain_breaks_alone"]
    late_at = as_of if as_of is not None else _review_as_of(findings, end)
    scope = reviews.FindingFilter(start=start, end=end)
    counted = incident_model.counts(con, review_due, late_at, scope, reviews_until)
    per_table = incident_model.counts_by_table(con, review_due, late_at, scope, reviews_until)
    figures: dict[str, Any] = _jsonable(
        {
            "period": {
                "start": start,
                "end": end,
                "first_event": span["first_event"],
                "last_event": span["last_event"],
                "events": events,
                "no_events": events == 0,
            },
            "rounds": {
                "total": sum(r["rounds"] for r in rounds),
                "voided": sum(r["voided_rounds"] for r in rounds),
                "by_game": dict(sorted(by_game.items())),
                "by_table": {r["table_id"]: r["rounds"] for r in rounds},
            },
            "findings": {
                "total": counted.incidents,
                "records": counted.records,
                "consequences": {
                    rule: sum(1 for f in findings if f["rule_id"] == rule and f.get("cause_finding_id"))
                    for rule in CONSEQUENCE_RULES
                },
                "by_severity": {s: counted.by_severity[s] for s in SEVERITIES},
                "by_status": dict(sorted(counted.by_status.items())),
                "open": counted.open,
                "open_remedy_owed": counted.open_remedy_owed,
                "open_no_remedy": counted.open_no_remedy,
                "remedy_overdue_records": len(consequences),
                "by_game": agg["by_game"],
                "by_rule": {r["rule_id"]: r["total"] for r in agg["rules"]},
                "by_table": {t: c.incidents for t, c in per_table.items()},
                "per_1000_rounds": {
                    "by_game": {g: per_1000(game_findings.get(g, 0), n) for g, n in sorted(by_game.items())},
                    "by_table": {
                        t: per_1000(per_table[t].incidents if t in per_table else 0, n)
                        for t, n in sorted(by_table_rounds.items())
                    },
                },
            },
            "dealers": dealers,
            "stub_compliance": query(con, "rpt_stub_compliance", start, end).to_pylist(),
            "remedies": query(con, "rpt_remedies", start, end).to_pylist()[0],
            "device_faults": query(con, "rpt_device_faults", start, end).to_pylist(),
            "data_quality": quality,
            "reviews": {
                **reviews.summary(con, start, end, late_at, review_due, reviews_until=reviews_until),
                "as_of": late_at,
            },
        }
    )
    return figures


def per_1000(findings: int, rounds: int) -> float | None:
    """Findings per 1,000 rounds dealt, to one decimal (None when no round was dealt)."""
    return round(findings * 1000 / rounds, 1) if rounds else None


def _review_as_of(findings: list[dict[str, Any]], end: datetime | None) -> datetime:
    """The instant a report judges review lateness at: the period's end, or its last detection
    when that is earlier (so a re-run of the same period writes the same figures)."""
    last = max((f["detected_at"] for f in findings), default=FAR_PAST)
    return min(end, last) if end is not None else last


GAME_NAMES = {"C691": "Chapter 691 games", "PGP": "Pai Gow Poker", "TCP": "Three Card Prime"}
LISTED_SEVERITIES = ("voiding", "integrity")
"""Severities whose incidents the report lists one by one; procedural ones are summarised by rule."""
TOP = 5
"""How many tables and dealers "Where to look first" shows."""


@dataclass(frozen=True)
class ConsoleLinks:
    """Links from a report to the compliance console's pages.

    ``base`` is the console's address (``DEALTRAIL_CONSOLE__URL``, e.g.
    ``https://console.example``), or ``""`` for paths relative to the page's own host (the
    console serving a report itself), or None: no console, no links (a report read from a mail
    or a shared folder would otherwise link to nothing).
    """

    base: str | None

    def _url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        if self.base is None:
            return ""
        q = {k: v for k, v in (query or {}).items() if v}
        return self.base.rstrip("/") + path + ("?" + urlencode(q) if q else "")

    def finding(self, finding_id: str) -> str:
        """The finding's page (``/findings/{id}``), or "" without a console."""
        return self._url(f"/findings/{quote(finding_id, safe='')}")

    def dealer(self, dealer_id: str | None) -> str:
        """The dealer's page (``/dealers/{id}``), or "" without a console or a dealer."""
        return self._url(f"/dealers/{quote(dealer_id, safe='')}") if dealer_id else ""

    def table(self, table_id: str) -> str:
        """The table's page (``/tables/{id}``), or "" without a console."""
        return self._url(f"/tables/{quote(table_id, safe='')}")

    def findings(self, start: datetime | None, end: datetime | None, **filters: str) -> str:
        """The console's findings list filtered to the period and ``filters`` (its query names:
        rule, severity, table, dealer, ...), or "" without a console."""
        period = {"from": iso_utc(start) if start else "", "to": iso_utc(end) if end else ""}
        return self._url("/findings", {**period, **filters})


def rule_label(rule_id: str, width: int = 70) -> str:
    """A readable name for a rule: the catalogue's one-sentence summary, cut at a word within
    ``width`` characters (the rule ID when the catalogue does not know it)."""
    spec = RULES_BY_ID.get(rule_id)
    if spec is None or not spec.summary:
        return rule_id
    text = spec.summary.rstrip(".")
    if len(text) <= width:
        return text
    return text[: text.rfind(" ", 0, width - 1)].rstrip(",;:") + "\u2026"


def _rule_chart_svg(findings: list[dict[str, Any]]) -> str:
    """Findings by rule, one panel per game, bars labelled with readable rule names (inline
    SVG; empty string if none)."""
    if not findings:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    by_game: dict[str, Counter[str]] = defaultdict(Counter)
    for f in findings:
        by_game[f["game"]][f["rule_id"]] += 1
    games = sorted(by_game)
    sizes = [len(by_game[g]) for g in games]
    fig, axes = plt.subplots(
        len(games),
        1,
        figsize=(10, 0.24 * sum(sizes) + 0.9 * len(games) + 0.5),
        dpi=100,
        gridspec_kw={"height_ratios": [n + 2 for n in sizes]},
        squeeze=False,
    )
    for ax, game in zip(axes[:, 0], games, strict=True):
        items = sorted(by_game[game].items(), key=lambda kv: (kv[1], kv[0]))
        colours = ["#8c8c8c" if k.startswith("DT-") else "#4d7ea8" for k, _ in items]
        ax.barh([rule_label(k) for k, _ in items], [v for _, v in items], color=colours)
        ax.set_title(GAME_NAMES.get(game, game), loc="left", fontsize=10, fontweight="bold")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(axis="y", labelsize=8)
    axes[-1, 0].set_xlabel("findings (grey: dealtrail integrity checks)")
    return _svg(fig)


FINAL, PROVISIONAL = "final", "provisional"
"""A period report's status: final once its period's trail is in (see :func:`judge_status`)."""


def judge_status(
    con: duckdb.DuckDBPyConnection,
    start: datetime | None,
    end: datetime | None,
    grace: timedelta,
    tz: tzinfo = UTC,
) -> dict[str, Any] | None:
    """Whether the report of [start, end) is final or provisional, judged on event time only.

    The report is final once every table that dealt in the period (has a dealing event in it)
    has a stored event at or after ``end`` (its trail has moved past the period), or once the
    grace time has passed *in event time*: the newest dealing event stored, at any table, is at
    or after ``end + grace``. A period without any dealing event is final by the grace time only.
    The wall clock plays no part, so a store that receives no more events keeps the status it
    has (a floor's last period stays provisional until the trail goes on or grace passes).
    An unbounded period (``end`` None) is never judged: None.

    Args:
        con: any connection to the store.
        start: start of the period, inclusive (None: unbounded).
        end: end of the period, exclusive (None: the status is not judged).
        grace: how far past ``end`` the newest stored event must be for the report to be final
            however many tables have not yet dealt past the end (event time).
        tz: the zone the reason's one time is shown in (the casino's), to the second with its
            offset; ``final_on`` and ``newest_event`` stay UTC instants.

    Only stored events count, and the store holds only events that passed the intake's clock
    check (``recorded_in_future``: :func:`streams.engine.check_recorded`): an event stamped in
    2099 never reaches it, so it cannot make an open period final.

    Returns:
        ``{"status": "final" | "provisional", "reason": text, "waiting_for": [table IDs that
        dealt in the period with no event at or after its end yet], "newest_event": ISO time
        or None, "final_on": [{"table_id", "seq", "event_id", "occurred_at"} of each table's
        last stored event that made the report final: every table that dealt in the period,
        or the tables whose last event is past the end + grace; empty when provisional]}``;
        None when ``end`` is None.
    """
    if end is None:
        return None
    rows = con.execute(
        """WITH dealt AS (SELECT DISTINCT table_id FROM events WHERE occurred_at >= $start AND occurred_at < $end),
                past AS (SELECT DISTINCT table_id FROM events WHERE occurred_at >= $end)
           SELECT d.table_id FROM dealt d ANTI JOIN past p USING (table_id) ORDER BY 1""",
        {"start": start or FAR_PAST, "end": end},
    ).fetchall()
    waiting = [str(r[0]) for r in rows]
    newest_rows = con.execute("SELECT max(occurred_at) FROM events").fetchall()
    newest: datetime | None = newest_rows[0][0] if newest_rows else None
    dealt = con.execute(
        "SELECT count(*) FROM events WHERE occurred_at >= $start AND occurred_at < $end",
        {"start": start or FAR_PAST, "end": end},
    ).fetchall()[0][0]
    grace_text = f"{grace.total_seconds() / 60:g} min"
    by_tables = bool(dealt and not waiting)
    final_on: list[dict[str, Any]] = []
    if by_tables or (newest is not None and newest >= end + grace):
        final_on = _last_events(con, start, end, grace, by_tables)
    named = ""
    if final_on:  # the tables by ID and one time, the latest; each table's seq and time are in final_on
        latest = max(datetime.fromisoformat(t["occurred_at"]) for t in final_on)
        named = (
            f"; made final by the last events of {len(final_on)} table(s) "
            f"({', '.join(t['table_id'] for t in final_on)}), the latest at {stamp(latest, tz)}"
        )
    if by_tables:
        status, reason = FINAL, "every table that dealt in the period has an event at or after its end" + named
    elif newest is not None and newest >= end + grace:
        status = FINAL
        reason = f"the newest stored event ({stamp(newest, tz)}) is past the period's end + {grace_text}" + named
    else:
        status = PROVISIONAL
        reason = (
            f"{len(waiting)} table(s) that dealt in the period have no event at or after its end yet, and the "
            if waiting
            else "no dealing event in the period yet, and the "
        ) + f"newest stored event is not yet {grace_text} past its end: events may still arrive"
    return {
        "status": status,
        "reason": reason,
        "waiting_for": waiting,
        "newest_event": iso_utc(newest) if newest is not None else None,
        "final_on": final_on,
    }


def _last_events(
    con: duckdb.DuckDBPyConnection, start: datetime | None, end: datetime, grace: timedelta, by_tables: bool
) -> list[dict[str, Any]]:
    """The last stored event of each table that makes the report of [start, end) final (see
    :func:`judge_status`): every table that dealt in the period (``by_tables``), else each
    table whose last event is at or after ``end + grace``; by table ID."""
    rows = con.execute(
        """WITH last AS (SELECT table_id, seq, event_id, occurred_at FROM events
                         QUALIFY row_number() OVER (PARTITION BY table_id ORDER BY occurred_at DESC, seq DESC) = 1)
           SELECT table_id, seq, event_id, occurred_at FROM last
           WHERE CASE WHEN $by_tables
                      THEN table_id IN (SELECT table_id FROM events WHERE occurred_at >= $start AND occurred_at < $end)
                      ELSE occurred_at >= $after END
           ORDER BY table_id""",
        {"start": start or FAR_PAST, "end": end, "after": end + grace, "by_tables": by_tables},
    ).fetchall()
    return [
        {"table_id": str(t), "seq": int(seq), "event_id": str(e), "occurred_at": iso_utc(at)} for t, seq, e, at in rows
    ]


def coverage(
    con: duckdb.DuckDBPyConnection, start: datetime | None, end: datetime | None, as_of: datetime | None
) -> dict[str, Any]:
    """What a report of [start, end) as of ``as_of`` covers, JSON-ready.

    Keys: ``as_of`` (ISO time or None: every review), ``generation`` (of the findings),
    ``tables`` (per table that dealt in the period: ``events``, ``last_seq`` and
    ``last_event_at``, the last event included), ``reviews`` (the review watermark: ``count``
    of review events on the period's findings made up to ``as_of``, ``last_review_id`` and
    ``last_reviewed_at`` of the latest of them), ``finding_revisions`` (stored revisions of the
    findings detected in the period, this generation), ``rounds`` (rounds completed in it) and
    ``dead_letters`` (dead letters dated in it; and ``dead_letters_unattributable`` when not 0:
    counted ones whose stated times are partly in it). Two reports with the same coverage but for
    ``as_of`` read the same rows (dead letters without a date apart).

    Args:
        con: any connection; the generation reported is the one the session names (see
            ``SET VARIABLE dealtrail_generation``), else the latest.
        start: start of the period, inclusive (None: unbounded).
        end: end of the period, exclusive (None: unbounded).
        as_of: reviews made after it are not covered (timezone-aware); None: every review.
    """
    params = {"start": start or FAR_PAST, "end": end or FAR_FUTURE}
    tables = {
        str(t): {"events": int(n), "last_seq": int(seq), "last_event_at": iso_utc(at)}
        for t, n, seq, at in con.execute(
            """SELECT table_id, count(*), max(seq), max(occurred_at) FROM events
               WHERE occurred_at >= $start AND occurred_at < $end GROUP BY table_id ORDER BY table_id""",
            params,
        ).fetchall()
    }
    generation = con.execute(
        "SELECT coalesce(getvariable('dealtrail_generation'), (SELECT max(generation) FROM generations), 1)"
    ).fetchall()[0][0]
    revisions = con.execute(
        """SELECT count(*) FROM findings_generation WHERE finding_id IN
               (SELECT finding_id FROM fct_detections WHERE observed_at >= $start AND observed_at < $end)""",
        params,
    ).fetchall()[0][0]
    rounds = con.execute(
        "SELECT count(*) FROM rounds WHERE completed_at >= $start AND completed_at < $end", params
    ).fetchall()[0][0]
    quality = query(con, "rpt_data_quality", start, end).to_pylist()[0]
    dead = quality["dead_letters"]
    watermark: dict[str, Any] = {"count": 0, "last_review_id": None, "last_reviewed_at": None}
    if reviews.has_console_tables(con):
        row = con.execute(
            """SELECT count(*), arg_max(review_id, (reviewed_at, review_id)), max(reviewed_at) FROM reviews
               WHERE reviewed_at <= $as_of AND finding_id IN
                     (SELECT finding_id FROM fct_detections WHERE observed_at >= $start AND observed_at < $end)""",
            {**params, "as_of": as_of or FAR_FUTURE},
        ).fetchall()[0]
        watermark = {
            "count": int(row[0]),
            "last_review_id": row[1],
            "last_reviewed_at": iso_utc(row[2]) if row[2] is not None else None,
        }
    return {
        "as_of": iso_utc(as_of) if as_of is not None else None,
        "generation": int(generation),
        "tables": tables,
        "reviews": watermark,
        "finding_revisions": int(revisions),
        "rounds": int(rounds),
        "dead_letters": int(dead),
        # only when not 0: the coverage of a report without one is what it was before
        **(
            {"dead_letters_unattributable": int(quality["dead_letters_unattributable"])}
            if quality["dead_letters_unattributable"]
            else {}
        ),
    }


def report_digest(
    figures: Mapping[str, Any],
    findings: list[dict[str, Any]],
    review_rows: Mapping[str, Mapping[str, Any]],
    status: str | None,
) -> str:
    """The SHA-256 (hex) of what a report says: its figures, its finding rows, each finding's
    review status, assignee and late flag, and its status. Two revisions of a period's report
    with the same digest say the same thing; the as-of time, the revision number and the count
    of dead letters without a date (store-wide, not the period's) are left out."""
    figs = json.loads(json.dumps(_jsonable(dict(figures))))
    quality = figs.get("data_quality", {})
    quality.pop("dead_letters_undated", None)
    for counts in quality.get("dead_letters_by_reason", {}).values():
        counts.pop("undated", None)
    quality["dead_letters_by_reason"] = {
        k: v for k, v in quality.get("dead_letters_by_reason", {}).items() if any(v.values())
    }
    said = {
        "figures": figs,
        # the roster's names are left out: naming a dealer changes no fact of the period
        "findings": _jsonable([{k: v for k, v in f.items() if k != "dealer_name"} for f in findings]),
        "reviews": {
            fid: [r.get("review_status"), r.get("assignee"), bool(r.get("review_late"))]
            for fid, r in sorted(review_rows.items())
        },
        "status": status,
    }
    text = json.dumps(said, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


REVIEW_COLUMNS = ("review_status", "disposed_by", "approved_by")
"""The review columns ``findings.csv`` and ``findings.parquet`` carry after each finding's own,
as of the report's as-of time, named as in the console's export."""


def _with_review_columns(table: pa.Table, review_rows: Mapping[str, Mapping[str, Any]]) -> pa.Table:
    """``table`` (the report's finding rows) with :data:`REVIEW_COLUMNS` from ``review_rows``
    (by finding ID; a finding without a row, or a store without the console's tables, is
    ``unreviewed`` with no names)."""
    ids = table.column("finding_id").to_pylist()
    for name in REVIEW_COLUMNS:
        default = "unreviewed" if name == "review_status" else None
        values = [review_rows.get(str(i), {}).get(name, default) for i in ids]
        table = table.append_column(name, pa.array([None if v is None else str(v) for v in values], pa.string()))
    return table


def local_times(table: pa.Table, tz: tzinfo) -> pa.Table:
    """``table`` with every timestamp column written as ISO 8601 text in ``tz`` with its offset
    (:func:`projections.display.timefmt.iso_local`, as the console's export writes them): the
    ``findings.csv`` a person opens reads in the casino's time; the Parquet keeps typed UTC instants.

    Args:
        table: the finding rows (Arrow).
        tz: the casino's zone.

    Returns:
        A new table: the same columns, each timestamp column now text (null stays null).
    """
    for i, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type):
            values = [None if v is None else iso_local(v, tz) for v in table.column(i).to_pylist()]
            table = table.set_column(i, pa.field(field.name, pa.string()), pa.array(values, pa.string()))
    return table


def report_title(
    property_name: str | None,
    start: datetime | None,
    end: datetime | None,
    tz: tzinfo = UTC,
    trail: tuple[object, object] | None = None,
) -> str:
    """A report's title as a regulator reads it: the property and the period in the casino's zone,
    e.g. ``Compliance report, Riverside Casino: 2026-11-27 14:00-05:00 to 22:00-05:00
    America/New_York`` (an unbounded period: from or to the trail's first or last event; the
    whole trail, with ``trail`` its first and last dealing events, as ``every event stored, ...``)."""
    from projections.records.property import NOT_NAMED

    first, last = (parsed(trail[0]), parsed(trail[1])) if trail is not None else (None, None)
    if start is not None and end is not None:
        period = span(start, end, tz)
    elif start is None and end is None and first is not None and last is not None:
        period = f"every event stored, {span(first, last, tz)}"
    else:
        period = f"{show(start, tz) if start else 'the first event'} to {show(end, tz) if end else 'the last event'}"
    return f"Compliance report, {property_name or NOT_NAMED}: {period}"


def _control_section(
    con: duckdb.DuckDBPyConnection,
    start: datetime | None,
    end: datetime | None,
    tz: tzinfo,
    control: ControlArgs | None,
    as_of: datetime | None,
) -> dict[str, Any]:
    """The report's control charts (issue 50), with the resolved settings or their defaults."""
    from projections.reports.control_chart import report_section

    if control is None:
        d = ChartSpec("dealer", DEALER_SLOT)
        control = (d.min_rounds, d.cusum_k, d.cusum_h, DEALER_SLOT)
    return report_section(con, start, end, str(getattr(tz, "key", "UTC")), *control, as_of)


def write_report(
    db: str | os.PathLike[str] | duckdb.DuckDBPyConnection,
    out: str | os.PathLike[str],
    start: datetime | None = None,
    end: datetime | None = None,
    title: str | None = None,
    tz: tzinfo = UTC,
    generation: int | None = None,
    review_due: reviews.ReviewDue | None = None,
    property_name: str | None = None,
    generated_at: datetime | None = None,
    console_url: str | None = None,
    as_of: datetime | None = None,
    grace: timedelta | None = None,
    revision: int | None = None,
    max_listed: int | None = None,
    archive: Path | None = None,
    control: ControlArgs | None = None,
) -> ReportFiles:
    """Write ``report.html``, ``findings.csv``, ``findings.parquet`` and ``summary.json`` for
    [start, end) into ``out`` (files owner-only, missing folders 0700).

    The Parquet and JSON hold UTC instants; the HTML shows times in ``tz``, labelled, and the CSV
    writes them in ``tz`` as ISO 8601 with the offset (:func:`local_times`). The
    output is the same on every host, whatever its time zone. The folder is made only once the
    store is open, so a missing store leaves no empty folder behind.

    Args:
        db: the store's path (opened read-only) or an open connection (the writer's own, as the
            projector passes when it writes scheduled reports itself).
        out: the folder.
        start: start of the period, inclusive (timezone-aware; None: unbounded).
        end: end of the period, exclusive (None: unbounded).
        title: the page title (None: :func:`report_title`, from the property and the period).
        tz: the zone the HTML and the CSV show times in (``datetime.UTC`` or a ``ZoneInfo``).
        generation: the generation of findings to report (None: the latest); the page also
            shows, per rule, what it changed against the generation before.
        review_due: review due times per severity (from the settings); None: lateness not judged.
        property_name: the casino property shown in the header (the resolved
            ``DEALTRAIL_PROPERTY``); None: none shown.
        generated_at: when the report was generated, shown in the header in UTC (timezone-aware;
            the CLI passes the current time, the schedule its period's end so that a re-run
            writes the same bytes); None: not shown.
        console_url: the console's address the page links findings, dealers and tables to (see
            :class:`ConsoleLinks`; ``""``: paths on the page's own host); None: no links.
        as_of: the report's as-of time (timezone-aware): only reviews made up to it are counted,
            so the same store and the same as-of give the same bytes; None: ``generated_at``,
            and with neither every review stored.
        grace: judge the report final or provisional (:func:`judge_status`) with this grace
            time (event time); None, or an unbounded ``end``: not judged.
        revision: the revision number of a scheduled period's report, shown in its header
            (``dealtrail.reporting.schedule`` writes each in its own folder); None: not a revision.
        max_listed: list at most this many individual voiding and integrity incidents on the
            page (by severity, then time: the most serious first; the resolved
            ``DEALTRAIL_REPORTS__MAX_LISTED``); the page says how many more there are and links
            ``findings.csv``, ``findings.parquet`` and the console's list of the period, so its
            size stays bounded whatever the period. None: every one listed.
        archive: the folder of the store's archived months (the resolved ``--archive`` /
            ``DEALTRAIL_ARCHIVE__DIR``), read with the live rows
            (:func:`projections.store.archive.reading_archive`), so a period reports the same figures
            before and after ``dealtrail archive``; None: the folder the store's manifest names.
        control: the control charts' minimum rounds of a point, CUSUM k and h and the dealers' slot (the resolved
            ``DEALTRAIL_CONTROL__*``): the page draws the charts of the dealers and tables that
            signalled in the period (:func:`projections.reports.control_chart.report_section`),
            judged against the baseline in force at the as-of time; None: the settings' defaults.

    ``summary.json`` holds the figures of :func:`build_summary` and a ``report`` section:
    ``status`` (``final``, ``provisional`` or None when not judged), ``status_reason``,
    ``waiting_for`` (tables without an event past the period's end yet), ``final_on`` (the
    tables' last events that made it final), ``as_of``,
    ``revision``, ``coverage`` (:func:`coverage`) and ``digest`` (:func:`report_digest`).

    Raises:
        FileNotFoundError: no store at ``db``.
        NotADirectoryError: ``out`` (or a folder on its way) is a file.
        LookupError: the store has no generation ``generation``.
        projections.store.archive.ArchiveError: the store has archived months and their folder, or
            a file of it, is missing.
    """
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectoryError(f"{out_dir} is a file, not a folder for the report")
    own = not isinstance(db, duckdb.DuckDBPyConnection)
    store = connect_read_only(db) if own else db  # type: ignore[arg-type]
    assert isinstance(store, duckdb.DuckDBPyConnection)
    csv_path, parquet_path = out_dir / "findings.csv", out_dir / "findings.parquet"
    as_of = as_of or generated_at
    stack = contextlib.ExitStack()
    con = store
    try:
        # the archived months read with the live rows: the same figures before and after `dealtrail archive`
        con = stack.enter_context(reading_archive(store, archive))
        info = generation_info(con, generation)
        diff = generation_diff(con, info.generation, info.previous) if info.previous is not None else []
        # the views read this generation (a session variable: the store is not written)
        con.execute(f"SET VARIABLE dealtrail_generation = {int(info.generation)}")
        if as_of is not None:  # and the reviews made up to the as-of time (dim_review_status)
            con.execute("SET VARIABLE dealtrail_reviews_as_of = $1::TIMESTAMPTZ", [as_of])
        covered = coverage(con, start, end, as_of)
        property_name = stored_property.resolve(con, property_name)
        judged = judge_status(con, start, end, grace, tz) if grace is not None else None
        make_private_dirs(out_dir)
        names = staff.names(con)  # the roster's names: beside each dealer ID on the page and in the exports
        table = staff.with_names(query(con, "rpt_findings", start, end), names)
        findings = _with_rulebook_revisions(con, table.to_pylist())
        stub = query(con, "rpt_stub_compliance", start, end).to_pylist()
        rounds = query(con, "rpt_rounds", start, end).to_pylist()
        # lateness is judged when the report is generated (the console judges it at its now, so
        # both say the same at the same instant); without a time, at the period's last detection
        late_at = generated_at if generated_at is not None else _review_as_of(findings, end)
        figures = build_summary(con, findings, start, end, review_due, as_of=late_at, reviews_until=as_of)
        headline = executive.headline(con, start, end, review_due, late_at, as_of, tz)
        review_rows: dict[str, dict[str, Any]] = {}
        if reviews.has_console_tables(con):
            rows, _ = reviews.find(
                con,
                reviews.FindingFilter(start=start, end=end),
                review_due or reviews.ReviewDue(0, 0, 0),
                late_at,
                reviews_until=as_of,
            )
            review_rows = {r["finding_id"]: r for r in rows}
        video_refs = reviews.video_references(con, start, end, as_of)  # attached in reviews (issue 22)
        control_charts = _control_section(con, start, end, tz, control, as_of)
        for p in (csv_path, parquet_path):  # created owner-only; DuckDB's COPY then rewrites them
            open_private(p, binary=True).close()
        exported = _with_review_columns(table, review_rows)  # as the console's export has them
        # the CSV's times in the casino's zone and its text cells neutralised (a spreadsheet opens
        # it); the Parquet stays raw, with typed UTC instants
        for view, path, form in (
            (neutralise_table(local_times(exported, tz)), csv_path, "csv, HEADER"),
            (exported, parquet_path, "parquet"),
        ):
            con.register("rpt_export", view)
            try:
                con.execute(f"COPY rpt_export TO '{path}' (FORMAT {form})")
            finally:
                con.unregister("rpt_export")
    finally:
        with contextlib.suppress(duckdb.Error):
            con.execute("RESET VARIABLE dealtrail_generation")
        with contextlib.suppress(duckdb.Error):
            con.execute("RESET VARIABLE dealtrail_reviews_as_of")
        stack.close()
        if own:
            store.close()
    remedies = [
        f
        for f in findings
        if f["status"] in ("open", "overdue") and f["required_remedy"] and f["rule_id"] != "DT-remedy-overdue"
    ]
    links = ConsoleLinks(console_url)
    listed, procedural = _finding_list(findings, review_rows, review_due is not None)
    grouped = incidents_by_rule(listed)  # the printed report's list: every incident counted, a few shown
    # the page's lists of single findings and faults stop at max_listed (the exports hold them all)
    cap = max_listed if max_listed is not None else max(len(listed), len(remedies), len(figures["device_faults"]))
    unlisted = {
        "findings": max(0, len(listed) - cap),
        "remedies": max(0, len(remedies) - cap),
        "device_faults": max(0, len(figures["device_faults"]) - cap),
    }
    listed, remedies = listed[:cap], remedies[:cap]
    status = judged["status"] if judged else None
    report_meta = {
        "status": status,
        "status_reason": judged["reason"] if judged else None,
        "waiting_for": judged["waiting_for"] if judged else [],
        "final_on": judged["final_on"] if judged else [],
        "as_of": iso_utc(as_of) if as_of is not None else None,
        "revision": revision,
        "coverage": covered,
        "digest": report_digest(figures, findings, review_rows, status),
    }
    html = (
        _env(tz)
        .get_template("report.html.j2")
        .render(
            title=title
            or report_title(
                property_name, start, end, tz, (figures["period"]["first_event"], figures["period"]["last_event"])
            ),
            period_start=show(start, tz) if start else None,
            period_end=show(end, tz) if end else None,
            first_event=figures["period"]["first_event"],
            last_event=figures["period"]["last_event"],
            property_name=property_name,
            generated_at=show(generated_at, UTC) if generated_at else None,
            as_of=show(as_of, UTC) if as_of else None,
            report=report_meta,
            zone=zone_name(tz),
            summary=summarise(findings),
            figures=figures,
            review_as_of=show(late_at, tz),
            stub=stub,
            rounds=rounds,
            rounds_total=sum(r["rounds"] for r in rounds),
            remedies=remedies,
            chart_svg=_chart_svg(incidents(findings), tz),
            rule_chart_svg=_rule_chart_svg(incidents(findings)),
            severities=SEVERITIES,
            severity_meaning=SEVERITY_MEANING,
            rulebook_revision=RULEBOOK_REVISION,
            generation=info,
            generation_diff=diff,
            links=links,
            period=(start, end),
            listed=listed,
            grouped=grouped,
            print_examples=PRINT_EXAMPLES,
            print_rows=PRINT_ROWS,
            unlisted=unlisted,
            max_listed=cap,
            procedural=procedural,
            top_tables=_top_tables(figures),
            top_dealers=_top_dealers(figures),
            rule_label=rule_label,
            rule_name=lambda rule_id: rule_label(rule_id, 400),
            top=TOP,
            executive=executive.summary(headline, listed, remedies, figures),
            print_header=executive.print_header(property_name, start, end, tz),
            signoff_block=Markup(signoff.block_html(out_dir if revision is not None else None)),
            signoff_markers=(Markup(signoff.BLOCK_START), Markup(signoff.BLOCK_END)),
            video_references=video_refs,
            control=control_charts,
            person=lambda staff_id: staff.label(staff_id, names),
        )
    )
    html_path = out_dir / "report.html"
    write_private_text(html_path, html)
    summary_path = out_dir / "summary.json"
    write_private_text(summary_path, json.dumps({**figures, "report": report_meta}, indent=2, sort_keys=True) + "\n")
    for p in (csv_path, parquet_path):
        make_private(p)
    return ReportFiles(html_path, csv_path, parquet_path, len(findings), summary_path, report_meta)


def _finding_list(
    findings: list[dict[str, Any]], review_rows: Mapping[str, Mapping[str, Any]], judge_late: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The report's list of individual findings: every voiding and integrity incident (voiding
    first, each severity oldest first), each with its consequences, review status
    (``unreviewed`` in a store without review tables), assignee, late flag and who disposed
    (or proposed) and approved it; and the
    procedural incidents summarised per rule (count, tables, first and last detection), most
    frequent first."""
    under = consequences_by_cause(findings)
    listed = []
    by_rule: dict[str, list[dict[str, Any]]] = defaultdict(list)
    rank = {sev: i for i, sev in enumerate(LISTED_SEVERITIES)}
    ordered = sorted(incidents(findings), key=lambda f: rank.get(f["severity"], len(rank)))  # stable: time kept
    for f in ordered:
        if f["severity"] not in LISTED_SEVERITIES:
            by_rule[f["rule_id"]].append(f)
            continue
        rv = review_rows.get(f["finding_id"], {})
        listed.append(
            {
                **f,
                "consequences": under.get(f["finding_id"], []),
                "review_status": rv.get("review_status", "unreviewed"),
                "assignee": rv.get("assignee"),
                "review_late": bool(judge_late and rv.get("review_late")),
                "disposed_by": rv.get("disposed_by"),  # who disposed, or proposed (four eyes)
                "approved_by": rv.get("approved_by"),  # the manager who approved the proposal
            }
        )
    procedural = [
        {
            "rule_id": rule_id,
            "count": len(rows),
            "tables": len({r["table_id"] for r in rows}),
            "first": rows[0]["detected_at"],
            "last": rows[-1]["detected_at"],
        }
        for rule_id, rows in sorted(by_rule.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    return listed, procedural


PRINT_EXAMPLES = 3
"""How many incidents of each rule the printed report (PDF) lists under the rule (the first ones)."""
PRINT_ROWS = 12
"""How many rows of a per-dealer, per-table or per-fault list the printed report keeps; the rest
are named by count and stay on the page on screen, in ``summary.json`` and ``findings.csv``."""


def incidents_by_rule(listed: list[dict[str, Any]], examples: int = PRINT_EXAMPLES) -> list[dict[str, Any]]:
    """The voiding and integrity incidents of the report's list grouped by rule, for the printed
    report, which stays a few pages whatever the period holds: per rule its severity, count,
    tables, how many are overdue, not yet disposed and late, and its first ``examples``
    incidents (oldest first); the rest are counted (``more``) and left to ``findings.csv``.

    Args:
        listed: every listed incident (:func:`_finding_list`'s first list, before any cap).
        examples: incidents shown per rule.

    Returns:
        One dict per rule, voiding rules first, then by count (most first) and rule ID.
    """
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in listed:
        groups[f["rule_id"]].append(f)
    rank = {sev: i for i, sev in enumerate(LISTED_SEVERITIES)}
    out = []
    for rule_id, found in groups.items():
        rows = sorted(found, key=lambda f: f["detected_at"])
        out.append(
            {
                "rule_id": rule_id,
                "severity": rows[0]["severity"],
                "citation": rows[0]["citation"],
                "count": len(rows),
                "tables": len({f["table_id"] for f in rows}),
                "overdue": sum(f["status"] == "overdue" for f in rows),
                "not_disposed": sum(f["review_status"] not in ("disposed",) for f in rows),
                "late": sum(bool(f["review_late"]) for f in rows),
                "first": rows[:examples],
                "more": max(0, len(rows) - examples),
            }
        )
    out.sort(key=lambda g: (rank.get(g["severity"], len(rank)), -g["count"], g["rule_id"]))
    return out


def _top_tables(figures: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tables with the most incidents per 1,000 rounds (then the most incidents)."""
    rates = figures["findings"]["per_1000_rounds"]["by_table"]
    counts = figures["findings"]["by_table"]
    rows = [
        {"table_id": t, "rounds": n, "incidents": counts.get(t, 0), "per_1000_rounds": rates.get(t)}
        for t, n in figures["rounds"]["by_table"].items()
        if counts.get(t, 0)
    ]
    rows.sort(key=lambda r: (-(r["per_1000_rounds"] or 0), -r["incidents"], r["table_id"]))
    return rows[:TOP]


def _top_dealers(figures: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The dealers with the most incidents per 1,000 rounds dealt (then the most incidents)."""
    rows = [d for d in figures["dealers"] if d["findings"]]
    rows = sorted(rows, key=lambda d: (-(d["per_1000_rounds"] or 0), -d["findings"], d["dealer_id"]))
    return rows[:TOP]


def period_rows(
    con: duckdb.DuckDBPyConnection,
    start: datetime,
    end: datetime,
    review_due: reviews.ReviewDue | None,
    as_of: datetime,
    archive: Path | None = None,
) -> tuple[dict[str, Any], pa.Table, pa.Table]:
    """The figures, finding rows and round rows of the period ``[start, end)`` as :func:`write_report`
    computes them for a report generated at ``as_of`` (reviews made later not counted, lateness
    judged then), without the page: what a daily export holds (:mod:`dealtrail.reporting.exports`).

    Args:
        con: a read-only connection to the store.
        start: the period's start (inclusive).
        end: the period's end (exclusive).
        review_due: the review due times (None: lateness is not judged).
        as_of: the report's time.
        archive: the archive folder of the store's archived months (None: as the store's manifest says).

    Returns:
        ``(figures, findings, rounds)``: :func:`build_summary`'s figures, the findings with their
        review columns (as ``findings.parquet`` holds them), and ``rpt_rounds``.
    """
    stack = contextlib.ExitStack()
    reader = con
    try:
        reader = stack.enter_context(reading_archive(con, archive))
        info = generation_info(reader, None)
        reader.execute(f"SET VARIABLE dealtrail_generation = {int(info.generation)}")
        reader.execute("SET VARIABLE dealtrail_reviews_as_of = $1::TIMESTAMPTZ", [as_of])
        table = staff.with_names(query(reader, "rpt_findings", start, end), staff.names(reader))
        findings = _with_rulebook_revisions(reader, table.to_pylist())
        figures = build_summary(reader, findings, start, end, review_due, as_of=as_of, reviews_until=as_of)
        review_rows: dict[str, dict[str, Any]] = {}
        if reviews.has_console_tables(reader):
            rows, _ = reviews.find(
                reader,
                reviews.FindingFilter(start=start, end=end),
                review_due or reviews.ReviewDue(0, 0, 0),
                as_of,
                reviews_until=as_of,
            )
            review_rows = {r["finding_id"]: r for r in rows}
        rounds = query(reader, "rpt_rounds", start, end)
        return figures, _with_review_columns(table, review_rows), rounds
    finally:
        for variable in ("dealtrail_generation", "dealtrail_reviews_as_of"):
            with contextlib.suppress(duckdb.Error):
                reader.execute(f"RESET VARIABLE {variable}")
        stack.close()
