"""The compliance report: HTML (jinja2) plus ``findings.csv`` and ``findings.parquet``.

Reads the store read-only. All queries are parameterised (``projections/sql/rpt_*.sql``); the
HTML escapes every value taken from events. The output depends only on the store and the period,
so a re-run writes the same files.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import pyarrow as pa

from projections.store import connect_read_only
from streams.engine.catalog import RULES_BY_ID

FAR_PAST = datetime(1970, 1, 1, tzinfo=UTC)
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)
SEVERITIES = ("voiding", "integrity", "procedural")


@dataclass(frozen=True)
class ReportFiles:
    """Where a report was written."""

    html: Path
    csv: Path
    parquet: Path
    findings: int


def _sql(name: str) -> str:
    return resources.files("projections").joinpath("sql", name).read_text(encoding="utf-8")


def query(
    con: duckdb.DuckDBPyConnection,
    name: str,
    start: datetime | None = None,
    end: datetime | None = None,
    table_id: str | None = None,
) -> pa.Table:
    """Run ``projections/sql/<name>.sql`` for the period [start, end) as an Arrow table.

    Args:
        con: a (read-only) connection.
        name: the query file's stem, e.g. ``rpt_findings``.
        start: start of the period, inclusive (timezone-aware); None means unbounded.
        end: end of the period, exclusive; None means unbounded.
        table_id: restrict to one table (bound as a parameter, never spliced into SQL).
    """
    params = {"start": start or FAR_PAST, "end": end or FAR_FUTURE, "table_id": table_id}
    return con.sql(_sql(f"{name}.sql"), params=params).to_arrow_table()


def _chart_svg(rows: list[dict[str, Any]]) -> str:
    """Findings per hour, stacked by severity, as an inline SVG (empty string if no finding)."""
    if not rows:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets: dict[datetime, Counter[str]] = defaultdict(Counter)
    for r in rows:
        t = r["detected_at"].astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        buckets[t][r["severity"]] += 1
    hours = sorted(buckets)
    fig, ax = plt.subplots(figsize=(9, 3), dpi=100)
    bottom = [0] * len(hours)
    colours = {"voiding": "#b2182b", "integrity": "#ef8a62", "procedural": "#67a9cf"}
    for sev in SEVERITIES:
        vals = [buckets[h][sev] for h in hours]
        ax.bar(hours, vals, width=1 / 24 * 0.9, bottom=bottom, label=sev, color=colours[sev], align="edge")  # type: ignore[arg-type]
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("findings per hour")
    ax.legend(loc="upper right", fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.StringIO()
    plt.rcParams["svg.hashsalt"] = "dealtrail"
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg") :]


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("projections", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def summarise(findings: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's aggregates over finding rows (as from ``rpt_findings``)."""
    by_rule: dict[str, Counter[str]] = defaultdict(Counter)
    for f in findings:
        by_rule[f["rule_id"]][f["status"]] += 1
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


def _private(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.chmod(0o600)


def write_report(
    db: str | os.PathLike[str],
    out: str | os.PathLike[str],
    start: datetime | None = None,
    end: datetime | None = None,
    title: str = "dealtrail compliance report",
) -> ReportFiles:
    """Write ``report.html``, ``findings.csv`` and ``findings.parquet`` for [start, end) into ``out``.

    Raises:
        FileNotFoundError: no store at ``db``.
    """
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    con = connect_read_only(db)
    try:
        table = query(con, "rpt_findings", start, end)
        findings = table.to_pylist()
        stub = query(con, "rpt_stub_compliance", start, end).to_pylist()
        rounds = query(con, "rpt_rounds", start, end).to_pylist()
        con.register("rpt", table)
        csv_path, parquet_path = out_dir / "findings.csv", out_dir / "findings.parquet"
        con.execute(f"COPY rpt TO '{csv_path}' (FORMAT csv, HEADER)")
        con.execute(f"COPY rpt TO '{parquet_path}' (FORMAT parquet)")
        con.unregister("rpt")
    finally:
        con.close()
    remedies = [f for f in findings if f["status"] in ("open", "overdue") and f["required_remedy"]]
    html = (
        _env()
        .get_template("report.html.j2")
        .render(
            title=title,
            period_start=start.isoformat() if start else "the beginning of the trail",
            period_end=end.isoformat() if end else "the end of the trail",
            summary=summarise(findings),
            stub=stub,
            rounds=rounds,
            rounds_total=sum(r["rounds"] for r in rounds),
            remedies=remedies,
            chart_svg=_chart_svg(findings),
            severities=SEVERITIES,
        )
    )
    html_path = out_dir / "report.html"
    html_path.write_text(html, encoding="utf-8")
    for p in (html_path, csv_path, parquet_path):
        _private(p)
    return ReportFiles(html_path, csv_path, parquet_path, len(findings))
