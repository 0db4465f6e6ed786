"""The console's control-chart picture (issue 50) escapes every text it draws and marks each
signal, hollow point and limit."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from projections.models.control import ChartSpec
from projections.reports.control_chart import page_svg


def _point(i: int, u: float, solid: bool = True, signal: bool = False) -> dict[str, object]:
    at = datetime(2026, 11, 2, 6) + timedelta(hours=8 * i)
    return {"slot_start": at, "slot_start_utc": at.replace(tzinfo=UTC), "u": u, "u_bar": 5.0, "ucl": 12.0,
            "lcl": 0.0, "ucl_u": 11.0, "solid": solid, "signal": signal, "errors": int(u), "rounds": 1000}  # fmt: skip


def test_the_picture_escapes_its_texts_and_draws_signals_and_hollow_points() -> None:
    points = [_point(0, 4.0), _point(1, 2.0, solid=False), _point(2, 20.0, signal=True)]
    svg = page_svg(points, 'Dealer <script>alert("x")</script>&', ChartSpec("dealer", "shift"), "baseline <b>")
    root = ET.fromstring(svg)  # well-formed XML: nothing a subject's name holds breaks out of it
    texts = " ".join("".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert 'Dealer <script>alert("x")</script>&' in texts and "baseline <b>" in texts
    assert b"<script" not in svg
    circles = list(root.iter("{http://www.w3.org/2000/svg}circle"))
    assert sum(c.get("fill") == "#fff" for c in circles) == 2  # the hollow point and its legend
    assert sum(c.get("stroke") == "#d7301f" for c in circles) == 2  # the signal's ring and its legend


def test_a_chart_without_limits_yet_is_drawn_without_them() -> None:
    points = [{**_point(0, 0.0), "u_bar": None, "ucl": None, "lcl": None, "ucl_u": None}]
    root = ET.fromstring(page_svg(points, "Table T", ChartSpec("table", "day"), "no baseline"))
    assert not [p for p in root.iter("{http://www.w3.org/2000/svg}path") if p.get("stroke") == "#b2182b"]
