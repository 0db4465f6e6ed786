"""Rulebook revision 2 (section 10.1): the five decisions, each raising and its close variants not.

Test names carry the rule ID and the decision (a1 = 10.1.1, fault = 10.1.2, window = 10.1.3,
showdown = 10.1.4, verified = 10.1.5).
"""

from __future__ import annotations

import pytest

from schemas import events as ev
from streams.engine import RULEBOOK_REVISION

TCP_A1 = "TCP-679a.9-a1-shuffler-required"
C691_A1 = "C691-DH-a1-shuffler-required"
C691_A2 = "C691-DH-a2-same-hand"
FAULT = "DT-deal-after-device-fault"
COMPOSITION = "DT-deck-composition"


def fault(t, fault="COUNT_ERROR", **fields):
    return t.emit(ev.ShufflerFaulted, round_id=None, device_id=t.SHUFFLER, fault=fault, role="DEVICE", **fields)


# -- 10.1.1 a deck dealt again without a shuffle ------------------------------------------------


def test_TCP_679a9_a1_deck_dealt_again_without_a_shuffle_raises(tcp):
    t = tcp()
    r1 = t.tcp_round("R1")
    r2 = t.tcp_round("R2", shuffle=None)
    t.assert_raised(TCP_A1, round_id="R2", evidence=(r2.id("started"), r1.cards[0].event_id, r2.cards[0].event_id))


def test_C691_DH_a1_deck_dealt_again_without_a_shuffle_raises(c691):
    t = c691()
    r1 = t.c691_round("R1")
    r2 = t.c691_round("R2", shuffle=None)
    t.assert_raised(C691_A1, round_id="R2", evidence=(r2.id("started"), r1.cards[0].event_id, r2.cards[0].event_id))


def test_TCP_679a9_a1_deck_dealt_again_after_a_completed_shuffle_does_not_raise(tcp):
    t = tcp()
    t.tcp_round("R1")
    t.tcp_round("R2")
    t.assert_not_raised(TCP_A1)


def test_TCP_679a9_a1_a_shuffle_started_but_not_completed_does_not_count_as_a_shuffle(tcp):
    t = tcp()
    t.tcp_round("R1")
    t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=t.SHUFFLER)
    t.tcp_round("R2", shuffle=None)
    assert [f.round_id for f in t.raised(TCP_A1)] == ["R2"]


def test_TCP_679a9_a1_shoe_dealt_rounds_on_an_unshuffled_deck_are_not_a_hand_deal_breach(tcp):
    t = tcp()
    t.tcp_round("R1", method="MANUAL_SHOE")
    t.tcp_round("R2", method="MANUAL_SHOE", shuffle=None)
    t.assert_not_raised(TCP_A1)


def test_C691_DH_a1_the_first_round_after_a_shuffle_does_not_raise(c691):
    t = c691()
    t.c691_round("R1")
    t.assert_clean()


# -- 10.1.2 what clears a device fault ----------------------------------------------------------


def test_DT_deal_after_device_fault_count_less_shuffle_from_a_counting_device_does_not_clear_it(tcp):
    t = tcp(counting_shuffler=True)
    faulted = fault(t, during="IDLE")
    log = t.tcp_round(
        "R1",
        shuffle=None,
        hooks={"before_start": lambda t: t.shuffle("AUTOMATED", device_card_count=None, device_full_deck_ok=None)},
    )
    t.assert_raised(FAULT, round_id="R1", evidence=(faulted.event_id, log.cards[0].event_id))


def test_DT_deal_after_device_fault_full_deck_shuffle_from_a_counting_device_clears_it(tcp):
    t = tcp(counting_shuffler=True)
    fault(t, during="IDLE")
    t.tcp_round("R1")
    t.assert_clean()


def test_DT_deal_after_device_fault_count_less_shuffle_from_a_non_counting_device_clears_it(tcp):
    t = tcp(counting_shuffler=False)
    fault(t, during="IDLE")
    t.tcp_round("R1", stub="FULL_DECK")
    t.assert_not_raised(FAULT)


def test_DT_deal_after_device_fault_logged_during_the_shuffle_is_not_cleared_by_that_shuffle(tcp):
    # the fault is logged after ShuffleStarted and before the completion: the completion started first
    t = tcp()
    started = t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=t.SHUFFLER)
    faulted = fault(t, during="SHUFFLE")
    t.emit(
        ev.ShuffleCompleted, method="AUTOMATED", device_id=t.SHUFFLER, device_card_count=52, device_full_deck_ok=True
    )
    log = t.tcp_round("R1", shuffle=None)
    t.assert_raised(FAULT, round_id="R1", evidence=(faulted.event_id, log.cards[0].event_id))
    assert started.seq < faulted.seq


def test_DT_deal_after_device_fault_logged_after_the_completion_and_before_the_deal_applies(tcp):
    t = tcp()
    t.shuffle()
    faulted = fault(t, during="IDLE")
    log = t.tcp_round("R1", shuffle=None)
    t.assert_raised(FAULT, round_id="R1", evidence=(faulted.event_id, log.cards[0].event_id))


def test_DT_deal_after_device_fault_a_shuffle_of_another_deck_does_not_clear_it(tcp):
    t = tcp()
    faulted = fault(t, during="SHUFFLE")
    t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=t.SHUFFLER, deck_id="DK-2")
    t.emit(
        ev.ShuffleCompleted,
        method="AUTOMATED",
        device_id=t.SHUFFLER,
        deck_id="DK-2",
        device_card_count=52,
        device_full_deck_ok=True,
    )
    t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=t.SHUFFLER, deck_id="DK-1")
    log = t.tcp_round("R1", shuffle=None)
    t.assert_raised(FAULT, round_id="R1", evidence=(faulted.event_id, log.cards[0].event_id))


def test_DT_deal_after_device_fault_removing_the_faulted_deck_lets_a_new_decks_shuffle_clear_it(tcp):
    t = tcp()
    fault(t, during="SHUFFLE")
    t.remove_deck()
    t.writer.deck_id = "DK-2"
    t.emit(ev.DeckIntroduced, declared_count=52, jokers=0, role="FLOOR", actor_id="F-01")
    t.tcp_round("R1")
    t.assert_not_raised(FAULT)


def test_PGP_645a14_l_shuffler_fault_while_idle_is_not_a_fault_during_a_shuffle(pgp):
    t = pgp()
    fault(t, fault="JAM", during="IDLE")
    t.assert_not_raised("PGP-645a.14-l-shuffler-fault")
    fault(t, fault="JAM", during="SHUFFLE")
    assert len(t.raised("PGP-645a.14-l-shuffler-fault")) == 1


# -- 10.1.3 the composition window --------------------------------------------------------------


def jam_and_take_out(t, count):
    started = t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=t.SHUFFLER)
    jam = fault(t, fault="JAM", during="SHUFFLE")
    t.emit(ev.CardsRemovedFromDevice, device_id=t.SHUFFLER, count=count)
    return started, jam


def test_DT_deck_composition_window_faces_dealt_again_after_a_jam_are_a_device_fault_not_a_compromised_deck(tcp):
    t = tcp()
    t.tcp_round("R1")
    _, jam = jam_and_take_out(t, 52)
    r2 = t.tcp_round("R2", shuffle=None)  # the same faces again, no completed shuffle
    t.assert_not_raised(COMPOSITION)
    t.assert_raised(FAULT, round_id="R2", evidence=(jam.event_id, r2.cards[0].event_id))


def test_DT_deck_composition_window_faces_dealt_again_with_no_shuffle_started_raise(tcp):
    t = tcp()
    r1 = t.tcp_round("R1")
    r2 = t.tcp_round("R2", shuffle=None)
    t.assert_raised(COMPOSITION, round_id="R2", evidence=(r1.cards[0].event_id, r2.cards[0].event_id))


def test_DT_deck_composition_window_a_duplicate_after_the_shuffle_started_still_raises(tcp):
    t = tcp()
    plan = [*t.tcp_plan(("SEAT_1", "SEAT_3"))]
    plan[5] = ("DEALER", {"card": "2C"})
    log = t.tcp_round("R1", deal=plan)
    t.assert_raised(COMPOSITION, round_id="R1", evidence=log.card_ids(0, 5))


# -- 10.1.4 showdown is not an exposure ---------------------------------------------------------


@pytest.mark.parametrize("game", ["tcp", "c691", "pgp"])
def test_hands_revealed_at_settlement_raises_nothing(request, game):
    t = request.getfixturevalue(game)()
    hands = {
        "tcp": (
            ev.RevealedHand(owner="SEAT_1", cards=("2C", "4C", "6C")),
            ev.RevealedHand(owner="DEALER", cards=("3C", "5C", "7C")),
        ),
        "c691": (ev.RevealedHand(owner="COMMUNITY", cards=("3C", "4C", "5C", "6C", "7C")),),
        "pgp": (ev.RevealedHand(owner="DEALER", cards=("2C", "3C", "4C", "5C", "6C", "7C", "8C")),),
    }[game]
    hook = {"before_settle": lambda t: t.emit(ev.HandsRevealed, hands=hands)}
    getattr(t, f"{game}_round")("R1", hooks=hook)
    t.assert_clean()


def test_PGP_645a14_e_showdown_dealer_card_shown_at_settlement_phase_raises_nothing(pgp):
    t = pgp()
    t.pgp_round(
        "R1",
        hooks={
            "before_settle": lambda t: t.emit(ev.CardExposed, card="2C", location="DEALER_HAND", phase="SETTLEMENT")
        },
    )
    t.assert_clean()


def test_PGP_645a14_e_showdown_dealer_card_shown_after_hands_revealed_raises_nothing(pgp):
    t = pgp()

    def reveal_then_show(t):
        t.emit(ev.HandsRevealed, hands=(ev.RevealedHand(owner="DEALER", cards=("2C",)),))
        t.emit(ev.CardExposed, card="2C", location="DEALER_HAND", phase="PLAY")

    t.pgp_round("R1", hooks={"before_settle": reveal_then_show})
    t.assert_clean()


def test_PGP_645a14_e_showdown_dealer_card_exposed_while_dealing_still_raises(pgp):
    t = pgp()
    log = t.pgp_round(
        "R1",
        settle=False,
        hooks={"after_stacks_dealt": lambda t: t.emit(ev.CardExposed, card="2C", location="DEALER_HAND", phase="DEAL")},
    )
    t.assert_raised("PGP-645a.14-e-dealer-bank-exposed", round_id="R1", evidence=log.ids("after_stacks_dealt"))


def test_PGP_645a14_d_showdown_player_card_shown_after_the_player_set_the_hand_raises_nothing(pgp):
    t = pgp()
    t.pgp_round(
        "R1",
        hooks={
            "before_settle": lambda t: t.emit(
                ev.CardExposed, card="2C", location="PLAYER_HAND", seat="SEAT_1", phase="PLAY"
            )
        },
    )
    t.assert_clean()


# -- 10.1.5 a verified deck; the deck's inventory; the cut ---------------------------------------


def duplicate_round(t, round_id):
    plan = [*t.tcp_plan(("SEAT_1", "SEAT_3"))]
    plan[5] = ("DEALER", {"card": "2C"})
    return t.tcp_round(round_id, deal=plan)


def verify(t, result="OK", count=52):
    return t.emit(
        ev.DeckVerified,
        round_id=None,
        count=count,
        composition_ok=result == "OK",
        result=result,
        verified_by="F-01",
        role="FLOOR",
        actor_id="F-01",
    )


def test_DT_deck_composition_verified_later_rounds_on_a_suspect_deck_raise_no_second_incident(tcp):
    t = tcp()
    duplicate_round(t, "R1")
    duplicate_round(t, "R2")  # reshuffled, but not removed or verified: still the same incident
    assert [f.round_id for f in t.raised(COMPOSITION)] == ["R1"]


def test_DT_deck_composition_verified_ok_ends_the_suspicion_and_a_new_duplicate_raises_again(tcp):
    t = tcp()
    duplicate_round(t, "R1")
    verify(t)
    duplicate_round(t, "R2")
    assert [f.round_id for f in t.raised(COMPOSITION)] == ["R1", "R2"]


def test_DT_deck_composition_verified_removing_the_deck_ends_the_suspicion(tcp):
    t = tcp()
    duplicate_round(t, "R1")
    t.remove_deck()
    t.emit(ev.DeckIntroduced, declared_count=52, jokers=0, role="FLOOR", actor_id="F-01")
    duplicate_round(t, "R2")
    assert [f.round_id for f in t.raised(COMPOSITION)] == ["R1", "R2"]


@pytest.mark.parametrize("result", ["SHORT", "LONG", "WRONG_CARDS"])
def test_DT_deck_composition_verified_with_a_result_other_than_ok_raises(tcp, result):
    t = tcp()
    checked = verify(t, result=result, count=51)
    t.assert_raised(COMPOSITION, round_id=None, evidence=(checked.event_id,))


def test_DT_deck_composition_verified_ok_raises_nothing(tcp):
    t = tcp()
    verify(t)
    t.tcp_round("R1")
    t.assert_clean()


@pytest.mark.parametrize("cls", [ev.CardAddedToDeck, ev.CardRemovedFromDeck])
def test_DT_deck_composition_unauthorised_card_added_or_removed_raises(tcp, cls):
    t = tcp()
    changed = t.emit(cls, round_id=None, card="7H", reason="OTHER")
    t.assert_raised(COMPOSITION, round_id=None, evidence=(changed.event_id,))


def test_DT_deck_composition_authorised_replacement_of_a_damaged_card_raises_nothing(tcp):
    t = tcp()
    t.emit(ev.CardRemovedFromDeck, round_id=None, card="2C", reason="DAMAGED", authorised_by="F-01")
    t.emit(ev.CardAddedToDeck, round_id=None, card="2C", reason="REPLACEMENT", authorised_by="F-01")
    t.tcp_round("R1")
    t.assert_clean()


def test_DT_deck_composition_a_card_taken_out_of_the_deck_and_then_dealt_raises(tcp):
    t = tcp()
    t.emit(ev.CardRemovedFromDeck, round_id=None, card="2C", reason="DAMAGED", authorised_by="F-01")
    log = t.tcp_round("R1")
    t.assert_raised(COMPOSITION, round_id="R1", evidence=log.card_ids(0))


def test_C691_DH_a2_deck_taken_into_the_hand_before_the_cut_raises(c691):
    t = c691()
    started = t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=t.SHUFFLER)
    done = t.emit(
        ev.ShuffleCompleted, method="AUTOMATED", device_id=t.SHUFFLER, device_card_count=54, device_full_deck_ok=True
    )
    log = t.c691_round("R1", shuffle=None)
    t.assert_raised(C691_A2, round_id="R1", evidence=(done.event_id, log.id("held")))
    assert started.seq < done.seq


def test_C691_DH_a2_deck_taken_into_the_hand_after_the_cut_raises_nothing(c691):
    t = c691()
    t.c691_round("R1")  # the factory's shuffle is followed by DeckCut
    t.assert_clean()


def test_C691_DH_a2_a_version_1_shuffle_asks_for_no_cut(c691):
    t = c691()
    t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=t.SHUFFLER, schema_version=1)
    t.emit(
        ev.ShuffleCompleted,
        method="AUTOMATED",
        device_id=t.SHUFFLER,
        device_card_count=54,
        device_full_deck_ok=True,
        schema_version=1,
    )
    t.c691_round("R1", shuffle=None)
    t.assert_clean()


def test_TCP_decks_need_no_cut(tcp):
    t = tcp()
    t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=t.SHUFFLER)
    t.emit(
        ev.ShuffleCompleted, method="AUTOMATED", device_id=t.SHUFFLER, device_card_count=52, device_full_deck_ok=True
    )
    t.tcp_round("R1", shuffle=None)
    t.assert_clean()


# -- the revision on every finding -------------------------------------------------------------


def test_every_finding_and_every_revision_of_it_carries_the_rulebook_revision(tcp):
    t = tcp()
    t.tcp_round("R1", stub=40, settle=False, complete=False)  # wrong deck: voiding, remedies owed
    t.complete()
    t.start_round("R2")  # the remedies are now overdue
    found = t.findings()
    assert {f.revision for f in found} >= {0, 1}
    assert "DT-remedy-overdue" in {f.rule_id for f in found}
    assert {f.rulebook_revision for f in found} == {RULEBOOK_REVISION}  # 3 since revision 3


def _suspect_rounds(t) -> dict[str, bool]:
    from dealtrail.ingest.audit import Auditor

    auditor = Auditor()
    for event in t.events:
        auditor.apply(event)
    return {r["round_id"]: r["deck_suspect"] for r in auditor.rounds}


def test_DT_deck_composition_verified_rounds_on_the_deck_are_suspect_until_it_is_verified_ok(tcp):
    t = tcp()
    t.tcp_round("R0")
    duplicate_round(t, "R1")
    t.tcp_round("R2")  # reshuffled, neither removed nor verified: still suspect
    verify(t)
    t.tcp_round("R3")
    assert _suspect_rounds(t) == {"R0": False, "R1": True, "R2": True, "R3": False}


def test_DT_deck_composition_verified_a_new_deck_after_removal_is_not_suspect(tcp):
    t = tcp()
    duplicate_round(t, "R1")
    t.remove_deck()
    t.emit(ev.DeckIntroduced, declared_count=52, jokers=0, role="FLOOR", actor_id="F-01")
    t.tcp_round("R2")
    assert _suspect_rounds(t) == {"R1": True, "R2": False}
