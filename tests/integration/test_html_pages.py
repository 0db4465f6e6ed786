"""The HTML pages in a real browser: the compliance report and the incident replay page are
rendered by headless Chromium, which must print no console message (no script error, no CSP
violation), paint a non-blank page, and show a hostile dealer ID as text, never as a script.

Chromium (Debian's ``chromium`` package) is looked up at /usr/bin/chromium, then on PATH; when it
is missing the tests skip, unless ``DEALTRAIL_REQUIRE_BROWSER=1`` (CI), where they fail.

What Chromium 156 prints on stderr with ``--enable-logging=stderr --v=0`` (found with the probe
pages below): every console message of the page, whatever its level, as

    [pid:tid:MMDD/HHMMSS.micros:INFO:CONSOLE:<line>] "<message>", source: <url> (<line>)

- ``console.error("x")`` -> ``INFO:CONSOLE:2] "x", source: file:///.../probe.html (2)`` (the
  same INFO level as ``console.log``: the level is not in the line);
- an uncaught exception -> ``INFO:CONSOLE:2] "Uncaught Error: x", source: ...``;
- an inline script blocked by the CSP -> ``INFO:CONSOLE:2] "Executing inline script violates
  the following Content Security Policy directive 'default-src 'none''. ... The action has been
  blocked.", source: ...``; a blocked image -> ``"Loading the image '...' violates the following
  Content Security Policy directive: ..."``.

The rest of stderr is the browser's own noise (dbus, vaapi/GPU, sandbox warnings, the Debian
wrapper script's shell complaint), never a ``CONSOLE`` line. The pages carry no script at all,
so the detector treats any console line, at any level, as a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image as mpimg
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.ingest.audit import audit_file
from dealtrail.simulator.builder import TableWriter
from dealtrail.simulator.run import write_simulation
from projections.reports.report import write_report
from projections.store.store import Store
from schemas import events as ev
from schemas.base import ActorRole, Envelope, Game
from schemas.codec import encode
from schemas.config import TableConfig

pytestmark = pytest.mark.browser

XSS = "<script>alert(1)</script>"
XSS_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
TABLE = "C691-XSS"
ROUND = "XSS-R2"
WINDOW = (1280, 2000)
BROWSER_TIMEOUT = 45.0
"""Seconds one Chromium run may take before it is killed (a run takes about 1-2 s)."""

# -- the browser ------------------------------------------------------------------------------

_CONSOLE = re.compile(r":CONSOLE[:(]\d+")
"""Chromium's console log line: ``...:INFO:CONSOLE:2] "msg", source: url (2)`` (new) or
``...:INFO:CONSOLE(2)] ...`` (older releases)."""
_PAGE_TROUBLE = re.compile(r"Uncaught|Content Security Policy|Refused to (?:execute|load|apply)", re.IGNORECASE)


def console_problems(stderr: str) -> list[str]:
    """The lines of Chromium's stderr that report something the page did: console messages of
    any level, uncaught exceptions, CSP violations. Browser noise (dbus, GPU, sandbox) is ignored."""
    return [line for line in stderr.splitlines() if _CONSOLE.search(line) or _PAGE_TROUBLE.search(line)]


def find_chromium() -> str | None:
    """Debian's chromium, or whatever ``chromium`` is on PATH."""
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def chromium() -> str:
    """The Chromium binary; skips (or fails with DEALTRAIL_REQUIRE_BROWSER=1) when there is none."""
    path = find_chromium()
    if path is None:
        message = "headless Chromium not found (/usr/bin/chromium or chromium on PATH): apt-get install chromium"
        if os.environ.get("DEALTRAIL_REQUIRE_BROWSER") == "1":
            pytest.fail(message + " (DEALTRAIL_REQUIRE_BROWSER=1)")
        pytest.skip(message)
    return path


@dataclass(frozen=True)
class Rendered:
    """One page as Chromium saw it: the serialized DOM, the stderr log and the screenshot."""

    dom: str
    stderr: str
    screenshot: Path

    @property
    def problems(self) -> list[str]:
        return console_problems(self.stderr)


def render(chromium: str, page: Path, out: Path) -> Rendered:
    """Load ``page`` once in headless Chromium: dump the DOM, take a screenshot, keep the log.
    The browser gets a fresh profile and runs in its own process group, killed on timeout."""
    shot = out / f"{page.stem}.png"
    with tempfile.TemporaryDirectory(prefix="dealtrail-chromium-") as profile:
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            f"--screenshot={shot}",
            "--dump-dom",
            page.resolve().as_uri(),
        ]
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=BROWSER_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"chromium did not finish {page.name} within {BROWSER_TIMEOUT:.0f} s")
    assert proc.returncode == 0, f"chromium exited with {proc.returncode} on {page.name}:\n{stderr[-3000:]}"
    assert shot.exists(), f"chromium wrote no screenshot of {page.name}:\n{stderr[-3000:]}"
    return Rendered(dom=stdout, stderr=stderr, screenshot=shot)


class _DomText(HTMLParser):
    """Start tags and text of a serialized DOM (entities decoded: the text a reader sees)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_dom(dom: str) -> _DomText:
    parser = _DomText()
    parser.feed(dom)
    parser.close()
    return parser


def assert_not_blank(png: Path) -> None:
    """The screenshot has the window's size and real content: a blank page is one flat colour."""
    pixels = mpimg.imread(png)
    assert pixels.shape[:2] == (WINDOW[1], WINDOW[0]), pixels.shape
    rgb = np.ascontiguousarray(pixels[..., :3])
    rgb8 = np.rint(rgb * 255).astype(np.uint32)
    colours = len(np.unique((rgb8[..., 0] << 16) | (rgb8[..., 1] << 8) | rgb8[..., 2]))
    inked = float((rgb.min(axis=2) < 0.9).mean())
    assert rgb.std() > 0.05, f"{png.name}: pixel std {rgb.std():.4f}, page looks blank"
    assert colours >= 32, f"{png.name}: only {colours} distinct colours, page looks blank"
    assert inked > 0.01, f"{png.name}: only {inked:.2%} of the pixels are not near-white"


def assert_script_free_with_text(rendered: Rendered, where: str) -> None:
    """No console message, no <script> element, the CSP in place and the dealer ID shown as text."""
    assert rendered.problems == [], "\n".join(rendered.problems)
    dom = parse_dom(rendered.dom)
    tags = [t for t, _ in dom.tags]
    assert "script" not in tags and not re.search(r"<script\b", rendered.dom, re.IGNORECASE)
    csp = [
        a.get("content") or "" for t, a in dom.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp and "default-src 'none'" in csp[0] and "script-src" not in csp[0], csp
    assert XSS_ESCAPED in rendered.dom, f"the dealer ID is not in the {where} as escaped text"
    assert XSS in "".join(dom.text), f"the dealer ID is not readable text in the {where}"


# -- the data ---------------------------------------------------------------------------------


def _xss_table() -> list[Envelope]:
    """One Chapter 691 table: a clean round by D-0001, then a round dealt by a dealer whose ID is
    a script tag, with a community card dealt face up, a card found face up in the deck and the
    stub discarded exposed; a third clean round closes it."""
    w = TableWriter(TABLE, Game.C691, datetime(2026, 11, 27, 18, 3, tzinfo=UTC))
    out: list[Envelope] = []

    def emit(cls: type[Envelope], **fields: Any) -> None:
        out.append(w.emit(cls, **fields))

    seats = ("SEAT_1", "SEAT_2", "SEAT_3", "SEAT_4", "SEAT_5", "SEAT_6")
    config = TableConfig(game=Game.C691, rules_submission_id="RS-XSS", seats=seats, wagers_enabled=frozenset({"MAIN"}))
    floor: dict[str, Any] = {"role": ActorRole.FLOOR, "actor_id": "F-01"}
    emit(ev.TableConfigured, config=config, **floor)
    emit(
        ev.DeviceRegistered,
        device_id="SHF-1",
        device_type="SHUFFLER",
        counts_each_shuffle=True,
        indicates_full_deck=True,
        **floor,
    )
    w.deck_id = "DK-1"
    emit(ev.DeckIntroduced, declared_count=54, jokers=2, **floor)

    def deal_round(round_id: str, round_no: int, dealer: str, irregular: bool) -> None:
        w.dealer_id = dealer  # the actor of every DEALER event
        emit(ev.ShuffleStarted, method="AUTOMATED", device_id="SHF-1")
        emit(ev.ShuffleCompleted, method="AUTOMATED", device_id="SHF-1", device_card_count=54, device_full_deck_ok=True)
        w.round_id = round_id
        emit(ev.RoundStarted, round_no=round_no, dealing_method="HAND", dealer_id=dealer)
        bettors = ("SEAT_2", "SEAT_4")
        for seat in bettors:
            emit(
                ev.WagerPlaced,
                wager_id=f"{round_id}-{seat}",
                seat=seat,
                wager_type="MAIN",
                amount=500,
                role=ActorRole.PLAYER,
                actor_id=f"P-{seat[5:]}",
            )
        emit(ev.NoMoreBetsAnnounced)
        emit(ev.DeckHeld, hand="LEFT")
        areas = ("BURN", "COMMUNITY_1", "COMMUNITY_2", "COMMUNITY_3", "COMMUNITY_4", "COMMUNITY_5")
        for i, (area, card) in enumerate(zip(areas, ("2C", "3C", "4C", "5C", "6C", "7C"), strict=True), start=1):
            emit(ev.CardDealt, deal_index=i, to_area=area, card=card, face="UP" if irregular and i == 3 else "DOWN")
        if irregular:
            emit(ev.CardFoundFaceUp, location="DECK", card="9S")
        emit(ev.StubCounted, count=48)
        emit(ev.StubDiscarded, exposed=irregular)
        for seat in bettors:
            emit(ev.WagerSettled, wager_id=f"{round_id}-{seat}", outcome="LOSS")
        emit(ev.RoundCompleted)
        w.round_id = None

    deal_round("XSS-R1", 1, "D-0001", irregular=False)
    deal_round(ROUND, 2, XSS, irregular=True)
    deal_round("XSS-R3", 3, "D-0001", irregular=False)
    return out


@dataclass(frozen=True)
class Pages:
    report: Path
    incident: Path
    db: Path


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Pages:
    """A small simulated shift plus the hostile table, audited; the report and the incident page."""
    folder = tmp_path_factory.mktemp("html-pages")
    events, db = folder / "events.jsonl", folder / "pages.duckdb"
    write_simulation(events, tables=3, hours=0.5, seed=5, error_rate=0.15)
    hostile = _xss_table()
    with events.open("ab") as fh:
        for event in hostile:
            fh.write(encode(event) + b"\n")
    with Store(db) as store:
        summary = audit_file(events, store)
    assert not summary.dead_letters, summary.dead_letters
    found = {(rule, sev) for (_g, rule, sev) in summary.detections}
    assert ("C691-DH-b-face-down", "integrity") in found, found
    report = write_report(db, folder / "report").html
    incident = folder / "incident.html"
    argv = ["replay", "--db", str(db), "--table", TABLE, "--round", ROUND, "--html", str(incident)]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return Pages(report=report, incident=incident, db=db)


# -- the detector, proven on probe pages ------------------------------------------------------

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def test_detector_catches_console_errors_and_uncaught_exceptions(chromium: str, tmp_path: Path) -> None:
    probe = tmp_path / "probe_error.html"
    probe.write_text(
        "<!DOCTYPE html><html><head><title>probe</title></head><body><p>probe page</p>\n"
        '<script>console.error("PROBE-CONSOLE-ERROR"); throw new Error("PROBE-UNCAUGHT");</script>\n'
        "</body></html>\n"
    )
    rendered = render(chromium, probe, tmp_path)
    problems = rendered.problems
    assert any("PROBE-CONSOLE-ERROR" in p for p in problems), rendered.stderr
    assert any("Uncaught Error: PROBE-UNCAUGHT" in p for p in problems), rendered.stderr
    assert len(problems) == 2, problems  # the browser's own noise is not reported


def test_detector_catches_a_csp_blocked_inline_script(chromium: str, tmp_path: Path) -> None:
    probe = tmp_path / "probe_csp.html"
    probe.write_text(
        f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        "<title>probe</title></head><body><p>probe page</p>\n"
        '<script>document.body.setAttribute("data-ran", "yes");</script>\n'
        "</body></html>\n"
    )
    rendered = render(chromium, probe, tmp_path)
    [problem] = rendered.problems
    assert "violates the following Content Security Policy directive" in problem, problem
    assert "data-ran" not in rendered.dom.split("</script>")[-1]  # the script did not run
    assert 'data-ran="yes"' not in rendered.dom


def test_detector_is_quiet_on_a_clean_page(chromium: str, tmp_path: Path) -> None:
    probe = tmp_path / "probe_clean.html"
    probe.write_text(
        f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        "<title>probe</title></head><body><p>nothing to see</p></body></html>\n"
    )
    rendered = render(chromium, probe, tmp_path)
    assert rendered.problems == [], rendered.problems
    assert "nothing to see" in rendered.dom
    assert "CONSOLE" not in rendered.stderr


def test_blank_screenshot_is_detected(chromium: str, tmp_path: Path) -> None:
    probe = tmp_path / "probe_blank.html"
    probe.write_text("<!DOCTYPE html><html><head><title>blank</title></head><body></body></html>\n")
    rendered = render(chromium, probe, tmp_path)
    with pytest.raises(AssertionError, match="blank"):
        assert_not_blank(rendered.screenshot)


# -- the pages --------------------------------------------------------------------------------


def test_compliance_report_renders_cleanly(chromium: str, pages: Pages, tmp_path: Path) -> None:
    rendered = render(chromium, pages.report, tmp_path)
    assert_script_free_with_text(rendered, "compliance report")
    assert_not_blank(rendered.screenshot)
    dom = parse_dom(rendered.dom)
    assert "svg" in [t for t, _ in dom.tags], "the charts are missing"
    text = "".join(dom.text)
    assert "Findings by dealer" in text and TABLE in text


def test_incident_page_renders_cleanly(chromium: str, pages: Pages, tmp_path: Path) -> None:
    rendered = render(chromium, pages.incident, tmp_path)
    assert_script_free_with_text(rendered, "incident page")
    assert_not_blank(rendered.screenshot)
    text = "".join(parse_dom(rendered.dom).text)
    assert f"Round {ROUND}, dealer {XSS}" in text
    assert f"DEALER {XSS}" in text  # the actor column of the dealer's events
    assert "C691-DH-b-face-down" in text and "dealt face up" in text
