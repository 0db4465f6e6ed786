"""The command line: control-chart baselines and pictures (``dealtrail baseline freeze|list``,
``dealtrail chart``; issue 50)."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dealtrail.cli.common import _DB, _fail, _output_file, _period, app, console, load

if TYPE_CHECKING:
    from dealtrail.settings import Settings
    from projections.models.control import ChartSpec

baseline_app = typer.Typer(
    help="Control-chart baselines: the centre line and spread charts are judged against.", no_args_is_help=True
)
app.add_typer(baseline_app, name="baseline")

_KIND = typer.Option(help="The charts: dealer or table.")
_SLOT = typer.Option(
    help="Their points: shift, day or week (default: a dealer's DEALTRAIL_CONTROL__DEALER_SLOT, a table's day)."
)
_CATEGORY = typer.Option(help="The incidents counted: all, voiding, procedural or integrity.")


def chart_spec(settings: Settings, kind: str, slot: str | None, category: str) -> ChartSpec:
    """A chart of ``kind``/``slot``/``category`` with the settings' numbers (``DEALTRAIL_CONTROL__*``, the
    casino's time zone); one ``error:`` line and exit 2 for an unknown kind, slot or category."""
    from projections.models.control import CATEGORIES, KINDS, SLOTS, ChartSpec, slots_for

    if slot is None and kind in KINDS:
        slot = slots_for(kind, settings.control.dealer_slot)[0]
    if kind not in KINDS or slot not in SLOTS or category not in CATEGORIES:
        raise _fail(
            f"--kind is {' or '.join(KINDS)}, --slot {', '.join(SLOTS)}, --category {', '.join(CATEGORIES)}; "
            f"got {kind}/{slot}/{category}"
        )
    c = settings.control
    return ChartSpec(kind, slot, category, c.min_rounds, c.cusum_k, c.cusum_h, settings.timezone)


@baseline_app.command("freeze")
def baseline_freeze(
    from_: Annotated[str, typer.Option("--from", help="Start of the period (ISO 8601 with zone).")],
    to: Annotated[str, typer.Option(help="End of the period, exclusive (ISO 8601 with zone).")],
    kind: Annotated[str, _KIND] = "dealer",
    slot: Annotated[str | None, _SLOT] = None,
    category: Annotated[str, _CATEGORY] = "all",
    note: Annotated[str, typer.Option(help="Why this period is the baseline.")] = "",
    db: Annotated[Path | None, typer.Option(help="DuckDB file (this process writes it).", show_default=_DB)] = None,
) -> None:
    """Freeze the centre line and sigma_z of a period as a new baseline record (never overwritten);
    charts drawn afterwards are judged against it. Recorded in the access log."""
    from dealtrail.cli.console import _log, _open_writer
    from projections.records.baselines import BaselineError, freeze, label
    from projections.store.store import Store

    settings = load()
    start, end = _period(from_, to)
    if start is None or end is None:
        raise _fail("--from and --to are both needed")
    spec = chart_spec(settings, kind, slot, category)
    db = db or settings.db
    if not db.exists():
        raise _fail(f"no dealtrail database at {db}")
    store = _open_writer(db, settings)
    assert isinstance(store, Store)
    by = f"cli:{getpass.getuser()}"
    with store:
        try:
            b = freeze(store.con, spec, start, end, by, datetime.now(UTC), note)
        except BaselineError as exc:
            _log(store, "baseline_frozen", f"{kind}/{spec.slot}/{category} {from_} to {to}: {exc}", "refused")
            raise _fail(str(exc), code=1) from None
        _log(store, "baseline_frozen", f"{b.baseline_id} {kind}/{spec.slot}/{category} {label(b)}")
    console.print(f"froze {label(b)}", soft_wrap=True, markup=False, highlight=False)


@baseline_app.command("list")
def baseline_list(
    db: Annotated[Path | None, typer.Option(help="DuckDB file (read only).", show_default=_DB)] = None,
) -> None:
    """Every baseline frozen, newest first."""
    from projections.records.baselines import history
    from projections.store.store import connect_read_only

    settings = load()
    con = connect_read_only(db or settings.db)
    try:
        rows = history(con)
    finally:
        con.close()
    if not rows:
        console.print("no baseline frozen", markup=False)
    for b in rows:
        console.print(
            f"{b.baseline_id}  {b.kind}/{b.slot}/{b.category}  {b.period_start:%Y-%m-%d %H:%M} to "
            f"{b.period_end:%Y-%m-%d %H:%M} UTC  u-bar {b.u_bar:.4f}  sigma_z {b.sigma_z:.4f}  "
            f"{b.points} points  by {b.frozen_by} at {b.frozen_at:%Y-%m-%d %H:%M} UTC  {b.note}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )


@app.command("chart")
def chart_picture(
    subject: Annotated[str, typer.Argument(help="The dealer or table ID.")],
    out: Annotated[Path, typer.Option(help="The picture to write (.png or .svg).")],
    kind: Annotated[str, _KIND] = "dealer",
    slot: Annotated[str | None, _SLOT] = None,
    category: Annotated[str, _CATEGORY] = "all",
    from_: Annotated[str | None, typer.Option("--from", help="Start of the period (ISO 8601 with zone).")] = None,
    to: Annotated[str | None, typer.Option(help="End of the period, exclusive (ISO 8601 with zone).")] = None,
    db: Annotated[Path | None, typer.Option(help="DuckDB file (read only).", show_default=_DB)] = None,
) -> None:
    """Draw a dealer's or a table's control chart (points, centre line, limits, signals, the
    baseline it was judged against) to a picture."""
    from projections.models.control import chart
    from projections.records.baselines import in_force, label
    from projections.reports.control_chart import render
    from projections.store.store import connect_read_only

    settings = load()
    _output_file(out, "--out")
    if out.suffix not in (".png", ".svg"):
        raise _fail("--out must end in .png or .svg")
    start, end = _period(from_, to)
    spec = chart_spec(settings, kind, slot, category)
    con = connect_read_only(db or settings.db)
    try:
        baseline = in_force(con, spec)
        points = chart(con, spec, start, end, subject, baseline)
    finally:
        con.close()
    if not points:
        raise _fail(f"no round of {kind} {subject} in the period", code=1)
    data = render(points, f"{kind.capitalize()} {subject}", spec, label(baseline), out.suffix[1:])
    out.write_bytes(data)
    hollow, signals = sum(not p["solid"] for p in points), sum(p["signal"] for p in points)
    console.print(f"wrote {out} ({len(points)} points, {hollow} hollow, {signals} signals)", markup=False)
