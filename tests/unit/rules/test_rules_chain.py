"""DT-chain-broken: the per-table hash chain (prev_hash of each event = hash of the one before)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from dealtrail.simulator.builder import TableWriter
from schemas import events as ev
from schemas.base import Game
from schemas.chain import Chainer, chain_hash
from schemas.config import TableConfig
from streams.engine import fold

CONFIG = TableConfig(game=Game.TCP, rules_submission_id="RS-1", seats=("SEAT_1", "SEAT_2"))


def _trail() -> list[ev.Envelope]:
    w = TableWriter("T-9", Game.TCP, datetime(2026, 3, 2, 18, 0, tzinfo=UTC), chained=True)
    out: list[ev.Envelope] = [w.emit(ev.TableConfigured, config=CONFIG)]
    w.deck_id = "DK-1"
    out.append(w.emit(ev.DeckIntroduced, declared_count=52))
    w.round_id = "R1"
    out.append(w.emit(ev.RoundStarted, round_no=1, dealing_method="HAND", dealer_id="D-1"))
    out.append(w.emit(ev.NoMoreBetsAnnounced))
    out.append(w.emit(ev.RoundCompleted))
    return out


def test_chained_events_link_each_to_the_hash_of_the_one_before() -> None:
    events = _trail()
    assert events[0].prev_hash is None
    for before, after in itertools.pairwise(events):
        assert after.prev_hash == before.hash == chain_hash(before)


def _dt(findings: list) -> list[str]:  # type: ignore[type-arg]
    return [f.rule_id for f in findings if f.rule_id.startswith("DT-")]


def test_DT_chain_broken_not_raised_for_an_intact_chain() -> None:
    _, findings = fold(_trail())
    assert _dt(findings) == []


def test_DT_chain_broken_raised_when_an_event_was_altered_and_relinked_wrongly() -> None:
    events = _trail()
    # an event re-written in place: its hash changes, the next event still names the old one
    forged = events[2].model_copy(update={"dealer_id": "D-99"})
    forged = forged.model_copy(update={"hash": chain_hash(forged)})
    events[2] = forged
    _, findings = fold(events)
    [f] = [f for f in findings if f.rule_id == "DT-chain-broken"]
    assert (f.table_id, f.round_id) == ("T-9", "R1")
    assert f.evidence_event_ids == (events[2].event_id, events[3].event_id)


def test_DT_chain_broken_raised_when_an_event_is_missing_from_the_chain() -> None:
    events = _trail()
    del events[3]
    _, findings = fold(events)
    assert set(_dt(findings)) == {"DT-chain-broken", "DT-sequence-gap"}
    [f] = [f for f in findings if f.rule_id == "DT-chain-broken"]
    assert f.evidence_event_ids == (events[2].event_id, events[3].event_id)


def test_DT_chain_broken_raised_when_an_unchained_event_enters_a_chained_trail() -> None:
    events = _trail()
    events[3] = events[3].model_copy(update={"prev_hash": None, "hash": None})
    _, findings = fold(events)
    broken = [f for f in findings if f.rule_id == "DT-chain-broken"]
    # the unchained event breaks the chain, and the next one links to a hash the trail never had
    assert [f.evidence_event_ids for f in broken] == [
        (events[2].event_id, events[3].event_id),
        (events[3].event_id, events[4].event_id),
    ]


def test_DT_chain_broken_not_raised_for_a_trail_that_is_not_chained_at_all() -> None:
    events = [e.model_copy(update={"prev_hash": None, "hash": None}) for e in _trail()]
    _, findings = fold(events)
    assert _dt(findings) == []


def test_chainer_keeps_the_head_on_a_resent_copy() -> None:
    events = _trail()
    chainer = Chainer()
    relinked = [chainer.link(e.model_copy(update={"prev_hash": None, "hash": None})) for e in events]
    assert [e.hash for e in relinked] == [e.hash for e in events]
    again = chainer.link(events[1].model_copy(update={"event_id": "COPY"}))
    assert chainer.heads["T-9"] == (events[-1].seq, events[-1].hash)
    assert again.prev_hash == events[-1].hash
