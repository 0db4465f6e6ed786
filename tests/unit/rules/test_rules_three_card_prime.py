"""Three Card Prime: 58 Pa. Code § 679a.7 (wagers) and § 679a.9 (dealing from the hand).

Every rule has a sequence that must raise it (rule, table, round and the exact evidence) and a
near miss, the correct procedure, that must not.
"""

from __future__ import annotations

import pytest

from schemas import events as ev

# The correct deal for Antes at SEAT_1 and SEAT_3 (no Pair Bonus):
# index 0 SEAT_1, 1 SEAT_3, 2 DEALER, 3 SEAT_1, 4 SEAT_3, 5 DEALER, 6 SEAT_1, 7 SEAT_3, 8 DEALER
CLEAN_PLAN = ["SEAT_1", "SEAT_3", "DEALER"] * 3


# -- clean rounds ------------------------------------------------------------------------------


def test_clean_hand_dealt_round_with_pair_bonus_per_player_raises_nothing(tcp):
    t = tcp()
    t.tcp_round("R1", antes=("SEAT_1", "SEAT_3", "SEAT_6"), pair_bonus=("SEAT_3", "SEAT_6"), prime=("SEAT_1",))
    t.tcp_round("R2", antes=("SEAT_2",), pair_bonus=("SEAT_2",))
    t.assert_clean()


def test_clean_hand_dealt_round_with_pair_bonus_community_card_raises_nothing(tcp):
    t = tcp(pair_bonus_mode="COMMUNITY")
    log = t.tcp_round("R1", antes=("SEAT_1", "SEAT_3"), pair_bonus=("SEAT_1", "SEAT_3"))
    assert [c.to_area for c in log.cards][-1] == "PAIR_BONUS_COMMUNITY"
    assert t.raised("TCP-679a.9-g-pair-bonus-community") == []
    t.assert_clean()


def test_clean_round_stub_count_is_52_less_cards_dealt(tcp):
    # given 3 Ante seats, 2 of them with Pair Bonus: 3 x (3 + 1) + 2 = 14 cards leave the deck
    t = tcp()
    log = t.tcp_round("R1", antes=("SEAT_1", "SEAT_3", "SEAT_6"), pair_bonus=("SEAT_3", "SEAT_6"), stub=38)
    assert len(log.cards) == 14
    t.assert_clean()


# -- § 679a.7 wagers ---------------------------------------------------------------------------


def _prime(t, **fields):
    return t.emit(ev.WagerPlaced, wager_id="R1-PRIME-2", seat="SEAT_2", wager_type="PRIME", amount=100, **fields)


def test_TCP_679a_7_a_instrument_raised_for_cash_verbal_wager(tcp):
    t = tcp()
    log = t.tcp_round("R1", hooks={"after_wagers": lambda t: _prime(t, instrument="CASH_VERBAL")})
    t.assert_raised("TCP-679a.7-a-instrument", round_id="R1", evidence=log.ids("after_wagers"))


@pytest.mark.parametrize("instrument", ["CHIPS", "PLAQUE", "APPROVED_INSTRUMENT"])
def test_TCP_679a_7_a_instrument_not_raised_for_chips_plaques_or_approved_instruments(tcp, instrument):
    t = tcp()
    t.tcp_round("R1", hooks={"after_wagers": lambda t: _prime(t, instrument=instrument)})
    t.assert_clean()


def test_TCP_679a_7_b_seated_raised_for_wager_by_player_not_seated(tcp):
    t = tcp()
    log = t.tcp_round("R1", hooks={"after_wagers": lambda t: _prime(t, player_seated=False)})
    t.assert_raised("TCP-679a.7-b-seated", round_id="R1", evidence=log.ids("after_wagers"))


def test_TCP_679a_7_b_seated_not_raised_for_seated_player(tcp):
    t = tcp()
    t.tcp_round("R1", hooks={"after_wagers": lambda t: _prime(t, player_seated=True)})
    t.assert_not_raised("TCP-679a.7-b-seated")
    t.assert_clean()


@pytest.mark.parametrize(
    "late",
    [
        pytest.param(_prime, id="placed"),
        pytest.param(
            lambda t: t.emit(ev.WagerChanged, wager_id="R1-ANTE-1", seat="SEAT_1", wager_type="ANTE", amount=1000),
            id="changed",
        ),
        pytest.param(
            lambda t: t.emit(ev.WagerWithdrawn, wager_id="R1-PAIR_BONUS-3", seat="SEAT_3", wager_type="PAIR_BONUS"),
            id="withdrawn",
        ),
    ],
)
def test_TCP_679a_7_c_late_wager_raised_for_non_play_wager_after_no_more_bets(tcp, late):
    t = tcp()
    log = t.tcp_round("R1", pair_bonus=("SEAT_3",), hooks={"after_nmb": late})
    t.assert_raised("TCP-679a.7-c-late-wager", round_id="R1", evidence=log.ids("nmb", "after_nmb"))


def test_TCP_679a_7_c_late_wager_not_raised_for_optional_wager_before_no_more_bets_and_play_after(tcp):
    # the Prime Wager is placed before "no more bets"; the Play Wagers (after it) are allowed
    t = tcp()
    t.tcp_round("R1", hooks={"after_wagers": _prime})
    t.assert_not_raised("TCP-679a.7-c-late-wager")
    t.assert_clean()


def test_TCP_679a_7_d1_play_equals_ante_raised_for_play_differing_from_ante(tcp):
    t = tcp()
    log = t.tcp_round("R1", play={"SEAT_1": 500, "SEAT_3": 700})
    ante = log.wagers["R1-ANTE-3"]
    t.assert_raised("TCP-679a.7-d1-play-equals-ante", round_id="R1", evidence=(ante.event_id, log.id("play_SEAT_3")))


def test_TCP_679a_7_d1_play_equals_ante_raised_for_play_without_ante(tcp):
    t = tcp()
    log = t.tcp_round("R1", play={"SEAT_1": 500, "SEAT_3": 500, "SEAT_2": 500})
    t.assert_raised("TCP-679a.7-d1-play-equals-ante", round_id="R1", evidence=log.ids("play_SEAT_2"))


def test_TCP_679a_7_d1_play_equals_ante_not_raised_when_play_equals_ante_or_player_folds(tcp):
    t = tcp()
    t.tcp_round("R1", play={"SEAT_1": 500})  # SEAT_3 folds: no Play Wager
    t.assert_not_raised("TCP-679a.7-d1-play-equals-ante")
    t.assert_clean()


@pytest.mark.parametrize("wager", ["PAIR_BONUS", "PRIME"])
def test_TCP_679a_7_d23_optional_wager_enabled_raised_for_wager_not_in_rules_submission(tcp, wager):
    t = tcp(wagers_enabled=frozenset({"ANTE", "PLAY"}))
    kwargs = {"pair_bonus": ("SEAT_3",)} if wager == "PAIR_BONUS" else {"prime": ("SEAT_3",)}
    log = t.tcp_round("R1", **kwargs)
    placed = log.wagers[f"R1-{wager}-3"]
    t.assert_raised("TCP-679a.7-d23-optional-wager-enabled", round_id="R1", evidence=(placed.event_id,))


def test_TCP_679a_7_d23_optional_wager_enabled_not_raised_when_offered(tcp):
    t = tcp(wagers_enabled=frozenset({"ANTE", "PLAY", "PAIR_BONUS", "PRIME"}))
    t.tcp_round("R1", pair_bonus=("SEAT_3",), prime=("SEAT_3",))
    t.assert_clean()


# -- § 679a.9(a) -------------------------------------------------------------------------------


def test_TCP_679a_9_a1_shuffler_required_raised_for_hand_deal_after_manual_shuffle(tcp):
    t = tcp()
    log = t.tcp_round("R1", shuffle="MANUAL")
    t.assert_raised(
        "TCP-679a.9-a1-shuffler-required",
        round_id="R1",
        evidence=(log.id("started"), log.id("shuffled"), log.cards[0].event_id),
    )


def test_TCP_679a_9_a1_shuffler_required_raised_for_hand_deal_with_no_recorded_shuffle(tcp):
    t = tcp()
    log = t.tcp_round("R1", shuffle=None)
    t.assert_raised(
        "TCP-679a.9-a1-shuffler-required", round_id="R1", evidence=(log.id("started"), log.cards[0].event_id)
    )


def test_TCP_679a_9_a1_shuffler_required_not_raised_after_automated_shuffle(tcp):
    t = tcp()
    t.tcp_round("R1", shuffle="AUTOMATED")
    t.assert_clean()


def test_TCP_679a_9_a1_shuffler_required_not_raised_for_shoe_dealt_round_after_manual_shuffle(tcp):
    t = tcp()
    t.tcp_round("R1", shuffle="MANUAL", method="MANUAL_SHOE")
    t.assert_not_raised("TCP-679a.9-a1-shuffler-required")


def test_TCP_679a_9_a2_same_hand_raised_when_deck_changes_hands(tcp):
    t = tcp()
    log = t.tcp_round("R1", hooks={"after_held": lambda t: t.emit(ev.DeckHeld, hand="LEFT")})
    t.assert_raised("TCP-679a.9-a2-same-hand", round_id="R1", evidence=log.ids("held", "after_held"))


@pytest.mark.parametrize("where", ["over_inventory_container", "in_front_of_dealer"])
def test_TCP_679a_9_a2_same_hand_raised_when_deck_not_over_container_or_in_front(tcp, where):
    t = tcp()
    log = t.tcp_round(
        "R1", hold=False, hooks={"after_nmb": lambda t: t.emit(ev.DeckHeld, hand="RIGHT", **{where: False})}
    )
    t.assert_raised("TCP-679a.9-a2-same-hand", round_id="R1", evidence=log.ids("after_nmb"))


def test_TCP_679a_9_a2_same_hand_not_raised_when_deck_stays_in_the_chosen_hand(tcp):
    t = tcp()
    t.tcp_round("R1", hooks={"after_held": lambda t: t.emit(ev.DeckHeld, hand="RIGHT")})
    t.assert_clean()


def test_TCP_679a_9_a3_no_more_bets_raised_when_never_announced(tcp):
    t = tcp()
    log = t.tcp_round("R1", announce=False)
    t.assert_raised("TCP-679a.9-a3-no-more-bets", round_id="R1", evidence=(log.id("started"), log.cards[0].event_id))


def test_TCP_679a_9_a3_no_more_bets_raised_when_announced_after_the_first_card(tcp):
    t = tcp()
    log = t.tcp_round("R1", announce=False, hooks={"after_deal": lambda t: t.emit(ev.NoMoreBetsAnnounced)})
    t.assert_raised("TCP-679a.9-a3-no-more-bets", round_id="R1", evidence=(log.id("started"), log.cards[0].event_id))


def test_TCP_679a_9_a3_no_more_bets_not_raised_when_announced_before_dealing(tcp):
    t = tcp()
    t.tcp_round("R1", announce=True)
    t.assert_clean()


# -- § 679a.9(b) -------------------------------------------------------------------------------


def test_TCP_679a_9_b_deal_order_raised_when_deal_starts_at_wrong_seat(tcp):
    t = tcp()
    plan = ["SEAT_3", "SEAT_1", "DEALER", *CLEAN_PLAN[3:]]
    log = t.tcp_round("R1", deal=plan)
    t.assert_raised("TCP-679a.9-b-deal-order", round_id="R1", evidence=log.card_ids(0))


def test_TCP_679a_9_b_deal_order_raised_when_dealer_not_last_in_pass(tcp):
    t = tcp()
    plan = ["SEAT_1", "SEAT_3", "DEALER", "SEAT_1", "DEALER", "SEAT_3", *CLEAN_PLAN[6:]]
    log = t.tcp_round("R1", deal=plan)
    t.assert_raised("TCP-679a.9-b-deal-order", round_id="R1", evidence=log.card_ids(4))


def test_TCP_679a_9_b_deal_order_raised_once_for_card_to_seat_without_ante(tcp):
    t = tcp()
    plan = ["SEAT_1", "SEAT_2", "SEAT_3", "DEALER", *CLEAN_PLAN[3:]]
    log = t.tcp_round("R1", deal=plan)
    t.assert_raised("TCP-679a.9-b-deal-order", round_id="R1", evidence=log.card_ids(1))


def test_TCP_679a_9_b_deal_order_not_raised_for_clockwise_deal_from_farthest_left_ante_seat(tcp):
    # Antes at SEAT_2, SEAT_4, SEAT_5: SEAT_1 (farthest left) has no Ante, so SEAT_2 starts
    t = tcp()
    t.tcp_round("R1", antes=("SEAT_2", "SEAT_4", "SEAT_5"), deal=["SEAT_2", "SEAT_4", "SEAT_5", "DEALER"] * 3)
    t.assert_clean()


def test_TCP_679a_9_b_three_each_raised_at_deal_close_for_short_hand(tcp):
    t = tcp()
    log = t.tcp_round("R1", deal=CLEAN_PLAN[:-1])  # the dealer's third card is missing
    t.assert_raised("TCP-679a.9-b-three-each", round_id="R1", evidence=log.cards_to("DEALER"))


def test_TCP_679a_9_b_three_each_raised_for_ante_seat_with_four_cards(tcp):
    t = tcp()
    log = t.tcp_round("R1", deal=[*CLEAN_PLAN, "SEAT_3"])
    t.assert_raised("TCP-679a.9-b-three-each", round_id="R1", evidence=log.cards_to("SEAT_3"))


def test_TCP_679a_9_b_three_each_not_raised_for_three_cards_each(tcp):
    t = tcp()
    t.tcp_round("R1", deal=CLEAN_PLAN)
    t.assert_clean()


def test_TCP_679a_9_b_three_each_raised_when_round_completes_right_after_a_short_deal(tcp):
    t = tcp()
    log = t.tcp_round("R1", deal=CLEAN_PLAN[:-1], stub=None, discard=False, play={}, settle=False)
    t.assert_raised("TCP-679a.9-b-three-each", round_id="R1", evidence=log.cards_to("DEALER"))


def test_TCP_679a_9_b_face_down_raised_for_face_up_card(tcp):
    t = tcp()
    plan = [*CLEAN_PLAN]
    plan[4] = ("SEAT_3", {"face": "UP"})
    log = t.tcp_round("R1", deal=plan)
    t.assert_raised("TCP-679a.9-b-face-down", round_id="R1", evidence=log.card_ids(4))


def test_TCP_679a_9_b_face_down_not_raised_for_face_down_deal(tcp):
    t = tcp()
    log = t.tcp_round("R1")
    assert all(c.face == "DOWN" for c in log.cards)
    t.assert_clean()


def test_TCP_679a_9_b_pair_bonus_4th_raised_when_pair_bonus_seat_lacks_fourth_card(tcp):
    t = tcp()
    log = t.tcp_round("R1", pair_bonus=("SEAT_3",), deal=CLEAN_PLAN)
    t.assert_raised("TCP-679a.9-b-pair-bonus-4th", round_id="R1", evidence=(log.wagers["R1-PAIR_BONUS-3"].event_id,))


def test_TCP_679a_9_b_pair_bonus_4th_raised_for_fourth_card_without_pair_bonus(tcp):
    t = tcp()
    log = t.tcp_round("R1", pair_bonus=("SEAT_3",), deal=[*CLEAN_PLAN, "PAIR_BONUS_4TH_3", "PAIR_BONUS_4TH_1"])
    t.assert_raised("TCP-679a.9-b-pair-bonus-4th", round_id="R1", evidence=log.cards_to("PAIR_BONUS_4TH_1"))


def test_TCP_679a_9_b_pair_bonus_4th_not_raised_when_each_pair_bonus_seat_gets_one(tcp):
    t = tcp()
    log = t.tcp_round("R1", pair_bonus=("SEAT_1", "SEAT_3"))
    assert len(log.cards_to("PAIR_BONUS_4TH_1")) == len(log.cards_to("PAIR_BONUS_4TH_3")) == 1
    t.assert_clean()


def test_TCP_679a_9_g_pair_bonus_community_raised_when_community_card_not_elected(tcp):
    t = tcp(pair_bonus_mode="PER_PLAYER")
    log = t.tcp_round("R1", pair_bonus=("SEAT_3",), deal=[*CLEAN_PLAN, "PAIR_BONUS_COMMUNITY"])
    t.assert_raised("TCP-679a.9-g-pair-bonus-community", round_id="R1", evidence=log.card_ids(9))


def test_TCP_679a_9_g_pair_bonus_community_raised_when_dealt_before_every_hand_has_three(tcp):
    t = tcp(pair_bonus_mode="COMMUNITY")
    plan = [*CLEAN_PLAN[:8], "PAIR_BONUS_COMMUNITY", "DEALER"]
    log = t.tcp_round("R1", pair_bonus=("SEAT_3",), deal=plan)
    t.assert_raised("TCP-679a.9-g-pair-bonus-community", round_id="R1", evidence=log.card_ids(8))


def test_TCP_679a_9_g_pair_bonus_community_raised_for_fourth_cards_when_community_elected(tcp):
    t = tcp(pair_bonus_mode="COMMUNITY")
    log = t.tcp_round("R1", pair_bonus=("SEAT_3",), deal=[*CLEAN_PLAN, "PAIR_BONUS_4TH_3"])
    t.assert_raised("TCP-679a.9-g-pair-bonus-community", round_id="R1", evidence=log.card_ids(9))


def test_TCP_679a_9_g_pair_bonus_community_not_raised_for_community_card_after_all_hands(tcp):
    t = tcp(pair_bonus_mode="COMMUNITY")
    t.tcp_round("R1", pair_bonus=("SEAT_3",), deal=[*CLEAN_PLAN, "PAIR_BONUS_COMMUNITY"])
    t.assert_clean()


# -- § 679a.9(c)-(e) stub ----------------------------------------------------------------------


def test_TCP_679a_9_c_stub_unexposed_raised_for_stub_card_exposed(tcp):
    t = tcp()
    log = t.tcp_round("R1", hooks={"after_stub": lambda t: t.emit(ev.CardExposed, location="STUB", card="7H")})
    t.assert_raised("TCP-679a.9-c-stub-unexposed", round_id="R1", evidence=log.ids("after_stub"))


def test_TCP_679a_9_c_stub_unexposed_raised_for_stub_discarded_exposed(tcp):
    t = tcp()
    log = t.tcp_round("R1", discard_exposed=True)
    t.assert_raised("TCP-679a.9-c-stub-unexposed", round_id="R1", evidence=log.ids("discard"))


def test_TCP_679a_9_c_stub_unexposed_raised_when_uncounted_stub_never_discarded(tcp):
    t = tcp()
    log = t.tcp_round("R1", stub=None, discard=False)
    t.assert_raised("TCP-679a.9-c-stub-unexposed", round_id="R1", evidence=log.ids("started", "completed"))


def test_TCP_679a_9_c_stub_unexposed_not_raised_when_stub_discarded_unexposed(tcp):
    t = tcp()
    t.tcp_round("R1", stub=None, discard=True)
    t.assert_clean()


def test_TCP_679a_9_d_stub_count_due_raised_after_five_uncounted_rounds(tcp):
    t = tcp(counting_shuffler=False)
    logs = [t.tcp_round(f"R{i}", stub=None) for i in range(1, 6)]
    t.assert_raised("TCP-679a.9-d-stub-count-due", round_id="R5", evidence=tuple(log.id("completed") for log in logs))


def test_TCP_679a_9_d_stub_count_due_not_raised_after_four_uncounted_rounds(tcp):
    t = tcp(counting_shuffler=False)
    for i in range(1, 5):
        t.tcp_round(f"R{i}", stub=None)
    t.assert_clean()


def test_TCP_679a_9_d_stub_count_due_not_raised_when_a_count_falls_in_every_window(tcp):
    t = tcp(counting_shuffler=False)
    for i in range(1, 9):
        t.tcp_round(f"R{i}", stub="FULL_DECK" if i == 4 else None)
    t.assert_clean()


def test_TCP_679a_9_d_stub_count_due_window_restarts_after_a_count(tcp):
    t = tcp(counting_shuffler=False)
    logs = [t.tcp_round(f"R{i}", stub="FULL_DECK" if i == 2 else None) for i in range(1, 8)]
    t.assert_raised(
        "TCP-679a.9-d-stub-count-due", round_id="R7", evidence=tuple(log.id("completed") for log in logs[2:])
    )


def test_TCP_679a_9_d_stub_count_due_not_raised_with_counting_shuffler(tcp):
    t = tcp(counting_shuffler=True)
    for i in range(1, 7):
        t.tcp_round(f"R{i}", stub=None)
    t.assert_clean()


def test_TCP_679a_9_d_stub_count_due_raised_when_counting_shuffler_did_not_report_the_count(tcp):
    # a counting device with a missing count for the shuffle makes the round non-exempt
    t = tcp(counting_shuffler=True)
    logs = []
    for i in range(1, 6):
        t.shuffle("AUTOMATED", device_card_count=None, device_full_deck_ok=None)
        logs.append(t.tcp_round(f"R{i}", stub=None, shuffle=None))
    t.assert_raised("TCP-679a.9-d-stub-count-due", round_id="R5", evidence=tuple(log.id("completed") for log in logs))


@pytest.mark.parametrize("kwargs", [{"method": "OTHER"}, {"exposed": True}], ids=["not-on-layout", "exposed"])
def test_TCP_679a_9_d_count_method_raised_for_count_not_face_down_on_layout(tcp, kwargs):
    t = tcp()
    log = t.tcp_round("R1", stub_kwargs=kwargs)
    t.assert_raised("TCP-679a.9-d-count-method", round_id="R1", evidence=log.ids("stub"))


def test_TCP_679a_9_d_count_method_not_raised_for_face_down_count_on_layout(tcp):
    t = tcp()
    t.tcp_round("R1", stub_kwargs={"method": "FACE_DOWN_ON_LAYOUT", "exposed": False})
    t.assert_clean()


def test_TCP_679a_9_e_correct_count_raised_when_correctly_counted_stub_not_discarded(tcp):
    t = tcp()
    log = t.tcp_round("R1", discard=False)
    t.assert_raised("TCP-679a.9-e-correct-count", round_id="R1", evidence=log.ids("stub", "completed"))
    t.assert_not_raised("TCP-679a.9-c-stub-unexposed")


def test_TCP_679a_9_e_correct_count_not_raised_when_stub_discarded_after_correct_count(tcp):
    t = tcp()
    t.tcp_round("R1", discard=True)
    t.assert_clean()


# -- § 679a.9(f) wrong count -------------------------------------------------------------------


def test_TCP_679a_9_f_misdeal_full_deck_raised_for_wrong_distribution_with_52_cards(tcp):
    # the dealer got only two cards; the stub of 44 and the 8 dealt make the full 52
    t = tcp()
    log = t.tcp_round("R1", deal=CLEAN_PLAN[:-1], stub=44, play={}, settle=False)
    t.assert_raised("TCP-679a.9-f-misdeal-full-deck", round_id="R1", evidence=log.ids("stub"))
    t.assert_not_raised("TCP-679a.9-f-wrong-deck")


def test_TCP_679a_9_f_misdeal_full_deck_not_raised_for_correct_stub_count(tcp):
    t = tcp()
    t.tcp_round("R1", stub=43)
    t.assert_clean()


@pytest.mark.parametrize("stub", [42, 44], ids=["short-deck", "long-deck"])
def test_TCP_679a_9_f_wrong_deck_raised_when_deck_total_is_not_52(tcp, stub):
    t = tcp()
    log = t.tcp_round("R1", stub=stub, play={}, settle=False)
    t.assert_raised("TCP-679a.9-f-wrong-deck", round_id="R1", evidence=log.ids("stub"))
    t.assert_not_raised("TCP-679a.9-f-misdeal-full-deck")


def test_TCP_679a_9_f_wrong_deck_not_raised_for_misdeal_with_full_deck(tcp):
    t = tcp()
    t.tcp_round("R1", deal=CLEAN_PLAN[:-1], stub=44, play={}, settle=False)
    t.assert_not_raised("TCP-679a.9-f-wrong-deck")


def _determined(misdealt, total):
    return lambda t: t.emit(ev.MisdealDetermined, misdealt=misdealt, dealer_reconciled_total=total)


def test_TCP_679a_9_f_finding_mismatch_raised_when_dealer_calls_misdeal_on_correct_count(tcp):
    t = tcp()
    log = t.tcp_round("R1", hooks={"after_stub": _determined(True, 52)})
    t.assert_raised("TCP-679a.9-f-finding-mismatch", round_id="R1", evidence=log.ids("stub", "after_stub"))


def test_TCP_679a_9_f_finding_mismatch_raised_when_dealer_denies_misdeal_with_full_deck(tcp):
    t = tcp()
    log = t.tcp_round("R1", deal=CLEAN_PLAN[:-1], stub=44, hooks={"after_stub": _determined(False, 52)})
    t.assert_raised("TCP-679a.9-f-finding-mismatch", round_id="R1", evidence=log.ids("stub", "after_stub"))


def test_TCP_679a_9_f_finding_mismatch_raised_when_dealer_total_differs_from_events(tcp):
    t = tcp()
    log = t.tcp_round("R1", stub=42, hooks={"after_stub": _determined(False, 52)})
    t.assert_raised("TCP-679a.9-f-finding-mismatch", round_id="R1", evidence=log.ids("stub", "after_stub"))


@pytest.mark.parametrize(
    ("deal", "stub", "misdealt", "total"),
    [(CLEAN_PLAN[:-1], 44, True, 52), (CLEAN_PLAN, 42, False, 51)],
    ids=["misdeal-agreed", "short-deck-agreed"],
)
def test_TCP_679a_9_f_finding_mismatch_not_raised_when_dealer_agrees_with_events(tcp, deal, stub, misdealt, total):
    t = tcp()
    t.tcp_round("R1", deal=deal, stub=stub, hooks={"after_stub": _determined(misdealt, total)})
    t.assert_not_raised("TCP-679a.9-f-finding-mismatch")


# -- provisional: shoe-dealt stub count --------------------------------------------------------


def test_TCP_679a_8_10_stub_count_PROV_raised_after_five_uncounted_shoe_rounds(tcp):
    t = tcp(counting_shuffler=False)
    logs = [t.tcp_round(f"R{i}", method="AUTO_SHOE", stub=None) for i in range(1, 6)]
    f = t.assert_raised(
        "TCP-679a.8/10-stub-count-PROV", round_id="R5", evidence=tuple(log.id("completed") for log in logs)
    )
    assert f.provisional is True
    t.assert_not_raised("TCP-679a.9-d-stub-count-due")


def test_TCP_679a_8_10_stub_count_PROV_not_raised_when_shoe_stub_counted(tcp):
    t = tcp(counting_shuffler=False)
    for i in range(1, 7):
        t.tcp_round(f"R{i}", method="AUTO_SHOE", stub="FULL_DECK" if i == 3 else None)
    t.assert_clean()


def test_TCP_679a_8_10_stub_count_PROV_not_raised_when_provisional_rules_off(tcp):
    t = tcp(counting_shuffler=False, provisional_rules=False)
    for i in range(1, 6):
        t.tcp_round(f"R{i}", method="AUTO_SHOE", stub=None)
    t.assert_clean()
