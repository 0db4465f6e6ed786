"""A control chart drawn for people (issue 50): a dealer's or a table's incidents per 1,000 rounds,
point by point, with the centre line, Laney's u' limits (the plain u-chart's dotted beside them),
the signals ringed in red and numbered as the signals list numbers them, hollow points for those
with too few rounds to judge, and the baseline the chart was judged against named under it.
Server-rendered with matplotlib (as the report's other charts), the same bytes on every run."""

from __future__ import annotations

import base64
import io
from datetime import UTC, datetime, timedelta
from typing import Any

from projections.models.control import ChartSpec, Slot

SLOT_WORDS = {"shift": "shift", "day": "day", "week": "week"}


def render(points: list[dict[str, Any]], title: str, spec: ChartSpec, baseline: str, fmt: str = "svg") -> bytes:
    """Draw one subject's chart.

    Args:
        points: one subject's rows of :func:`projections.models.control.chart`, in time order.
        title: what the chart is of (``Dealer D-7``).
        spec: the chart (its slot, category and minimum rounds are named on it).
        baseline: the sentence naming the baseline (:func:`projections.records.baselines.label`).
        fmt: ``svg`` or ``png``.

    Returns:
        The picture's bytes (SVG without a date or random IDs, so the same chart is the same bytes).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p["slot_start"] for p in points]
    idx = list(range(len(points)))
    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=110)
    nan = float("nan")  # a limit not known (no incident, or no spread yet) is not drawn
    ucl = [p["ucl"] if p["ucl"] is not None else nan for p in points]
    lcl = [p["lcl"] if p["lcl"] is not None else nan for p in points]
    ax.step(idx, ucl, where="mid", color="#b2182b", linewidth=1.2, label="limits (Laney u')")
    ax.step(idx, lcl, where="mid", color="#b2182b", linewidth=1.2)
    ucl_u = [p["ucl_u"] if p["ucl_u"] is not None else nan for p in points]
    ax.step(idx, ucl_u, where="mid", color="#999999", linewidth=0.8, linestyle=":", label="u-chart limits")
    u_bar = points[0]["u_bar"] if points else 0.0
    ax.axhline(u_bar or 0.0, color="#2166ac", linewidth=1.2, label=f"centre {u_bar or 0:.2f}")
    ax.plot(idx, [p["u"] for p in points], color="#555555", linewidth=0.6, zorder=1)
    solid = [i for i, p in enumerate(points) if p["solid"]]
    hollow = [i for i, p in enumerate(points) if not p["solid"]]
    ax.scatter(solid, [points[i]["u"] for i in solid], s=18, color="#222222", zorder=3, label="point")
    if hollow:
        ax.scatter(hollow, [points[i]["u"] for i in hollow], s=22, facecolors="white", edgecolors="#222222",
                   zorder=3, label=f"under {spec.min_rounds} rounds (not judged)")  # fmt: skip
    signals = [i for i, p in enumerate(points) if p["signal"]]
    if signals:
        ax.scatter(signals, [points[i]["u"] for i in signals], s=90, facecolors="none", edgecolors="#d7301f",
                   linewidths=1.8, zorder=4, label="signal")  # fmt: skip
        for n, i in enumerate(signals, start=1):
            ax.annotate(str(n), (i, points[i]["u"]), xytext=(5, 6), textcoords="offset points", color="#d7301f",
                        fontsize=8, fontweight="bold")  # fmt: skip
    step = max(1, len(points) // 10)
    ax.set_xticks(idx[::step])
    fmt_x = "%m-%d %H:%M" if spec.slot == "shift" else "%Y-%m-%d"
    ax.set_xticklabels([x.strftime(fmt_x) for x in xs[::step]], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("incidents per 1,000 rounds", fontsize=8)
    what = "all incidents" if spec.category == "all" else f"{spec.category} incidents"
    ax.set_title(f"{title}: {what} by {SLOT_WORDS[spec.slot]} ({spec.tz})", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=7, ncol=3, frameon=False)
    fig.text(0.01, 0.01, baseline, fontsize=7, color="#333333")
    # fixed margins: tight_layout draws the figure once more to measure it (a third of the time)
    fig.subplots_adjust(left=0.07, right=0.99, top=0.91, bottom=0.24)
    buf = io.BytesIO()
    plt.rcParams["svg.hashsalt"] = "dealtrail"
    fig.savefig(buf, format=fmt, metadata={"Date": None} if fmt == "svg" else {})
    plt.close(fig)
    data = buf.getvalue()
    if fmt == "svg":
        data = data[data.find(b"<svg") :]
    return data


REPORT_WINDOW_DAYS = 30
"""How many days of history a period report's control charts show, ending with the period."""
REPORT_MAX_CHARTS = 12
"""The most charts a period report draws (the subjects with signals in the period, most signals first)."""


def report_section(
    con: Any,
    start: datetime | None,
    end: datetime | None,
    tz: str,
    min_rounds: int,
    cusum_k: float,
    cusum_h: float,
    dealer_slot: Slot,
    as_of: datetime | None,
) -> dict[str, Any]:
    """The period report's control charts: for dealers (by ``dealer_slot``) and tables (by day), the charts
    of the :data:`REPORT_WINDOW_DAYS` days ending with the period, judged against the baseline in
    force at ``as_of``; drawn for the subjects with a signal inside the period.

    Returns:
        ``{"charts": [{"kind", "subject", "picture" (an SVG data URI), "signals": [...]}], "baselines":
        {kind: sentence}, "quiet": {kind: how many subjects charted without a signal},
        "more": charts not drawn}``; ``{"error": sentence}`` when the store has no incidents
        summary to chart from (a store no writer of this version opened).
    """
    import duckdb

    from projections.models.control import ChartSpec, chart, rules_of
    from projections.records.baselines import in_force, label

    last = end or datetime.now(UTC)
    window_start = last - timedelta(days=REPORT_WINDOW_DAYS)
    if start is not None and start < window_start:
        window_start = start
    charts: list[dict[str, Any]] = []
    out: dict[str, Any] = {"charts": charts, "baselines": {}, "quiet": {}, "more": 0}
    for kind, slot in (("dealer", dealer_slot), ("table", "day")):
        spec = ChartSpec(kind, slot, "all", min_rounds, cusum_k, cusum_h, tz)  # type: ignore[arg-type]
        try:
            baseline = in_force(con, spec, as_of)
            points = chart(con, spec, window_start, end, None, baseline)
        except duckdb.CatalogException:
            return {"error": "the store has no incidents summary yet (a writer of this version builds it)"}
        out["baselines"][kind] = label(baseline)
        by_subject: dict[str, list[dict[str, Any]]] = {}
        for p in points:
            by_subject.setdefault(str(p["subject_id"]), []).append(p)
        flagged = []
        for subject, pts in by_subject.items():
            inside = [
                p for p in pts if p["signal"] and (start is None or p["slot_start_utc"] >= start)
                and (end is None or p["slot_start_utc"] < end)
            ]  # fmt: skip
            if inside:
                flagged.append((subject, pts, inside))
        out["quiet"][kind] = len(by_subject) - len(flagged)
        flagged.sort(key=lambda f: (-len(f[2]), f[0]))
        for subject, pts, inside in flagged:
            if len(charts) >= REPORT_MAX_CHARTS:
                out["more"] += 1
                continue
            svg = render(pts, f"{kind.capitalize()} {subject}", spec, label(baseline), "svg")
            numbered = [p for p in pts if p["signal"]]
            listed = [
                {"n": numbered.index(p) + 1, "when": p["slot_start"], "rules": rules_of(p), "u": p["u"],
                 "ucl": p["ucl"], "rounds": p["rounds"], "errors": p["errors"], "start": p["slot_start_utc"]}
                for p in inside
            ]  # fmt: skip
            picture = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
            charts.append({"kind": kind, "subject": subject, "picture": picture, "signals": listed})
    return out


def page_svg(points: list[dict[str, Any]], title: str, spec: ChartSpec, baseline: str) -> bytes:
    """The same chart as :func:`render` drawn as plain SVG for the console's pages: a few
    milliseconds where matplotlib takes a few hundred, so a dealer's page stays within the read
    side's page budget (as the page's other chart, a templated SVG). Every text is escaped.

    Args:
        points: one subject's rows of :func:`projections.models.control.chart`, in time order.
        title: what the chart is of.
        spec: the chart.
        baseline: the sentence naming the baseline.

    Returns:
        The SVG document's bytes.
    """
    from html import escape

    width, height, left, right, top, bottom = 990, 380, 56, 975, 52, 300
    n = max(1, len(points))
    ymax = max([p["u"] for p in points] + [p["ucl"] or 0 for p in points] + [p["ucl_u"] or 0 for p in points] + [1.0])
    ymax *= 1.08
    step = (right - left) / n

    def x(i: float) -> float:
        return left + (i + 0.5) * step

    def y(v: float) -> float:
        return float(bottom - (bottom - top) * (v or 0.0) / ymax)

    def stairs(key: str) -> str:
        return " ".join(
            f"{'M' if i == 0 else 'L'}{x(i) - step / 2:.1f},{y(p[key]):.1f} L{x(i) + step / 2:.1f},{y(p[key]):.1f}"
            for i, p in enumerate(points)
        )

    what = "all incidents" if spec.category == "all" else f"{spec.category} incidents"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
        f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">'
        f"{escape(title)}: {escape(what)} by {escape(spec.slot)} ({escape(spec.tz)})</text>",
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#333"/>',
    ]
    tick = _nice_step(ymax / 5)
    for k in range(int(ymax // tick) + 1):  # the y axis: round ticks from 0
        v = k * tick
        out.append(f'<line x1="{left - 4}" x2="{left}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#333"/>')
        out.append(f'<text x="{left - 7}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>')
    out.append(
        f'<text transform="translate(14,{(top + bottom) / 2}) rotate(-90)" text-anchor="middle">'
        "incidents per 1,000 rounds</text>"
    )
    label_every = max(1, n // 10)
    fmt_x = "%m-%d %H:%M" if spec.slot == "shift" else "%Y-%m-%d"
    for i, p in enumerate(points):
        if i % label_every == 0:
            out.append(
                f'<text transform="translate({x(i):.1f},{bottom + 12}) rotate(-30)" text-anchor="end" font-size="10">'
                f"{p['slot_start'].strftime(fmt_x)}</text>"
            )
    if points and all(p["ucl_u"] is not None for p in points):  # limits known (an incident in the period)
        out.append(f'<path d="{stairs("ucl_u")}" fill="none" stroke="#999" stroke-dasharray="2,2"/>')
    if points and all(p["ucl"] is not None for p in points):  # and a spread (two solid points in a row)
        out.append(f'<path d="{stairs("ucl")}" fill="none" stroke="#b2182b" stroke-width="1.4"/>')
        out.append(f'<path d="{stairs("lcl")}" fill="none" stroke="#b2182b" stroke-width="1.4"/>')
    if points:
        u_bar = points[0]["u_bar"] or 0.0
        out.append(
            f'<line x1="{left}" x2="{right}" y1="{y(u_bar):.1f}" y2="{y(u_bar):.1f}" '
            'stroke="#2166ac" stroke-width="1.4"/>'
        )
        line = " ".join(f"{'M' if i == 0 else 'L'}{x(i):.1f},{y(p['u']):.1f}" for i, p in enumerate(points))
        out.append(f'<path d="{line}" fill="none" stroke="#777" stroke-width="0.7"/>')
    number = 0
    for i, p in enumerate(points):
        fill = "#222" if p["solid"] else "#fff"
        limit = f", upper limit {p['ucl']:.1f}" if p["ucl"] is not None else ""
        what_p = f"{p['errors']} incidents in {p['rounds']} rounds ({p['u']:.1f} per 1,000){limit}"
        out.append(
            f'<circle cx="{x(i):.1f}" cy="{y(p["u"]):.1f}" r="3.5" fill="{fill}" stroke="#222">'
            f"<title>{p['slot_start'].strftime('%Y-%m-%d %H:%M')}: {what_p}</title></circle>"
        )
        if p["signal"]:
            number += 1
            out.append(
                f'<circle cx="{x(i):.1f}" cy="{y(p["u"]):.1f}" r="8" fill="none" stroke="#d7301f" stroke-width="2"/>'
            )
            out.append(
                f'<text x="{x(i) + 8:.1f}" y="{y(p["u"]) - 8:.1f}" fill="#d7301f" font-weight="bold">{number}</text>'
            )
    legend = [
        ("#b2182b", "limits (Laney u')", ""),
        ("#999", "u-chart limits", ' stroke-dasharray="2,2"'),
        ("#2166ac", f"centre {points[0]['u_bar'] or 0:.2f}" if points else "centre", ""),
    ]
    lx = left + 8
    for colour, text, dash in legend:
        out.append(
            f'<line x1="{lx}" x2="{lx + 22}" y1="{top - 12}" y2="{top - 12}" '
            f'stroke="{colour}" stroke-width="1.6"{dash}/>'
        )
        out.append(f'<text x="{lx + 27}" y="{top - 8}">{escape(text)}</text>')
        lx += 150
    out.append(f'<circle cx="{lx + 8}" cy="{top - 12}" r="3.5" fill="#fff" stroke="#222"/>')
    out.append(f'<text x="{lx + 16}" y="{top - 8}">under {spec.min_rounds} rounds (not judged)</text>')
    out.append(f'<circle cx="{lx + 220}" cy="{top - 12}" r="7" fill="none" stroke="#d7301f" stroke-width="2"/>')
    out.append(f'<text x="{lx + 232}" y="{top - 8}">signal</text>')
    out.append(f'<text x="6" y="{height - 8}" font-size="10" fill="#333">{escape(baseline)}</text>')
    out.append("</svg>")
    return "\n".join(out).encode("utf-8")


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5 and 5 times a power of ten at or above ``raw`` (an axis's tick step)."""
    import math

    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next((m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw), 10 * power)
