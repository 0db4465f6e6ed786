"""The Chapter 691 game dealt from the hand (58 Pa. Code § 691.?): 1 burn + 5 community cards,
face down, stub 48 of 54."""

from __future__ import annotations

import pytest

from schemas import events as ev

BOARD = ["COMMUNITY_1", "COMMUNITY_2", "COMMUNITY_3", "COMMUNITY_4", "COMMUNITY_5"]


def test_clean_chapter_691_rounds_raise_nothing(c691):
    t = c691()
    logs = [t.c691_round(f"R{i}") for i in range(1, 4)]
    assert [log["stub"].count for log in logs] == [48, 48, 48]
    assert [c.to_area for c in logs[0].cards] == ["BURN", *BOARD]
    t.assert_clean()


def test_clean_chapter_691_round_may_deal_jokers_of_the_54_card_deck(c691):
    t = c691()
    t.c691_round("R1", deal=[("BURN", {"card": "JK"}), ("COMMUNITY_1", {"card": "JK"}), *BOARD[1:]])
    t.assert_clean()


def test_C691_DH_a1_shuffler_required_raised_for_hand_deal_after_manual_shuffle(c691):
    t = c691()
    log = t.c691_round("R1", shuffle="MANUAL")
    t.assert_raised(
        "C691-DH-a1-shuffler-required",
        round_id="R1",
        evidence=(log.id("started"), log.id("shuffled"), log.cards[0].event_id),
    )


def test_C691_DH_a1_shuffler_required_not_raised_after_automated_shuffle(c691):
    t = c691()
    t.c691_round("R1", shuffle="AUTOMATED")
    t.assert_clean()


def test_C691_DH_a2_same_hand_raised_when_deck_changes_hands(c691):
    t = c691()
    log = t.c691_round("R1", hooks={"after_deal": lambda t: t.emit(ev.DeckHeld, hand="RIGHT")})
    t.assert_raised("C691-DH-a2-same-hand", round_id="R1", evidence=log.ids("held", "after_deal"))


def test_C691_DH_a2_same_hand_raised_when_deck_not_over_inventory_container(c691):
    t = c691()
    log = t.c691_round(
        "R1",
        hold=False,
        hooks={"after_nmb": lambda t: t.emit(ev.DeckHeld, hand="LEFT", over_inventory_container=False)},
    )
    t.assert_raised("C691-DH-a2-same-hand", round_id="R1", evidence=log.ids("after_nmb"))


def test_C691_DH_a2_same_hand_raised_when_deck_taken_before_shuffle_and_cut_finished(c691):
    t = c691()
    t.shuffle()
    log = t.c691_round(
        "R1",
        shuffle=None,
        hooks={"after_start": lambda t: t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id="SHF-1")},
    )
    t.assert_raised("C691-DH-a2-same-hand", round_id="R1", evidence=log.ids("after_start", "held"))


def test_C691_DH_a2_same_hand_raised_when_deck_taken_before_shuffle_and_cut_finished_names_the_deck_held(c691):
    # the part of the § 691.4 branch that holds today: the finding is raised, citing the DeckHeld
    t = c691()
    t.shuffle()
    log = t.c691_round(
        "R1",
        shuffle=None,
        hooks={"after_start": lambda t: t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id="SHF-1")},
    )
    [f] = t.raised("C691-DH-a2-same-hand")
    assert f.round_id == "R1"
    assert log.id("held") in f.evidence_event_ids


def test_C691_DH_a2_same_hand_not_raised_when_deck_taken_after_shuffle_completed_and_kept_in_hand(c691):
    t = c691()
    t.c691_round("R1", hooks={"after_deal": lambda t: t.emit(ev.DeckHeld, hand="LEFT")})
    t.assert_clean()


def test_C691_DH_a3_no_more_bets_raised_when_not_announced_before_the_burn(c691):
    t = c691()
    log = t.c691_round("R1", announce=False, hooks={"after_deal": lambda t: t.emit(ev.NoMoreBetsAnnounced)})
    t.assert_raised("C691-DH-a3-no-more-bets", round_id="R1", evidence=(log.id("started"), log.cards[0].event_id))


def test_C691_DH_a3_no_more_bets_not_raised_when_announced_first(c691):
    t = c691()
    t.c691_round("R1", announce=True)
    t.assert_clean()


def test_C691_DH_b_burn_first_raised_when_first_card_is_not_the_burn(c691):
    t = c691()
    log = t.c691_round("R1", deal=["COMMUNITY_1", "BURN", *BOARD[1:]])
    t.assert_raised("C691-DH-b-burn-first", round_id="R1", evidence=log.card_ids(0))


def test_C691_DH_b_burn_first_raised_at_deal_close_for_two_burn_cards(c691):
    t = c691()
    log = t.c691_round("R1", deal=["BURN", "BURN", *BOARD], stub=47)
    t.assert_raised("C691-DH-b-burn-first", round_id="R1", evidence=log.card_ids(0, 1))


def test_C691_DH_b_burn_first_not_raised_for_exactly_one_burn_first(c691):
    t = c691()
    t.c691_round("R1", deal=["BURN", *BOARD])
    t.assert_clean()


def test_C691_DH_b_five_community_raised_for_card_outside_community_area(c691):
    t = c691()
    log = t.c691_round("R1", deal=["BURN", *BOARD, "SEAT_2"], stub=47)
    t.assert_raised("C691-DH-b-five-community", round_id="R1", evidence=log.card_ids(6))


def test_C691_DH_b_five_community_raised_at_deal_close_for_four_community_cards(c691):
    t = c691()
    log = t.c691_round("R1", deal=["BURN", *BOARD[:4]])
    t.assert_raised("C691-DH-b-five-community", round_id="R1", evidence=log.card_ids(1, 2, 3, 4))


def test_C691_DH_b_five_community_not_raised_for_five_community_cards(c691):
    t = c691()
    t.c691_round("R1", deal=["BURN", *BOARD])
    t.assert_clean()


def test_C691_DH_b_five_community_raised_when_round_completes_right_after_short_board(c691):
    t = c691()
    log = t.c691_round("R1", deal=["BURN", *BOARD[:4]], stub=None, discard=False, settle=False)
    t.assert_raised("C691-DH-b-five-community", round_id="R1", evidence=log.card_ids(1, 2, 3, 4))


def test_C691_DH_b_face_down_raised_for_community_card_dealt_face_up(c691):
    t = c691()
    log = t.c691_round("R1", deal=["BURN", "COMMUNITY_1", "COMMUNITY_2", ("COMMUNITY_3", {"face": "UP"}), *BOARD[3:]])
    t.assert_raised("C691-DH-b-face-down", round_id="R1", evidence=log.card_ids(3))


def test_C691_DH_b_face_down_not_raised_for_face_down_deal(c691):
    t = c691()
    t.c691_round("R1")
    t.assert_clean()


def test_C691_DH_c_stub_unexposed_raised_for_exposed_stub_card(c691):
    t = c691()
    log = t.c691_round("R1", hooks={"after_stub": lambda t: t.emit(ev.CardExposed, location="STUB")})
    t.assert_raised("C691-DH-c-stub-unexposed", round_id="R1", evidence=log.ids("after_stub"))


def test_C691_DH_c_stub_unexposed_raised_for_stub_discarded_exposed(c691):
    t = c691()
    log = t.c691_round("R1", discard_exposed=True)
    t.assert_raised("C691-DH-c-stub-unexposed", round_id="R1", evidence=log.ids("discard"))


def test_C691_DH_c_stub_unexposed_raised_when_counted_stub_not_discarded(c691):
    t = c691()
    log = t.c691_round("R1", discard=False)
    t.assert_raised("C691-DH-c-stub-unexposed", round_id="R1", evidence=log.ids("stub", "completed"))


def test_C691_DH_c_stub_unexposed_not_raised_when_stub_discarded_unexposed(c691):
    t = c691()
    t.c691_round("R1", discard=True, discard_exposed=False)
    t.assert_clean()


def test_C691_DH_d_stub_count_due_raised_after_five_uncounted_rounds(c691):
    t = c691(counting_shuffler=False)
    logs = [t.c691_round(f"R{i}", stub=None) for i in range(1, 6)]
    t.assert_raised("C691-DH-d-stub-count-due", round_id="R5", evidence=tuple(log.id("completed") for log in logs))


def test_C691_DH_d_stub_count_due_not_raised_with_counting_shuffler_reporting_54(c691):
    t = c691(counting_shuffler=True)
    logs = [t.c691_round(f"R{i}", stub=None) for i in range(1, 7)]
    assert logs[0]["shuffled"].device_card_count == 54
    t.assert_clean()


def test_C691_DH_d_stub_count_due_not_raised_when_counted_within_five_rounds(c691):
    t = c691(counting_shuffler=False)
    for i in range(1, 7):
        t.c691_round(f"R{i}", stub=48 if i == 5 else None)
    t.assert_clean()


@pytest.mark.parametrize("kwargs", [{"method": "OTHER"}, {"exposed": True}], ids=["not-on-layout", "exposed"])
def test_C691_DH_d_count_method_raised_for_count_not_face_down_on_layout(c691, kwargs):
    t = c691()
    log = t.c691_round("R1", stub_kwargs=kwargs)
    t.assert_raised("C691-DH-d-count-method", round_id="R1", evidence=log.ids("stub"))


def test_C691_DH_d_count_method_not_raised_for_face_down_count(c691):
    t = c691()
    t.c691_round("R1", stub_kwargs={"method": "FACE_DOWN_ON_LAYOUT"})
    t.assert_clean()


def test_C691_DH_f_misdeal_full_deck_raised_for_stub_47_with_54_cards_present(c691):
    # two burns: 7 cards dealt + stub 47 = 54, the deck is complete but the deal was wrong
    t = c691()
    log = t.c691_round("R1", deal=["BURN", "BURN", *BOARD], stub=47, settle=False)
    t.assert_raised("C691-DH-f-misdeal-full-deck", round_id="R1", evidence=log.ids("stub"))
    t.assert_not_raised("C691-DH-f-wrong-deck")


def test_C691_DH_f_misdeal_full_deck_not_raised_for_stub_48(c691):
    t = c691()
    t.c691_round("R1", stub=48)
    t.assert_clean()


@pytest.mark.parametrize("stub", [47, 49], ids=["short-deck", "long-deck"])
def test_C691_DH_f_wrong_deck_raised_when_deck_total_is_not_54(c691, stub):
    t = c691()
    log = t.c691_round("R1", stub=stub, settle=False)
    t.assert_raised("C691-DH-f-wrong-deck", round_id="R1", evidence=log.ids("stub"))
    t.assert_not_raised("C691-DH-f-misdeal-full-deck")


def test_C691_DH_f_wrong_deck_not_raised_for_misdeal_with_full_deck(c691):
    t = c691()
    t.c691_round("R1", deal=["BURN", "BURN", *BOARD], stub=47, settle=False)
    t.assert_not_raised("C691-DH-f-wrong-deck")
