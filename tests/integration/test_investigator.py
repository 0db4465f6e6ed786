"""The investigator's workbench (issue 22, items 2 and 3): the step-through replay of a round or
a time window (its API, its page and its script, in a real browser too), the pictures that show
what a finding is about, the case page of a cause and its consequences, and the incident page of
``dealtrail replay --html`` split into pages under 1 MB.

The store is a 3-table hour simulated with errors in half the rounds (seed 1): it holds an
exposed player card, two cards found face up, a dealer's hand not set the house way, a dice
total announced wrong, stubs that put the deck at the wrong total and overdue remedies.

Screenshots go to ``DEALTRAIL_SHOTS`` when that folder is set (else the test's temporary
folder). The browser test skips without Chromium or Playwright unless
``DEALTRAIL_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from projections.models.reviews import ReviewDue
from projections.store.store import Store
from tests.helpers import need_browser, served_app

PASSWORD = "ivy-investigates"
DUE = ReviewDue(24, 24, 72)
LIMIT = 1_000_000
"""The size every replay page and every page of ``dealtrail replay --html`` stays under (bytes)."""


@pytest.fixture(scope="module")
def workbench_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.run import write_simulation

    folder = tmp_path_factory.mktemp("workbench")
    events, db = folder / "events.jsonl", folder / "wb.duckdb"
    write_simulation(
        events, tables=3, hours=1.0, seed=2, error_rate=0.5
    )  # a seed whose hour holds every rule used here
    with Store(db) as store:
        audit_file(events, store, snapshot_every=1000)  # as the CLI's default: replays start from snapshots
        auth.add_user(store.con, "ivy", "reviewer", PASSWORD, datetime(2026, 11, 1, tzinfo=UTC))
    return db


@pytest.fixture()
def store(workbench_db: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "wb.duckdb"
    shutil.copy(workbench_db, db)
    s = Store(db)
    yield s
    s.close()


@pytest.fixture()
def client(store: Store) -> TestClient:
    c = TestClient(create_app(store, ConsoleConfig(DUE, "w" * 48)))
    page = c.get("/login")
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m
    r = c.post("/login", data={"username": "ivy", "password": PASSWORD, "csrf": m.group(1), "next": "/"})
    assert r.status_code == 200
    return c


def _finding(store: Store, rule: str) -> dict[str, Any]:
    cur = store.con.execute(
        "SELECT finding_id, table_id, round_id, trigger_event_id, evidence_event_ids FROM findings"
        " WHERE rule_id = ? AND revision = 0 ORDER BY observed_at LIMIT 1",
        [rule],
    )
    cols = [d[0] for d in cur.description]
    rows = cur.fetchall()
    assert rows, f"the workbench store has no {rule}"
    return dict(zip(cols, rows[0], strict=True))


# -- the replay API ---------------------------------------------------------------------------


def test_replay_api_steps_through_a_round_event_by_event_with_the_layout_and_each_finding_at_its_event(
    client: TestClient, store: Store
) -> None:
    f = _finding(store, "PGP-645a.14-d-player-card-exposed")
    r = client.get(f"/api/v1/tables/{f['table_id']}/replay", params={"round": f["round_id"]})
    assert r.status_code == 200, r.text
    body = r.json()
    ids = [row[0] for row in store.con.execute(
        "SELECT event_id FROM events WHERE table_id = ? AND round_id = ? ORDER BY seq, arrival",
        [f["table_id"], f["round_id"]],
    ).fetchall()]  # fmt: skip
    steps = body["steps"]
    assert body["total"] == len(ids) == len(steps) and [s["event_id"] for s in steps] == ids
    assert [s["i"] for s in steps] == list(range(len(ids)))
    # the finding appears at the event that raised it, and only there (a later revision at its remedy)
    at = [
        s["i"] for s in steps if any(x["finding_id"] == f["finding_id"] and x["revision"] == 0 for x in s["findings"])
    ]
    assert at == [ids.index(f["trigger_event_id"])]
    # the layout grows as the cards are dealt: 7 stacks of 7 at the end of the deal, all face down
    dealt = [sum(len(a["cards"]) for a in s["layout"]) for s in steps]
    assert dealt == sorted(dealt[: dealt.index(max(dealt)) + 1]) + dealt[dealt.index(max(dealt)) + 1 :]
    assert max(dealt) == 49
    last = steps[ids.index(f["trigger_event_id"])]
    assert last["round"]["round_id"] == f["round_id"] and last["decks"] and "remedies" in last
    # the exposure owes a remedy from its event on
    assert any(o["finding_id"] == f["finding_id"] for o in last["remedies"])


def test_replay_api_leaves_out_decks_removed_before_the_window_and_shows_one_removed_inside_it(
    client: TestClient, store: Store
) -> None:
    """A table changes decks: after a month its state names hundreds of removed decks. A replay
    lists the decks at the table and those removed inside its window, and says how many it left out."""
    removals = store.con.execute(
        """SELECT table_id, seq, occurred_at FROM events WHERE type = 'DeckRemoved' ORDER BY table_id, seq"""
    ).fetchall()
    assert removals, "the workbench store has no DeckRemoved"
    table, seq, at = removals[0]
    inside = client.get(
        f"/api/v1/tables/{table}/replay",
        params={"from": (at - timedelta(seconds=1)).isoformat(), "to": (at + timedelta(minutes=1)).isoformat()},
    ).json()
    removed = {
        d["deck_id"]
        for s in inside["steps"]
        if s["seq"] >= seq
        for d in s["decks"]
        if d["status"] == "removed from the table"
    }
    assert removed and inside["decks_removed_before"] == 0  # removed inside the window: shown as removed
    later = store.con.execute(
        "SELECT round_id FROM events WHERE table_id = ? AND seq > ? AND round_id IS NOT NULL ORDER BY seq LIMIT 1",
        [table, seq],
    ).fetchone()
    assert later is not None
    after = client.get(f"/api/v1/tables/{table}/replay", params={"round": later[0]}).json()
    assert after["decks_removed_before"] >= len(removed)
    listed = {d["deck_id"] for s in after["steps"] for d in s["decks"]}
    assert listed and not listed & removed  # the decks at the table are listed, the removed ones are not


def test_a_deck_brought_back_with_the_same_id_is_listed_again_in_a_replay(workbench_db: Path, tmp_path: Path) -> None:
    """A deck removed before the window and introduced again inside it (the same deck ID) is at
    the table again: the steps list it from its DeckIntroduced on, not only the removed count."""
    from dealtrail.ingest.audit import audit_file
    from dealtrail.investigate.replay import Window
    from dealtrail.investigate.replay_view import replay_page
    from schemas.chain import Chainer
    from schemas.codec import decode

    events = workbench_db.parent / "events.jsonl"
    trail = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    table = "C691-01"
    mine = sorted((e for e in trail if e["table_id"] == table), key=lambda e: e["seq"])
    gone = next(e for e in mine if e["type"] == "DeckRemoved")
    back = next(e for e in mine if e["type"] == "DeckIntroduced" and e["seq"] > gone["seq"])
    old, new = gone["deck_id"], back["deck_id"]
    assert old and new and old != new
    out = tmp_path / "back.jsonl"
    chainer = Chainer()
    with out.open("wb") as fh:
        for e in trail:
            line = json.dumps(e, separators=(",", ":"))
            if e["table_id"] == table and e["seq"] >= back["seq"]:
                line = line.replace(f'"{new}"', f'"{old}"')  # the new deck takes the removed deck's ID
            _, data = chainer.stamp_encoded(decode(line.encode()))
            fh.write((data if data is not None else line.encode()) + b"\n")
    with Store(tmp_path / "back.duckdb") as store:
        audit_file(out, store, snapshot_every=1000)
        start = datetime.fromisoformat(gone["occurred_at"]) + timedelta(microseconds=1)  # just after the removal
        view = replay_page(store.con, table, Window(start=start, end=start + timedelta(minutes=5)))
    assert view.decks_removed_before >= 1
    before = [s for s in view.steps if s["seq"] < back["seq"]]
    after = [s for s in view.steps if s["seq"] >= back["seq"]]
    assert after
    assert all(old not in {d["deck_id"] for d in s["decks"]} for s in before)  # removed before the window
    assert all(any(d["deck_id"] == old and d["status"] != "removed from the table" for d in s["decks"]) for s in after)
    assert after[0]["current_deck"] == old


def test_replay_api_pages_a_time_window_and_every_page_is_under_1_mb(client: TestClient, store: Store) -> None:
    table, start = store.con.execute(
        "SELECT table_id, min(occurred_at) FROM events GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
    ).fetchall()[0]
    end = start + timedelta(minutes=15)
    params = {"from": start.isoformat(), "to": end.isoformat()}
    first = client.get(f"/api/v1/tables/{table}/replay", params=params)
    assert first.status_code == 200
    body = first.json()
    n = store.con.execute(
        "SELECT count(*) FROM events WHERE table_id = ? AND occurred_at >= ? AND occurred_at < ?", [table, start, end]
    ).fetchall()[0][0]
    assert body["total"] == n and body["pages"] == -(-n // body["page_size"]) > 1
    seqs: list[int] = []
    for page in range(1, body["pages"] + 1):
        r = client.get(f"/api/v1/tables/{table}/replay", params={**params, "page": page})
        assert r.status_code == 200 and len(r.content) < LIMIT
        seqs += [s["seq"] for s in r.json()["steps"]]
    assert len(seqs) == n and seqs == sorted(seqs)
    # each page lists every finding revision of the window with the step that raised it
    raised = store.con.execute(
        """SELECT count(*) FROM findings f JOIN events e ON e.event_id = f.trigger_event_id AND e.table_id = f.table_id
           WHERE f.table_id = ? AND e.occurred_at >= ? AND e.occurred_at < ?""",
        [table, start, end],
    ).fetchall()[0][0]
    assert len(body["findings"]) == raised and all(0 <= f["i"] < n for f in body["findings"])


def test_replay_api_needs_authentication_and_refuses_a_window_it_cannot_show(client: TestClient, store: Store) -> None:
    f = _finding(store, "PGP-645a.14-i-house-way")
    url = f"/api/v1/tables/{f['table_id']}/replay"
    anonymous = TestClient(client.app)
    assert anonymous.get(url, params={"round": f["round_id"]}).status_code == 401
    assert (
        anonymous.get(
            "/replay", params={"table": f["table_id"], "round": f["round_id"]}, follow_redirects=False
        ).status_code
        == 303
    )
    assert anonymous.get("/replay-assets/replay.js", follow_redirects=False).status_code == 303
    assert client.get(url).status_code == 200  # no round, no window: the table's last 24 hours (issue 47)
    # every request the API's document allows is answered (issue 47, item 7): a round with a
    # window is the round's events in it; a window holding no time, or none of the round, is a 404
    whole = client.get(url, params={"round": f["round_id"]}).json()
    times = [s["time"] for s in whole["steps"]]
    middle = times[len(times) // 2]
    part = client.get(url, params={"round": f["round_id"], "from": middle}).json()
    assert 0 < len(part["steps"]) < len(whole["steps"]), (len(part["steps"]), len(whole["steps"]))
    assert all(s["round_id"] == f["round_id"] and s["time"] >= middle for s in part["steps"])
    assert client.get(url, params={"round": f["round_id"], "from": "2026-01-01T00:00:00Z"}).status_code == 200
    assert client.get(url, params={"round": f["round_id"], "to": "2026-01-01T00:00:00Z"}).status_code == 404
    backwards = {"from": "2026-11-27T19:00:00Z", "to": "2026-11-27T18:00:00Z"}
    assert client.get(url, params=backwards).status_code == 404
    # a window longer than a day: its first day, and the answer says what was asked
    too_long = {"from": "2026-11-27T00:00:00Z", "to": "2026-11-29T00:00:00Z"}
    cut = client.get(url, params=too_long)
    assert cut.status_code == 200, cut.text
    assert cut.json()["window"]["to"] == "2026-11-28T00:00:00+00:00"
    assert cut.json()["window"]["asked_to"] == "2026-11-29T00:00:00+00:00"
    assert "asked_to" not in client.get(url, params={"from": "2026-11-27T00:00:00Z"}).json()["window"]
    assert client.get(url, params={"round": "no-such-round"}).status_code == 404
    assert client.get(url, params={"round": f["round_id"], "rounds": "x"}).status_code == 422  # unknown parameter


def test_replay_page_is_a_small_shell_whose_script_the_console_serves(client: TestClient, store: Store) -> None:
    f = _finding(store, "PGP-645a.14-f-two-face-up")
    page = client.get("/replay", params={"table": f["table_id"], "round": f["round_id"], "finding": f["finding_id"]})
    assert page.status_code == 200 and len(page.content) < 20_000
    assert '<script src="/replay-assets/replay.js" defer></script>' in page.text
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.text)  # no inline script: the CSP forbids it
    window = {"table": f["table_id"], "from": "2026-11-27T18:00:00Z", "to": "2026-11-27T18:20:00Z"}
    page = client.get("/replay", params=window)
    assert page.status_code == 200 and 'data-from="2026-11-27T18:00:00+00:00"' in page.text
    assert client.get("/replay", params={**window, "to": "2026-11-29T18:00:00Z"}).status_code == 422
    assert client.get("/replay", params={"table": "NO-SUCH-TABLE", "round": "R"}).status_code == 404
    js = client.get("/replay-assets/replay.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert client.get("/replay-assets/other.js").status_code == 404
    # the finding page and the table page link to it
    assert f"/replay?table={f['table_id']}&amp;round={f['round_id']}" in client.get(f"/findings/{f['finding_id']}").text
    assert 'action="/replay"' in client.get(f"/tables/{f['table_id']}").text


# -- pictures that show the breach --------------------------------------------------------------


def _breach(html: str) -> str:
    m = re.search(r'<section class="box investigate" id="breach">(.*?)</section>', html, re.S)
    assert m, "no breach picture on the finding page"
    return m.group(1)


def test_finding_page_of_an_exposure_marks_the_exposed_card_and_who_exposed_it(
    client: TestClient, store: Store
) -> None:
    f = _finding(store, "PGP-645a.14-d-player-card-exposed")
    card = store.con.execute(
        "SELECT payload->>'card' FROM events WHERE event_id = ?", [f["evidence_event_ids"][0]]
    ).fetchall()[0][0]
    part = _breach(client.get(f"/findings/{f['finding_id']}").text)
    assert "The exposed card" in part and "Exposed by</dt><dd>dealer" in part
    from projections.display.cards import card_face

    assert re.search(rf'class="pc[^"]* mark-exposed" title="{re.escape(card_face(card)["label"])} \(face up\)', part)


def _exposed(store: Store, f: dict[str, Any]) -> tuple[str, str]:
    """The (event ID, card code) of the finding's cited ``CardExposed``."""
    rows = store.con.execute(
        "SELECT event_id, payload->>'card' FROM events WHERE event_id IN (SELECT unnest(?)) AND type = 'CardExposed'",
        [list(f["evidence_event_ids"])],
    ).fetchall()
    assert rows, "the finding cites no CardExposed"
    return str(rows[0][0]), str(rows[0][1])


def test_finding_page_of_a_dealer_exposure_draws_the_exposed_card_face_up_and_outlined_in_the_dealers_hand(
    client: TestClient, store: Store
) -> None:
    f = _finding(store, "PGP-645a.14-e-dealer-bank-exposed")
    _, code = _exposed(store, f)
    from projections.display.cards import card_face

    part = _breach(client.get(f"/findings/{f['finding_id']}").text)
    layout = part.split("<details", 1)[1]  # the layout at the finding's event
    label = re.escape(card_face(code)["label"])
    # face up and outlined where it lies (the simulator's "dealer's" card is stack 1's first card,
    # which lies in the hand of the starting position)
    hands = re.findall(r'<div class="name">([^<]*)</div>(.*?)</div>', layout, re.S)
    where = [
        name for name, cards in hands if re.search(rf'class="pc[^"]* mark-cited" title="{label} \(face up\)', cards)
    ]
    assert len(where) == 1, layout[:800]
    assert re.fullmatch(r"(Dealer|Bank|Seat \d): 7 cards \(stack \d\)", where[0])  # the stacks became hands
    assert not any(name.startswith("Stack") for name, _ in hands)


def test_the_round_as_it_lay_draws_pai_gow_hands_not_stacks_and_the_exposed_card_face_up(
    client: TestClient, store: Store
) -> None:
    f = _finding(store, "PGP-645a.14-e-dealer-bank-exposed")
    _, code = _exposed(store, f)
    from projections.display.cards import card_face

    html = client.get(f"/findings/{f['finding_id']}").text
    m = re.search(r"<h2>The round as it lay(.*?)</section>", html, re.S)
    assert m, "no round layout on the finding page"
    names = re.findall(r'<div class="name">([^<]*)</div>', m.group(1))
    assert len(names) == 7 and not any(n.startswith("Stack") for n in names), names
    assert any(n.startswith("Dealer: 7 cards") for n in names), names
    assert f'title="{card_face(code)["label"]} (face up)"' in m.group(1)


def test_replay_steps_show_an_exposed_card_face_up_and_pai_gow_hands_as_seven_cards_then_as_set(
    client: TestClient, store: Store
) -> None:
    f = _finding(store, "PGP-645a.14-e-dealer-bank-exposed")
    exposed_id, code = _exposed(store, f)
    r = client.get(f"/api/v1/tables/{f['table_id']}/replay", params={"round": f["round_id"], "page_size": 200})
    steps = r.json()["steps"]
    at = next(s for s in steps if s["event_id"] == exposed_id)
    shown = [c for a in at["layout"] for c in a["cards"] if c[0] == code]
    assert [c[1] for c in shown] == [True] and [c[3] for c in shown] == [exposed_id]  # outlined where it is cited
    assert re.fullmatch(r"2026-\d\d-\d\d \d\d:\d\d:\d\d\+00:00", at["shown"])  # to the second, with its offset
    # a round whose dealer's hand is set, stack 1 delivered to the dealer (whose cards the simulator
    # sets): seven cards, then the two-card and five-card hands
    table_id, round_id = store.con.execute(
        """SELECT s.table_id, s.round_id FROM events s JOIN events h USING (table_id, round_id)
           WHERE s.type = 'StartingPositionDetermined' AND s.payload->>'position' = 'DEALER'
             AND h.type = 'HandSet' AND h.payload->>'owner' = 'DEALER' ORDER BY s.seq LIMIT 1"""
    ).fetchall()[0]
    r = client.get(f"/api/v1/tables/{table_id}/replay", params={"round": round_id, "page_size": 200})
    steps = r.json()["steps"]
    delivered = [s for s in steps if s["type"] == "StackDelivered"]
    assert len(delivered) == 7 and not any(a["name"].startswith("Stack") for a in delivered[-1]["layout"])
    set_at = next(i for i, s in enumerate(steps) if s["type"] == "HandSet" and "owner=DEALER" in s["details"])
    before = {a["name"]: len(a["cards"]) for a in steps[set_at - 1]["layout"]}
    assert before["Dealer: 7 cards (stack 1)"] == 7
    after = {a["name"]: len(a["cards"]) for a in steps[set_at]["layout"]}
    assert after["Dealer: two-card hand"] == 2 and after["Dealer: five-card hand"] == 5
    assert "Dealer: 7 cards (stack 1)" not in after


def test_finding_page_of_two_face_up_shows_the_two_cards_found_not_the_stacks(client: TestClient, store: Store) -> None:
    f = _finding(store, "PGP-645a.14-f-two-face-up")
    part = _breach(client.get(f"/findings/{f['finding_id']}").text)
    found = part.split("<details", 1)[0]  # the layout at the event is folded away below the pictures
    assert found.count("mark-found") == 2 and found.count("A card found face up") == 2
    assert "pc back" not in found


def test_finding_page_of_a_house_way_finding_sets_the_hand_beside_the_house_way(
    client: TestClient, store: Store
) -> None:
    f = _finding(store, "PGP-645a.14-i-house-way")
    part = _breach(client.get(f"/findings/{f['finding_id']}").text)
    assert "Dealer&#39;s hand as set" in part and "Five-card hand" in part and "Two-card hand" in part
    assert "House way check</dt><dd>does not match" in part and "The house way" in part and "HW-1" in part


def test_finding_page_of_a_wrong_total_counts_the_stub_against_the_expected_and_the_stack_position(
    client: TestClient, store: Store
) -> None:
    stub = _finding(store, "TCP-679a.9-f-misdeal-full-deck")
    part = _breach(client.get(f"/findings/{stub['finding_id']}").text)
    assert "The stub against the expected count" in part and 'class="stub-bar"' in part
    counted = int(re.search(r"Stub counted: <b>(\d+)</b>", part).group(1))  # type: ignore[union-attr]
    expected = int(re.search(r"expected: <b>(\d+)</b>", part).group(1))  # type: ignore[union-attr]
    assert counted != expected
    dice = _finding(store, "PGP-645a.14-c-wrong-total")
    part = _breach(client.get(f"/findings/{dice['finding_id']}").text)
    assert "Where the stacks went" in part and part.count("m-wrong") == 1 and part.count("m-right") == 1
    assert 'class="dice"' in part and "Total announced" in part


def test_case_page_links_a_cause_and_its_consequences_both_ways(client: TestClient, store: Store) -> None:
    overdue = _finding(store, "DT-remedy-overdue")
    page = client.get(f"/findings/{overdue['finding_id']}").text
    m = re.search(r'href="/cases/([0-9a-f]+)"', page)
    assert m and "This finding is a <b>consequence</b> of" in page
    cause_id = m.group(1)
    assert cause_id != overdue["finding_id"]
    cause_page = client.get(f"/findings/{cause_id}").text
    assert f'href="/cases/{cause_id}"' in cause_page and f'href="/findings/{overdue["finding_id"]}"' in cause_page
    case = client.get(f"/cases/{cause_id}")
    assert case.status_code == 200
    assert f'href="/findings/{cause_id}"' in case.text and f'href="/findings/{overdue["finding_id"]}"' in case.text
    assert client.get(f"/cases/{overdue['finding_id']}").text.count("Consequence:") >= 1
    assert client.get("/cases/0123abcd").status_code == 404


def test_a_findings_case_read_once_equals_its_row_and_case_read_apart(store: Store) -> None:
    """The finding page reads the read model once for an incident (its own case holds its row)
    and twice for a consequence; the rows must be those of the finding alone and of its cause's
    case, as read apart before, for every finding of the store."""
    from dealtrail.console.deps import Console
    from dealtrail.investigate.replay_view import case_members
    from projections.models import reviews
    from projections.models.reviews import FindingFilter

    now = datetime(2026, 12, 1, tzinfo=UTC)
    console = Console(store, ConsoleConfig(DUE, "w" * 48, clock=lambda: now), None, threading.Lock())
    ids = [r[0] for r in store.con.execute("SELECT DISTINCT finding_id FROM findings ORDER BY 1").fetchall()]
    kinds = set()
    for fid in ids:
        f, rows = console.finding_case(store.con, fid)
        alone, _ = reviews.find(store.con, FindingFilter(finding_id=fid), DUE, now)
        assert f == alone[0]
        cause_id = f["cause_finding_id"] or fid
        apart, _ = reviews.find(store.con, FindingFilter(table_id=f["table_id"], case_of=cause_id), DUE, now)
        key = lambda r: r["finding_id"]  # noqa: E731
        assert sorted(rows, key=key) == sorted(apart, key=key)
        assert case_members(rows, fid) == case_members(apart, fid)
        kinds.add(f["cause_finding_id"] is None)
    assert kinds == {True, False}  # incidents and consequences both checked


# -- dealtrail replay --html ----------------------------------------------------------------------


def test_replay_html_of_a_long_trail_is_an_index_and_linked_parts_each_under_the_limit(
    workbench_db: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from dealtrail.cli import app
    from dealtrail.investigate.incident_page import write_incident
    from dealtrail.investigate.replay import Window, replay, stored_events, stored_findings
    from projections.store.store import connect_read_only

    con = connect_read_only(workbench_db)
    try:
        table = con.execute("SELECT table_id FROM events GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchall()[0][0]
        stored = stored_findings(con, table)
        result = replay(table, stored_events(con, table), stored, Window())
    finally:
        con.close()
    written = write_incident(
        result, tmp_path / "inc" / "table.html", "Incident replay", stored=stored, max_bytes=150_000
    )
    assert len(written) > 2 and written[0] == tmp_path / "inc" / "table.html"
    assert all(p.stat().st_size < 150_000 for p in written)
    index = written[0].read_text()
    for p in written[1:]:
        assert f'href="{p.name}"' in index
        text = p.read_text()
        assert 'href="table.html"' in text and "<script" not in text
    # every round and every finding's round is in exactly one part
    rounds = [
        r for p in written[1:] for r in re.findall(r'<h3 id="round-([^"]+)">', p.read_text()) if r != "between rounds"
    ]
    assert len(rounds) == len(set(rounds)) == len({s.event.round_id for s in result.steps if s.event.round_id})
    for f in result.replayed:
        if f.round_id:
            assert re.search(rf'href="table-\d{{3}}\.html#round-{re.escape(f.round_id)}"', index)
    # a short replay is still one page
    out = tmp_path / "one.html"
    first = next(f.round_id for f in result.replayed if f.round_id)  # not a jam's finding between rounds
    r = CliRunner().invoke(app, ["replay", "--db", str(workbench_db), "--table", table, "--round",
                                 first, "--html", str(out)])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert out.exists() and not list(tmp_path.glob("one-*.html"))


# -- in a real browser ------------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]  # fmt: skip


@pytest.fixture()
def served(store: Store) -> Iterator[str]:
    app = create_app(store, ConsoleConfig(DUE, "b" * 48, poll_seconds=0.5))
    with served_app(app) as base:
        yield base


def _at(page: Any, step: object) -> None:
    """Wait until the replay shows ``step`` (1-based); Playwright's own wait, no page-side eval (the CSP forbids it)."""
    from playwright.sync_api import expect

    expect(page.locator("#rp-pos")).to_have_text(re.compile(rf"^step {step} of \d+$"))


@pytest.mark.browser
def test_console_replays_a_round_in_chromium_with_keys_and_slider_and_draws_each_breach(
    served: str, store: Store, tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        need_browser(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need_browser("Playwright for Python is not installed (pip install playwright; never playwright install)")
    shots = Path(os.environ.get("DEALTRAIL_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    exposed = _finding(store, "PGP-645a.14-d-player-card-exposed")
    trigger_step = [r[0] for r in store.con.execute(
        "SELECT event_id FROM events WHERE table_id = ? AND round_id = ? ORDER BY seq, arrival",
        [exposed["table_id"], exposed["round_id"]],
    ).fetchall()].index(exposed["trigger_event_id"])  # fmt: skip
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
            page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
            page.goto(served + "/findings")  # not the floor: its poll would be cut off by the next page
            page.fill("input[name=username]", "ivy")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r".*/findings$"))

            # from the finding page to its round's replay
            page.goto(served + f"/findings/{exposed['finding_id']}")
            page.click("a.replay-link")
            page.wait_for_url(re.compile(r".*/replay\?.*"))
            _at(page, "1")
            total = int(page.inner_text("#rp-pos").split(" of ")[1])
            assert page.locator(".finding-at-step").count() == 0
            page.screenshot(path=str(shots / "replay-01-first.png"), full_page=True)

            # arrow keys step one event at a time: the layout grows, the finding is not there yet
            for _ in range(5):
                page.keyboard.press("ArrowRight")
            _at(page, "6")
            page.keyboard.press("ArrowLeft")
            _at(page, "5")

            # the slider: to the step before the finding's event, then keys onto it
            page.locator("#rp-slider").fill(str(trigger_step - 1))
            _at(page, trigger_step)
            assert page.locator(".finding-at-step").count() == 0
            assert page.locator("#rp-layout .pc").count() == 49  # the 7 stacks, dealt
            page.locator("#replay").focus()
            page.keyboard.press("ArrowRight")
            page.wait_for_selector(".finding-at-step")
            assert "PGP-645a.14-d-player-card-exposed" in page.inner_text("#rp-new-findings")
            assert "PGP-645a.14-d-player-card-exposed" in page.inner_text("#rp-findings")
            assert "PGP-645a.14-d-player-card-exposed" in page.inner_text("#rp-remedies")
            page.screenshot(path=str(shots / "replay-02-finding.png"), full_page=True)
            page.keyboard.press("End")
            _at(page, total)
            assert page.locator(".finding-at-step").count() == 0  # only at its event
            assert "PGP-645a.14-d-player-card-exposed" in page.inner_text("#rp-findings")  # and in the list after

            # the pictures of the breach
            for n, rule in enumerate(
                [
                    "PGP-645a.14-d-player-card-exposed",
                    "PGP-645a.14-f-two-face-up",
                    "PGP-645a.14-i-house-way",
                    "TCP-679a.9-f-misdeal-full-deck",
                    "PGP-645a.14-c-wrong-total",
                    "DT-remedy-overdue",
                    "DT-deal-after-device-fault",
                    "DT-chain-broken",
                ],
                start=3,
            ):
                f = _finding(store, rule)
                page.goto(served + f"/findings/{f['finding_id']}")
                assert page.locator("#breach").count() == 1
                page.locator("#breach").screenshot(path=str(shots / f"breach-{n:02d}-{rule}.png"))
                if rule == "DT-remedy-overdue":
                    page.click("a.case-link")
                    page.wait_for_url(re.compile(r".*/cases/[0-9a-f]+$"))
                    assert page.locator("li.case-conseq a", has_text="DT-remedy-overdue").count() >= 1
                    page.screenshot(path=str(shots / "case-01.png"), full_page=True)
        finally:
            browser.close()
    assert problems == []
    (shots / "shots.json").write_text(json.dumps(sorted(p.name for p in shots.glob("*.png"))))


def test_replay_steps_from_the_nearest_snapshot_equal_those_from_the_first_event(workbench_db: Path) -> None:
    from dealtrail.investigate.replay import Window, replay, stored_events
    from dealtrail.investigate.replay_view import replay_page, step_json
    from projections.store.store import connect_read_only

    con = connect_read_only(workbench_db)
    try:
        table, last_round = con.execute(
            "SELECT table_id, max(round_id) FROM rounds GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
        ).fetchall()[0]
        snapshots = con.execute("SELECT count(*) FROM table_snapshots WHERE table_id = ?", [table]).fetchall()[0][0]
        assert snapshots, "the store has no snapshot of the table: the test would not test the start from one"
        view = replay_page(con, table, Window(round_id=last_round))
        assert view.started_after_seq > 0
        full = replay(table, stored_events(con, table), None, Window(round_id=last_round))
        hidden = full.removed_before  # the decks removed before the round, as the replay from the start saw them
        assert view.decks_removed_before == len(hidden)
        assert view.steps == [
            step_json(i, s.event, s.state, s.findings, full.cards, hidden) for i, s in enumerate(full.steps)
        ]
    finally:
        con.close()


@pytest.mark.slow
def test_replay_html_of_a_whole_demo_sized_table_keeps_every_page_under_1_mb(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """One table over the demo's 8-hour shift (about 29,000 events: a 15.7 MB page before)."""
    from dealtrail.ingest.audit import audit_file
    from dealtrail.investigate.incident_page import write_incident
    from dealtrail.investigate.replay import Window, replay, stored_events, stored_findings
    from dealtrail.simulator.run import write_simulation
    from projections.store.store import connect_read_only

    folder = tmp_path_factory.mktemp("demo-table")
    events, db = folder / "events.jsonl", folder / "table.duckdb"
    write_simulation(events, tables=1, hours=8.0, seed=3, error_rate=0.03, duplicate_rate=0.001)
    with Store(db) as store:
        audit_file(events, store)
    con = connect_read_only(db)
    try:
        stored = stored_findings(con, "TCP-01")
        result = replay("TCP-01", stored_events(con, "TCP-01"), stored, Window())
    finally:
        con.close()
    assert result.events_total > 25_000 and result.matches
    written = write_incident(result, folder / "html" / "table.html", "Incident replay: table TCP-01", stored=stored)
    assert len(written) > 10
    assert all(p.stat().st_size < LIMIT for p in written)
    assert sum(len(re.findall(r"<tr", p.read_text())) for p in written[1:]) > result.events_total
