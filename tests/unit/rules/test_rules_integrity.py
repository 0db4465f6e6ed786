"""dealtrail's own integrity rules (rulebook section 8a), the audit-trail sequence checks, table
configuration, and the per-table switch for the provisional rules (rulebook section 7)."""

from __future__ import annotations

import pytest

from schemas import events as ev
from schemas.config import TableConfig
from streams.engine import RULES, EventRejected, apply

TCP_PLAN = ["SEAT_1", "SEAT_3", "DEALER"] * 3


# -- DT-deck-composition -----------------------------------------------------------------------


def test_DT_deck_composition_raised_for_same_card_twice_in_one_shuffle(tcp):
    t = tcp()
    plan = [*TCP_PLAN]
    plan[5] = ("DEALER", {"card": "2C"})  # the first card dealt was the 2C too
    log = t.tcp_round("R1", deal=plan)
    t.assert_raised("DT-deck-composition", round_id="R1", evidence=log.card_ids(0, 5))


def test_DT_deck_composition_raised_once_per_shuffle_for_a_deck_dealt_twice_without_reshuffle(tcp):
    t = tcp()
    r1 = t.tcp_round("R1")
    r2 = t.tcp_round("R2", shuffle=None)  # same faces again: every card is a repeat
    t.assert_raised("DT-deck-composition", round_id="R2", evidence=(r1.cards[0].event_id, r2.cards[0].event_id))


def test_DT_deck_composition_raised_for_joker_in_deck_without_jokers(tcp):
    t = tcp()
    plan = [*TCP_PLAN]
    plan[2] = ("DEALER", {"card": "JK"})
    log = t.tcp_round("R1", deal=plan)
    t.assert_raised("DT-deck-composition", round_id="R1", evidence=log.card_ids(2))


def test_DT_deck_composition_not_raised_for_same_cards_after_a_reshuffle(tcp):
    t = tcp()
    r1 = t.tcp_round("R1")
    r2 = t.tcp_round("R2", shuffle="AUTOMATED")
    assert [c.card for c in r1.cards] == [c.card for c in r2.cards]
    t.assert_clean()


def test_DT_deck_composition_not_raised_for_the_pai_gow_joker(pgp):
    t = pgp()
    t.pgp_round("R1", hooks={"after_dice": lambda t: t.emit(ev.CardFoundFaceUp, location="DECK", card="JK")})
    t.assert_not_raised("DT-deck-composition")


# -- DT-deal-after-device-fault ----------------------------------------------------------------


def test_DT_deal_after_device_fault_raised_for_deal_after_shuffler_fault(tcp):
    t = tcp()
    t.shuffle()
    fault = t.emit(ev.ShufflerFaulted, device_id=t.SHUFFLER, fault="WRONG_MODE", indicator="RED_LIGHT")
    log = t.tcp_round("R1", shuffle=None)
    t.assert_raised("DT-deal-after-device-fault", round_id="R1", evidence=(fault.event_id, log.cards[0].event_id))


@pytest.mark.parametrize(
    "report",
    [{"device_card_count": 51, "device_full_deck_ok": False}, {"mode": "SORT"}],
    ids=["short-deck-signal", "sort-mode"],
)
def test_DT_deal_after_device_fault_raised_for_deal_after_bad_shuffle(tcp, report):
    t = tcp()
    _, bad = t.shuffle(**report)
    log = t.tcp_round("R1", shuffle=None)
    t.assert_raised("DT-deal-after-device-fault", round_id="R1", evidence=(bad.event_id, log.cards[0].event_id))


def test_DT_deal_after_device_fault_not_raised_after_complete_full_deck_reshuffle(tcp):
    t = tcp()
    t.emit(ev.ShufflerFaulted, device_id=t.SHUFFLER, fault="COUNT_ERROR")
    t.tcp_round("R1", shuffle="AUTOMATED")
    t.assert_clean()


# -- ALL-shuffle-count-mismatch-PROV -----------------------------------------------------------


def test_ALL_shuffle_count_mismatch_PROV_raised_for_counting_shuffler_reporting_short_deck(c691):
    t = c691()
    _, shuffled = t.shuffle(device_card_count=53, device_full_deck_ok=False)
    f = t.assert_raised("ALL-shuffle-count-mismatch-PROV", round_id=None, evidence=(shuffled.event_id,))
    assert f.provisional is True


def test_ALL_shuffle_count_mismatch_PROV_not_raised_for_full_deck_report(c691):
    t = c691()
    t.shuffle(device_card_count=54, device_full_deck_ok=True)
    t.assert_clean()


# -- DT-sequence-gap and the trail itself ------------------------------------------------------


def test_DT_sequence_gap_raised_for_seq_jump_and_event_still_applied(tcp):
    t = tcp()
    log = t.tcp_round("R1", complete=False)
    t.writer.seq += 2  # two events lost
    done = t.complete()
    t.assert_raised("DT-sequence-gap", round_id="R1", evidence=(t.events[-2].event_id, done.event_id))
    state, _ = t.run()
    assert state.last_seq == done.seq
    assert state.round is None and state.rounds_completed == 1
    assert log["stub"].seq < done.seq - 2


def test_DT_sequence_gap_raised_for_same_seq_with_different_content(tcp):
    t = tcp()
    log = t.tcp_round("R1")
    ante = log.wagers["R1-ANTE-1"]
    t.append(ante.model_copy(update={"amount": 50_000}))
    t.assert_raised("DT-sequence-gap", round_id="R1", evidence=(ante.event_id,))


def test_DT_sequence_gap_raised_for_another_event_reusing_a_seq(tcp):
    t = tcp()
    log = t.tcp_round("R1")
    stub = log["stub"]
    t.append(stub.model_copy(update={"event_id": "T-01-other", "count": 40}))
    t.assert_raised("DT-sequence-gap", round_id="R1", evidence=(stub.event_id, "T-01-other"))


def test_DT_sequence_gap_not_raised_for_exact_duplicate_which_is_ignored(tcp):
    t = tcp()
    log = t.tcp_round("R1", complete=False)
    before, _ = t.run()
    duplicate = log.cards[3].model_copy()
    after, findings = apply(before, duplicate)
    assert findings == []
    assert after == before
    t.append(duplicate)
    t.complete()
    t.assert_clean()


def test_DT_sequence_gap_not_raised_for_contiguous_seq(tcp):
    t = tcp()
    t.tcp_round("R1")
    assert [e.seq for e in t.events] == list(range(1, len(t.events) + 1))
    t.assert_clean()


def test_event_for_unconfigured_table_is_rejected(tcp):
    t = tcp()
    t.tcp_round("R1")
    with pytest.raises(EventRejected) as info:
        apply(None, t.events[5])
    assert info.value.reason == "unconfigured_table"


def test_table_configured_for_another_game_is_rejected(tcp):
    t = tcp()
    configured = t.events[0]
    wrong = configured.model_copy(
        update={"config": TableConfig(game="PGP", rules_submission_id="RS-1", seats=("SEAT_1",))}
    )
    with pytest.raises(EventRejected) as info:
        apply(None, wrong)
    assert info.value.reason == "game_mismatch"


# -- provisional rules switched off ------------------------------------------------------------


def _tcp_shoe_rounds(tcp, **config):
    t = tcp(counting_shuffler=False, **config)
    for i in range(1, 6):
        t.tcp_round(f"R{i}", method="AUTO_SHOE", stub=None)
    return t


def _count_mismatch(tcp, **config):
    t = tcp(**config)
    t.shuffle(device_card_count=50, device_full_deck_ok=False)
    t.remove_deck()
    return t


PROVISIONAL = {
    "TCP-679a.8/10-stub-count-PROV": ("tcp", _tcp_shoe_rounds),
    "ALL-shuffle-count-mismatch-PROV": ("tcp", _count_mismatch),
    "PGP-645a.9-shake-3x-PROV": ("pgp", lambda f, **c: _pgp(f, c, shakes=1)),
    "PGP-645a.9-start-position-PROV": ("pgp", lambda f, **c: _pgp(f, c, start="SEAT_2")),
    "PGP-645a.9-rng-PROV": ("pgp", lambda f, **c: _pgp(f, c, rng=9, dice=None)),
    "PGP-645a.9-stacks-PROV": ("pgp", lambda f, **c: _pgp(f, c, discard_exposed=True)),
    "PGP-645a.9-unwagered-stacks-PROV": (
        "pgp",
        lambda f, **c: _pgp(
            f, c, deliver=[(p, 7) for p in ("SEAT_6", "SEAT_5", "SEAT_4", "SEAT_3", "SEAT_2", "SEAT_1")]
        ),
    ),
}


def _pgp(factory, config, **round_kwargs):
    t = factory(**config)
    t.pgp_round("R1", **round_kwargs)
    return t


def test_provisional_list_is_every_provisional_rule_of_the_catalogue():
    assert {r.rule_id for r in RULES if r.provisional} == set(PROVISIONAL)


@pytest.mark.parametrize("rule_id", list(PROVISIONAL), ids=list(PROVISIONAL))
def test_provisional_rule_raised_by_default(request, rule_id):
    game, build = PROVISIONAL[rule_id]
    t = build(request.getfixturevalue(game))
    [f] = t.raised(rule_id)
    assert f.provisional is True


@pytest.mark.parametrize("rule_id", list(PROVISIONAL), ids=list(PROVISIONAL))
def test_provisional_rule_not_raised_when_table_turns_provisional_rules_off(request, rule_id):
    game, build = PROVISIONAL[rule_id]
    t = build(request.getfixturevalue(game), provisional_rules=False)
    t.assert_not_raised(rule_id)
    assert not [f for f in t.findings() if f.provisional]


def test_provisional_rules_off_keeps_the_other_rules(tcp):
    t = tcp(provisional_rules=False)
    _, bad = t.shuffle(device_card_count=51, device_full_deck_ok=False)
    log = t.tcp_round("R1", shuffle=None)
    t.assert_not_raised("ALL-shuffle-count-mismatch-PROV")
    t.assert_raised("DT-deal-after-device-fault", round_id="R1", evidence=(bad.event_id, log.cards[0].event_id))


def test_DT_deck_composition_a_card_of_a_deck_the_trail_never_introduced_is_not_an_engine_error(tcp):
    # the DeckIntroduced and RoundStarted were among events lost before this card: the engine
    # reports the gap and goes on, it does not crash on the deck it has not seen
    t = tcp()
    t.tcp_round("R1")
    last = t.events[-1]
    card = t.emit(
        ev.CardDealt, round_id="R-LOST", deck_id="DK-LOST", deal_index=1, to_area="SEAT_1", card="AS", role="DEALER"
    )
    state, found = t.run()
    assert state is not None and state.last_event_id == card.event_id
    assert "DT-deck-composition" not in {f.rule_id for f in found}
    assert last.seq + 1 == card.seq
