"""The group view: every property's daily exports, verified, side by side (read-only).

The group reads the export location (a shared folder or a bucket: :mod:`.objectstore`) and a
folder of the properties' registered public keys, one ``<property_id>.pem`` each. For each
property and each gaming day of the period it takes the latest revision and verifies it before
any figure is read: the signature of ``manifest.json`` with the property's registered key, the
manifest's own statements (format, property, day, revision) against the folder it sits in, and
every file's size and SHA-256 against the manifest, with no file more or less. A day that fails
is named with the reason and its figures are left out of the property's; the property is then
shown as failing (so is a registered property with no export, and an exporting property with no
registered key): a property is never left out silently.

The figures are read by DuckDB from the verified revisions' ``figures.parquet`` (the location's
filesystem registered with DuckDB) and summed per property; rates per 1,000 rounds are the sum
of incidents over the sum of rounds, so each property's figures equal its own period report's
for the same gaming days.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from dealtrail.reporting.exports import FORMAT, MANIFEST, SIGNATURE, TABLES
from dealtrail.reporting.objectstore import Location
from projections.records.signing import SigningError, key_id, verify
from projections.reports.report import per_1000


@dataclass
class DayCheck:
    """The latest revision of one gaming day and what its verification found (``problem`` None: verified)."""

    gaming_day: str
    revision: int
    folder: str
    problem: str | None = None
    manifest: dict[str, Any] = field(default_factory=dict)


@dataclass
class PropertyView:
    """One property in the group view.

    Attributes:
        property_id: its ID in the layout.
        name: its name as its latest verified manifest gives it (None: none verified).
        days: the gaming days of the period, each its latest revision's check.
        problems: what keeps the property from being whole (no key, no export, failing days).
        figures: the summed figures of its verified days (``figure -> key -> value``).
        last_export: the latest ``exported_at`` among its verified revisions (any day).
        last_day: the latest gaming day it exported (verified).
        daily: per verified gaming day of the period, its ``rounds`` and incidents by severity
            (``voiding``, ``procedural``, ``integrity``): the points of its control chart.
        zone: the casino's time zone its manifests state (its gaming days' wall clock).
    """

    property_id: str
    name: str | None = None
    days: list[DayCheck] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    figures: dict[str, dict[str, int]] = field(default_factory=dict)
    last_export: datetime | None = None
    last_day: str | None = None
    daily: dict[str, dict[str, int]] = field(default_factory=dict)
    zone: str | None = None

    @property
    def ok(self) -> bool:
        """Every day of the period verified and nothing else wrong."""
        return not self.problems

    def figure(self, name: str, key: str = "") -> int:
        """One summed figure (0 when absent)."""
        return self.figures.get(name, {}).get(key, 0)

    def summary(self) -> dict[str, Any]:
        """The property's figures as the group report shows them (JSON-ready)."""
        rounds, incidents = self.figure("rounds"), self.figure("incidents")
        remedies = self.figures.get("remedies", {})
        return {
            "property_id": self.property_id,
            "name": self.name,
            "status": "verified" if self.ok else "FAILED",
            "problems": self.problems,
            "days_verified": sum(1 for d in self.days if d.problem is None),
            "days_failed": [d.gaming_day for d in self.days if d.problem is not None],
            "rounds": rounds,
            "rounds_voided": self.figure("rounds_voided"),
            "incidents": incidents,
            "per_1000_rounds": per_1000(incidents, rounds),
            "by_severity": dict(sorted(self.figures.get("incidents_by_severity", {}).items())),
            "by_rule": dict(sorted(self.figures.get("incidents_by_rule", {}).items())),
            "remedies_owed": remedies.get("owed", 0),
            "remedies_done_late": remedies.get("done_late", 0),
            "remedies_overdue": remedies.get("overdue", 0),
            "reviews_late": self.figure("reviews_late"),
            "dead_letters": dict(sorted(self.figures.get("dead_letters", {}).items())),
            "events": self.figure("events"),
            "last_export": self.last_export.astimezone(UTC).isoformat() if self.last_export else None,
            "last_gaming_day": self.last_day,
            "revisions": [
                {"gaming_day": d.gaming_day, "revision": d.revision, "folder": d.folder, "problem": d.problem}
                for d in self.days
            ],
        }


def registered_keys(folder: Path) -> dict[str, bytes]:
    """The registered public keys: ``<property_id>.pem`` in ``folder`` -> its PEM bytes.

    Raises:
        OSError: the folder cannot be read.
    """
    return {p.stem: p.read_bytes() for p in sorted(folder.glob("*.pem")) if p.is_file()}


def _numbered(names: list[str], prefix: str) -> list[str]:
    return [n.removeprefix(prefix) for n in names if n.startswith(prefix)]


def check_revision(  # noqa: PLR0911 (one return per check, in the order a reader trusts them)
    location: Location, pem: bytes, property_id: str, day: str, revision: int
) -> DayCheck:
    """Verify one revision (see the module docstring); the check names the first problem found."""
    folder = location.path(f"property={property_id}", f"gaming_day={day}", f"revision={revision:04d}")
    check = DayCheck(day, revision, location.duckdb_path(folder))
    present = location.files(folder)
    if MANIFEST not in present or SIGNATURE not in present:
        check.problem = f"revision {revision} has no signed manifest (incomplete or altered)"
        return check
    body = location.read(f"{folder}/{MANIFEST}")
    try:
        signed = verify(pem, body, location.read(f"{folder}/{SIGNATURE}"))
    except SigningError as exc:
        check.problem = f"the registered key of {property_id} is unusable: {exc}"
        return check
    if not signed:
        check.problem = f"revision {revision}: the manifest's signature does not verify with the registered key"
        return check
    manifest = json.loads(body)
    stated = (manifest.get("format"), manifest.get("property_id"), manifest.get("gaming_day"), manifest.get("revision"))
    if stated != (FORMAT, property_id, day, revision):
        check.problem = f"revision {revision}: the manifest states {stated}, not this folder's"
        return check
    if manifest.get("key_id") != key_id(pem):
        check.problem = f"revision {revision}: signed by key {manifest.get('key_id')}, not the registered one"
        return check
    listed = manifest.get("files", {})
    files = set(present) - {MANIFEST, SIGNATURE}
    if files != set(listed) or not {f"{t}.parquet" for t in TABLES} <= files:
        check.problem = f"revision {revision}: its files {sorted(files)} are not the manifest's {sorted(listed)}"
        return check
    for name in sorted(files):
        data = location.read(f"{folder}/{name}")
        if len(data) != listed[name]["bytes"] or hashlib.sha256(data).hexdigest() != listed[name]["sha256"]:
            check.problem = f"revision {revision}: {name} does not match its SHA-256 in the manifest (altered)"
            return check
    check.manifest = manifest
    return check


def read_group(
    location: Location, keys: dict[str, bytes], first_day: str, end_day: str, now: datetime
) -> list[PropertyView]:
    """Every property of the group over the gaming days ``[first_day, end_day)`` (``YYYY-MM-DD``).

    Args:
        location: the export location.
        keys: the registered public keys by property ID (:func:`registered_keys`).
        first_day: the period's first gaming day.
        end_day: the gaming day after its last.
        now: the view's time (freshness is judged against it by the page).

    Returns:
        One :class:`PropertyView` per property exporting or registered, by ID.
    """
    del now  # the freshness figures are instants; the pages judge their age
    found = _numbered(location.folders(location.root), "property=")
    views = []
    for property_id in sorted(set(found) | set(keys)):
        view = PropertyView(property_id)
        views.append(view)
        pem = keys.get(property_id)
        if pem is None:
            view.problems.append(f"{property_id} exports, but no public key is registered for it")
            continue
        days = _numbered(location.folders(location.path(f"property={property_id}")), "gaming_day=")
        if not days:
            view.problems.append(f"no export of {property_id} found")
            continue
        verified_files: list[str] = []
        for day in days:
            revisions = [
                int(r)
                for r in _numbered(
                    location.folders(location.path(f"property={property_id}", f"gaming_day={day}")), "revision="
                )
                if re.fullmatch(r"\d{4,}", r)
            ]
            if not revisions:
                continue
            check = check_revision(location, pem, property_id, day, max(revisions))
            if check.problem is None:
                exported = datetime.fromisoformat(check.manifest["exported_at"])
                view.last_export = max(view.last_export or exported, exported)
                view.last_day = max(view.last_day or day, day)
                view.name = check.manifest.get("property_name") or view.name
                view.zone = check.manifest.get("zone") or view.zone
            if not first_day <= day < end_day:
                continue
            view.days.append(check)
            if check.problem is None:
                verified_files.append(f"{check.folder}/figures.parquet")
            else:
                view.problems.append(f"{day}: {check.problem}")
        if not view.days:
            view.problems.append(f"no export of {property_id} for a gaming day from {first_day} to before {end_day}")
        day_of = {f: d.gaming_day for d in view.days if d.problem is None for f in [f"{d.folder}/figures.parquet"]}
        view.figures, view.daily = _sum_figures(location, verified_files, day_of)
    return views


def _sum_figures(
    location: Location, files: list[str], day_of: dict[str, str]
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Sum the ``figures.parquet`` of ``files`` by (figure, key) with DuckDB through the location's
    filesystem; and each file's rounds and incidents by severity, by its gaming day (``day_of``)."""
    if not files:
        return {}, {}
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        location.attach(con)
        con.execute("CREATE TEMP TABLE f AS SELECT * FROM read_parquet($files, filename = true)", {"files": files})
        rows = con.execute("SELECT figure, key, sum(value)::BIGINT FROM f GROUP BY ALL ORDER BY ALL").fetchall()
        per_file = con.execute(
            "SELECT filename, CASE figure WHEN 'rounds' THEN 'rounds' ELSE key END, value FROM f"
            " WHERE (figure = 'rounds' AND key = '') OR figure = 'incidents_by_severity'"
        ).fetchall()
    finally:
        con.close()
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for figure, key, value in rows:
        out[figure][key] = int(value)
    daily: dict[str, dict[str, int]] = {}
    for filename, name, value in per_file:
        day = daily.setdefault(day_of[filename], dict.fromkeys(("rounds", *SEVERITIES), 0))
        day[name] = int(value)
    return dict(out), dict(sorted(daily.items()))


SEVERITIES = ("voiding", "procedural", "integrity")
"""The categories of incidents a control chart counts."""


def control_points(views: list[PropertyView], slot: str) -> list[dict[str, Any]]:
    """The points of the group's control chart: one per property and gaming day (``slot`` ``day``)
    or ISO week from Monday (``week``) of its verified days, on the property's own wall clock
    (the manifests' zone), with its rounds and incidents by severity (all incidents of the day, as
    the property's report counts them). A slot without a round has no rate and is not a point (as
    in a store's charts).

    Raises:
        ValueError: ``slot`` is neither ``day`` nor ``week``.
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if slot not in ("day", "week"):
        raise ValueError(f"a group's chart is by day or week, not {slot}")
    points: dict[tuple[str, datetime], dict[str, Any]] = {}
    for view in views:
        try:
            zone = ZoneInfo(view.zone or "UTC")
        except (ZoneInfoNotFoundError, ValueError):  # a zone this host does not know: its days in UTC
            zone = ZoneInfo("UTC")
        for day, counts in view.daily.items():
            start = datetime.strptime(day, "%Y-%m-%d")
            if slot == "week":
                start -= timedelta(days=start.weekday())
            point = points.setdefault(
                (view.property_id, start),
                {"subject_id": view.property_id, "slot_start": start,
                 "slot_start_utc": start.replace(tzinfo=zone).astimezone(UTC),
                 "rounds": 0, **dict.fromkeys(SEVERITIES, 0)},
            )  # fmt: skip
            for name in ("rounds", *SEVERITIES):
                point[name] += counts.get(name, 0)
    return [points[k] for k in sorted(points) if points[k]["rounds"] > 0]  # no rate without a round


def group_chart(
    views: list[PropertyView], slot: str = "day", control: tuple[int, float, float] = (100, 1.4427, 8.0)
) -> list[dict[str, Any]]:
    """Each property against the group: incidents per 1,000 rounds by gaming day or week, the
    centre line and Laney u' limits pooled over ``views`` (the properties the reader sees), judged
    by the rules of the store's charts (:func:`projections.models.control.chart_of`).

    Args:
        views: the properties (:func:`read_group`); only their verified days are charted.
        slot: ``day`` or ``week``.
        control: the minimum rounds of a point, CUSUM k and h (``DEALTRAIL_CONTROL__*``).

    Returns:
        The judged points, by property then slot (the columns of :func:`projections.models.control.chart`).

    Raises:
        ValueError: an unknown slot.
    """
    from projections.models.control import ChartSpec, chart_of

    points = control_points(views, slot)
    spec = ChartSpec("property", slot, "all", *control, GAMING_DAY_CLOCK)  # type: ignore[arg-type]
    return chart_of(points, spec) if points else []


POOLED = "centre line and limits pooled over the properties shown, for the period shown"
"""The sentence under a group chart naming what it is judged against (no group baseline is frozen)."""
GAMING_DAY_CLOCK = "each property's gaming days"
"""What a group chart's slots are counted on (a chart's title names its zone here)."""


def chart_sections(
    views: list[PropertyView], slot: str = "day", control: tuple[int, float, float] = (100, 1.4427, 8.0)
) -> dict[str, Any]:
    """What a page or report shows of the group's control chart: per property its picture (an SVG
    data URI) and its signals, with the group's centre line and spread.

    Returns:
        ``{"slot", "u_bar", "sigma_z", "points", "charts": [{"property_id", "picture", "points",
        "signals": [{"slot_start", "rules", "u", "ucl", "rounds", "errors"}]}]}``; ``charts`` is
        empty when no property has a verified day.

    Raises:
        ValueError: an unknown slot.
    """
    import base64

    from projections.models.control import ChartSpec, rules_of
    from projections.reports.control_chart import page_svg

    judged = group_chart(views, slot, control)
    spec = ChartSpec("property", slot, "all", *control, GAMING_DAY_CLOCK)  # type: ignore[arg-type]
    charts = []
    for view in views:
        mine = [p for p in judged if p["subject_id"] == view.property_id]
        if not mine:
            continue
        svg = page_svg(mine, f"Property {view.property_id}", spec, POOLED)
        signals = [
            {"slot_start": p["slot_start"].strftime("%Y-%m-%d"), "rules": rules_of(p), "u": round(p["u"], 3),
             "ucl": round(p["ucl"], 3) if p["ucl"] is not None else None, "rounds": int(p["rounds"]),
             "errors": int(p["errors"])}
            for p in mine if p["signal"]
        ]  # fmt: skip
        charts.append(
            {"property_id": view.property_id, "points": len(mine), "signals": signals,
             "picture": "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")}
        )  # fmt: skip
    first = judged[0] if judged else {}
    return {
        "slot": slot,
        "u_bar": round(first["u_bar"], 6) if first.get("u_bar") is not None else None,
        "sigma_z": round(first["sigma_z"], 6) if first.get("sigma_z") is not None else None,
        "points": len(judged),
        "charts": charts,
    }


def rules_by_property(views: list[PropertyView]) -> list[dict[str, Any]]:
    """One row per rule: incidents per property (verified days), most incidents first."""
    rules: dict[str, dict[str, int]] = defaultdict(dict)
    for v in views:
        for rule, n in v.figures.get("incidents_by_rule", {}).items():
            rules[rule][v.property_id] = n
    rows = [{"rule_id": r, "by_property": c, "total": sum(c.values())} for r, c in rules.items()]
    return sorted(rows, key=lambda r: (-r["total"], r["rule_id"]))


def _write_parquet(summaries: list[dict[str, Any]], path: Path) -> None:
    """The properties' figures as Parquet, one row each (DuckDB ``COPY``), owner-only."""
    import pyarrow as pa

    from projections.store.private import make_private, open_private

    counts = pa.map_(pa.string(), pa.int64())
    schema = pa.schema(
        [("property_id", pa.string()), ("name", pa.string()), ("status", pa.string()),
         ("problems", pa.list_(pa.string())), ("days_verified", pa.int64()), ("days_failed", pa.list_(pa.string())),
         ("rounds", pa.int64()), ("rounds_voided", pa.int64()), ("incidents", pa.int64()),
         ("per_1000_rounds", pa.float64()), ("by_severity", counts), ("by_rule", counts),
         ("remedies_owed", pa.int64()), ("remedies_done_late", pa.int64()), ("remedies_overdue", pa.int64()),
         ("reviews_late", pa.int64()), ("dead_letters", counts), ("events", pa.int64()),
         ("last_export", pa.string()), ("last_gaming_day", pa.string())]
    )  # fmt: skip
    rows = [
        {k: (list(v.items()) if isinstance(v, dict) else v) for k, v in s.items() if k in schema.names}
        for s in summaries
    ]
    open_private(path, binary=True).close()
    con = duckdb.connect()
    try:
        con.register("group_rows", pa.Table.from_pylist(rows, schema))
        con.execute(f"COPY group_rows TO '{path}' (FORMAT PARQUET)")
    finally:
        con.close()
    make_private(path)


GROUP_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Group report, gaming days {{ first_day }} to {{ last_day }}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1b1b1b}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}th,td{border:1px solid #999;padding:.25rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}figure.chart{margin:0 0 1.5rem;break-inside:avoid}
figure.chart img{max-width:100%;height:auto}
.failed{color:#8b0000;font-weight:bold}.ok{color:#0b5d1e}.t{white-space:nowrap}
@page{size:A4 landscape;margin:12mm}
@media print{body{margin:0;font-size:9pt}table{font-size:8pt}th,td{padding:.15rem .3rem}
thead{display:table-header-group}tr{break-inside:avoid}}
</style></head><body>
<header><h1>Group report: {{ views|length }} properties</h1>
<p>Gaming days {{ first_day }} to {{ last_day }} (each property's own zone), from the exports in
<code>{{ source }}</code>. Generated {{ generated_at }} (UTC); rulebook revision {{ rulebook_revision }}.</p></header>
<main>
{% if failing %}<section><h2 class="failed">Properties failing verification ({{ failing|length }})</h2><ul>
{% for v in failing %}<li><strong>{{ v.property_id }}</strong>{% if v.name %} ({{ v.name }}){% endif %}<ul>
{% for p in v.problems %}<li>{{ p }}</li>{% endfor %}</ul></li>{% endfor %}</ul>
<p>Their figures below count only the days that verified.</p></section>{% endif %}
<section><h2>The group floor</h2>
<table><thead><tr><th scope="col">Property</th><th scope="col">Verification</th><th scope="col">Rounds</th>
<th scope="col">Incidents</th><th scope="col">Per 1,000 rounds</th><th scope="col">Voiding</th>
<th scope="col">Integrity</th>
<th scope="col">Procedural</th><th scope="col">Remedies late</th><th scope="col">Remedies overdue</th>
<th scope="col">Reviews late</th><th scope="col">Dead letters</th><th scope="col">Last export (UTC)</th>
<th scope="col">Last gaming day</th></tr></thead><tbody>
{% for s in summaries %}<tr><td>{{ s.property_id }}{% if s.name %} ({{ s.name }}){% endif %}</td>
<td class="{{ 'ok' if s.status == 'verified' else 'failed' }}">{{ s.status }}
{%- if s.days_failed %} ({{ s.days_failed|length }} day(s)){% endif %}</td>
<td>{{ "{:,}".format(s.rounds) }}</td><td>{{ "{:,}".format(s.incidents) }}</td>
<td>{{ s.per_1000_rounds if s.per_1000_rounds is not none else "no rounds" }}</td>
<td>{{ s.by_severity.get("voiding", 0) }}</td><td>{{ s.by_severity.get("integrity", 0) }}</td>
<td>{{ s.by_severity.get("procedural", 0) }}</td><td>{{ s.remedies_done_late }}</td><td>{{ s.remedies_overdue }}</td>
<td>{{ s.reviews_late }}</td><td>{{ s.dead_letters.values()|sum }}</td>
<td class="t">{{ s.last_export[:16] ~ "Z" if s.last_export else "never" }}
{%- if s.last_export %}<br>{{ s.last_export_age_hours }} h ago{% endif %}</td>
<td class="t">{{ s.last_gaming_day or "none" }}</td></tr>{% endfor %}</tbody></table></section>
<section><h2>Rules by property (incidents)</h2>
<table><thead><tr><th scope="col">Rule</th>{% for v in views %}<th scope="col">{{ v.property_id }}</th>{% endfor %}
<th scope="col">Group</th></tr></thead><tbody>
{% for r in rules %}<tr><td>{{ r.rule_id }}</td>
{%- for v in views %}<td>{{ r.by_property.get(v.property_id, 0) }}</td>{% endfor %}
<td>{{ r.total }}</td></tr>{% endfor %}</tbody></table></section>
<section><h2>Control charts: each property against the group, by gaming day</h2>
{% if control.charts %}<p>Incidents per 1,000 rounds of each verified gaming day. The centre line
(u-bar {{ "%.3f"|format(control.u_bar or 0) }}) and Laney u' limits
({% if control.sigma_z is not none %}sigma_z {{ "%.3f"|format(control.sigma_z) }}
{%- else %}no spread yet: no property has two charted days in a row{% endif %}) are pooled over
the {{ views|length }} properties of this report, so a property is compared with the group, not
with its own past. A signal (a day above its upper limit, 8 days in a row above the centre line,
6 rising, or the CUSUM) asks for a look, not for a verdict.</p>
{% for c in control.charts %}<figure class="chart"><img src="{{ c.picture }}" width="990" height="380"
 alt="Control chart of property {{ c.property_id }} by gaming day: {{ c.points }} days, {{ c.signals|length }} signals">
<figcaption>{% if c.signals %}Signals of {{ c.property_id }}:
<table><thead><tr><th scope="col">Gaming day</th><th scope="col">Rule</th><th scope="col">Incidents</th>
<th scope="col">Rounds</th><th scope="col">Per 1,000</th><th scope="col">Upper limit</th></tr></thead><tbody>
{% for g in c.signals %}<tr><td>{{ g.slot_start }}</td><td>{{ g.rules|join("; ") }}</td><td>{{ g.errors }}</td>
<td>{{ "{:,}".format(g.rounds) }}</td><td>{{ g.u }}</td><td>{{ g.ucl if g.ucl is not none else "none" }}</td></tr>
{% endfor %}</tbody></table>{% else %}No signal for {{ c.property_id }} in the period.{% endif %}</figcaption></figure>
{% endfor %}{% else %}<p>No verified gaming day to chart.</p>{% endif %}</section>
</main></body></html>
"""

CSV_COLUMNS = (
    "property_id", "name", "status", "days_verified", "days_failed", "rounds", "rounds_voided", "incidents",
    "per_1000_rounds", "voiding", "integrity", "procedural", "remedies_owed", "remedies_done_late",
    "remedies_overdue", "reviews_late", "dead_letters", "events", "last_export", "last_export_age_hours",
    "last_gaming_day", "problems",
)  # fmt: skip


@dataclass(frozen=True)
class GroupFiles:
    """Where a group report was written (one revision folder)."""

    folder: Path
    html: Path
    csv: Path
    json: Path
    parquet: Path


def write_group_report(
    views: list[PropertyView],
    out: Path,
    source: str,
    first_day: str,
    last_day: str,
    generated_at: datetime,
    control: tuple[int, float, float] = (100, 1.4427, 8.0),
) -> GroupFiles:
    """Write the group report (``group.html``, ``group.csv``, ``group.json``, and ``group.parquet``:
    one row per property, typed, the rules by property as a map) as a new revision folder
    ``rev-NNNN`` under ``out`` (earlier revisions stay), owner-only.

    Args:
        views: the properties (:func:`read_group`).
        out: the report's folder.
        source: the export location, as the page names it.
        first_day: the period's first gaming day.
        last_day: its last gaming day.
        generated_at: the report's time (UTC).
        control: the control charts' minimum rounds of a point, CUSUM k and h (``DEALTRAIL_CONTROL__*``):
            each property's chart by gaming day against the group (:func:`chart_sections`).

    Raises:
        OSError: ``out`` cannot be written.
    """
    import csv
    import io
    import os

    import jinja2

    from projections.display.spreadsheet import neutralise_cell
    from projections.store.private import make_private_dirs, write_private_text
    from streams.engine.catalog import RULEBOOK_REVISION

    make_private_dirs(out)
    number = 1 + max(
        (int(m.group(1)) for p in out.iterdir() if (m := re.fullmatch(r"rev-(\d{4,})", p.name))), default=0
    )
    folder = out / f"rev-{number:04d}"
    os.mkdir(folder, 0o700)  # exclusive: a revision is never written over
    folder.chmod(0o700)
    summaries = [v.summary() for v in views]
    for summary, view in zip(summaries, views, strict=True):  # freshness: how old each property's last export is
        age = (generated_at - view.last_export).total_seconds() / 3600 if view.last_export else None
        summary["last_export_age_hours"] = round(age, 1) if age is not None else None
    control_charts = chart_sections(views, "day", control)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    html = env.from_string(GROUP_PAGE).render(
        control=control_charts,
        views=views,
        summaries=summaries,
        failing=[v for v in views if not v.ok],
        rules=rules_by_property(views),
        first_day=first_day,
        last_day=last_day,
        source=source,
        generated_at=generated_at.astimezone(UTC).isoformat(timespec="seconds"),
        rulebook_revision=RULEBOOK_REVISION,
    )
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for s in summaries:
        row = {
            **s,
            **{sev: s["by_severity"].get(sev, 0) for sev in ("voiding", "integrity", "procedural")},
            "days_failed": " ".join(s["days_failed"]),
            "dead_letters": sum(s["dead_letters"].values()),
            "problems": " | ".join(s["problems"]),
        }
        writer.writerow([neutralise_cell("" if row[c] is None else str(row[c])) for c in CSV_COLUMNS])
    document = {
        "period": {"first_gaming_day": first_day, "last_gaming_day": last_day},
        "source": source,
        "generated_at": generated_at.isoformat(),
        "properties": summaries,
        "rules_by_property": rules_by_property(views),
        "control_chart": {
            **{k: v for k, v in control_charts.items() if k != "charts"},
            "signals": {c["property_id"]: c["signals"] for c in control_charts["charts"]},
        },
    }
    files = GroupFiles(
        folder, folder / "group.html", folder / "group.csv", folder / "group.json", folder / "group.parquet"
    )
    _write_parquet(summaries, files.parquet)
    write_private_text(files.html, html)
    write_private_text(files.csv, buffer.getvalue())
    write_private_text(files.json, json.dumps(document, indent=2, sort_keys=True) + "\n")
    return files
