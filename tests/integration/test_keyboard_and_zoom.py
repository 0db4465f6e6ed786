"""Keyboard use and 200 % zoom of the console, in a real browser (issue 36, WCAG 2.1.1, 2.4.3,
2.4.7, 1.4.4 and 1.4.10): on the findings page and a finding page, Tab reaches every control in
document order and each shows a visible focus ring; the review form is filled and submitted with
the keyboard alone; at a 640 px wide viewport with device scale 2 (a 1280 px screen at 200 %)
no console page scrolls sideways and no text is clipped (a wide table scrolls inside its own
keyboard-reachable region, as WCAG 1.4.10 allows for data tables).

Screenshots at that zoom go to ``DEALTRAIL_SHOTS`` when set (else the test's folder). Skips
without Chromium or Playwright unless ``DEALTRAIL_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from projections.store.store import Store
from tests.helpers import need_browser
from tests.integration.test_accessibility import ARGS, CHROMIUM, PASSWORD, _pages, served  # noqa: F401

pytestmark = pytest.mark.browser

CONTROLS = "a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]:not([tabindex='-1'])"
"""What a keyboard user must reach with Tab (the console sets no positive tabindex)."""

_MARK_CONTROLS = """(sel) => {
  const seen = [];
  for (const el of document.querySelectorAll(sel)) {
    const style = getComputedStyle(el);
    const box = el.getBoundingClientRect();
    if (el.disabled || style.visibility === 'hidden' || style.display === 'none') continue;
    if (box.width === 0 && box.height === 0 && !el.matches('a.skip')) continue;
    if (el.closest('details:not([open])') && el.tagName !== 'SUMMARY') continue;
    el.dataset.kbd = String(seen.length);
    const named = el.name ? '[' + el.name + ']' : '';
    seen.push(el.tagName.toLowerCase() + named + ' ' + (el.textContent || '').trim().slice(0, 30));
  }
  return seen;
}"""

_FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const s = getComputedStyle(el);
  const ring = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none';
  return {index: el.dataset.kbd === undefined ? null : Number(el.dataset.kbd), ring: ring,
          what: el.tagName.toLowerCase() + ' ' + (el.textContent || '').trim().slice(0, 30)};
}"""

_OVERFLOW = """() => {
  const doc = document.scrollingElement;
  const clipped = [];
  for (const el of document.querySelectorAll('body *')) {
    const s = getComputedStyle(el);
    if (s.display === 'none' || s.visibility === 'hidden') continue;
    const hides = ['hidden', 'clip'].includes(s.overflowX) || ['hidden', 'clip'].includes(s.overflowY);
    const ellipsis = s.textOverflow === 'ellipsis';
    if (!(hides || ellipsis) || !(el.textContent || '').trim()) continue;
    if (el.matches('a.skip, .visually-hidden, .sr-only')) continue;
    if (el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1) {
      clipped.push(el.tagName.toLowerCase() + '.' + el.className + ' ' + el.textContent.trim().slice(0, 40));
    }
  }
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    const box = el.getBoundingClientRect();
    if (box.right > doc.clientWidth + 1 && el.parentElement.getBoundingClientRect().right <= doc.clientWidth + 1) {
      const cls = el.className ? '.' + el.className : '';
      wide.push(el.tagName.toLowerCase() + cls + ' ' + Math.round(box.width) + 'px');
    }
  }
  return {scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth, clipped: clipped, wide: wide.slice(0, 4)};
}"""


@pytest.fixture()
def browser() -> Iterator[Any]:
    """Debian's Chromium driven by Playwright."""
    if not Path(CHROMIUM).exists():
        need_browser(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need_browser("Playwright is not installed (make install)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def _sign_in(page: Any, base: str) -> None:
    page.goto(base + "/login")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))


def _tab_through(page: Any) -> tuple[list[str], list[int], list[str]]:
    """Tab from the top of the page until focus leaves it: the controls in document order, the
    indexes Tab reached in turn, and the controls focused without a visible ring."""
    controls = page.evaluate(_MARK_CONTROLS, CONTROLS)
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); }")
    reached: list[int] = []
    unringed: list[str] = []
    for _ in range(len(controls) + 5):
        page.keyboard.press("Tab")
        focused = page.evaluate(_FOCUSED)
        if focused is None or (reached and focused["index"] == reached[0]):
            break
        if focused["index"] is not None:
            reached.append(focused["index"])
        if not focused["ring"]:
            unringed.append(focused["what"])
    return controls, reached, unringed


def test_tab_reaches_every_control_of_the_findings_and_a_finding_page_in_order_with_a_visible_focus(
    served: tuple[str, Store, Path],  # noqa: F811
    browser: Any,
) -> None:
    base, store, periods = served
    finding = dict(_pages(store, periods))["finding"]
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    _sign_in(page, base)
    for path in ("/findings", finding):
        page.goto(base + path)
        controls, reached, unringed = _tab_through(page)
        assert len(controls) > 10, path
        assert reached == list(range(len(controls))), (path, [controls[i] for i in reached[:5]], controls[:5])
        assert not unringed, (path, unringed[:5])


def test_every_page_shows_a_visible_focus_ring_on_each_control_tab_reaches(
    served: tuple[str, Store, Path],  # noqa: F811
    browser: Any,
) -> None:
    # WCAG 2.4.7 everywhere (issue 47, item 7): the replay's stage hid its ring (outline: none)
    base, store, periods = served
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(base + "/login")
    _, _, unringed = _tab_through(page)
    missing = {"sign-in": unringed} if unringed else {}
    _sign_in(page, base)
    for name, path in _pages(store, periods):
        page.goto(base + path)
        page.wait_for_load_state("networkidle" if name == "replay" else "load")
        _, _, unringed = _tab_through(page)
        if unringed:
            missing[name] = unringed[:5]
        if name == "replay":  # the stage the arrow keys step (focused by the page's script), reached back with Tab
            page.keyboard.press("Tab")  # a keyboard user, then focus on the stage as its script puts it
            page.evaluate("() => document.querySelector('#replay').focus()")
            focused = page.evaluate(_FOCUSED)
            assert focused is not None and focused["what"].startswith("div"), focused
            if not focused["ring"]:
                missing["replay stage"] = [focused["what"]]
    assert not missing, missing


def test_the_review_form_is_filled_and_submitted_with_the_keyboard_alone(
    served: tuple[str, Store, Path],  # noqa: F811
    browser: Any,
) -> None:
    base, store, periods = served
    finding = dict(_pages(store, periods))["finding"]
    finding_id = finding.rsplit("/", 1)[1]
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    _sign_in(page, base)
    page.goto(base + finding)
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); }")
    for _ in range(400):  # Tab to the review form's action
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.name") == "action":
            break
    else:
        pytest.fail("Tab never reached the review form's action")
    page.keyboard.press("ArrowDown")  # acknowledge -> assign
    page.keyboard.press("Tab")  # assignee
    assert page.evaluate("() => document.activeElement.name") == "assignee"
    page.keyboard.press("ArrowDown")  # the first user: ada
    page.keyboard.press("Tab")  # cause
    page.keyboard.press("Tab")  # corrective action
    page.keyboard.press("Tab")  # note
    assert page.evaluate("() => document.activeElement.name") == "note"
    page.keyboard.type("assigned from the keyboard")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent.trim()") == "Record review"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    rows = (
        store.con.cursor()
        .execute("SELECT type, user_name, assignee, note FROM reviews WHERE finding_id = ?", [finding_id])
        .fetchall()
    )
    assert rows == [("FindingAssigned", "ada", "ada", "assigned from the keyboard")], rows


def test_no_console_page_scrolls_sideways_or_clips_text_at_200_percent_zoom(
    served: tuple[str, Store, Path],  # noqa: F811
    browser: Any,
    tmp_path: Path,
) -> None:
    base, store, periods = served
    shots = Path(os.environ.get("DEALTRAIL_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_context(viewport={"width": 640, "height": 450}, device_scale_factor=2).new_page()
    page.goto(base + "/login")
    failures: dict[str, Any] = {}

    def check(name: str) -> None:
        page.screenshot(path=str(shots / f"zoom-{name}.png"), full_page=True)
        got = page.evaluate(_OVERFLOW)
        if got["scrollWidth"] > got["clientWidth"] + 1 or got["clipped"]:
            failures[name] = got

    check("sign-in")
    _sign_in(page, base)
    for name, path in _pages(store, periods):
        page.goto(base + path)
        page.wait_for_load_state("networkidle" if name == "replay" else "load")
        check(name)
    assert not failures, "\n".join(f"{name}: {got}" for name, got in failures.items())
