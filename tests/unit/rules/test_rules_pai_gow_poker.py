"""Pai Gow Poker: 58 Pa. Code § 645a.14 (irregularities), § 645c.2 (dice wagers) and the
provisional § 645a.9 rules (rulebook section 7).

The table has SEAT_1..SEAT_6 and the dealer: 7 positions counted dealer = 1, counter-clockwise
(DEALER, SEAT_6, SEAT_5, ..., SEAT_1). Dice (2, 3, 4) total 9, which counts to SEAT_6.
"""

from __future__ import annotations

import pytest

from schemas import events as ev

ORDER = ["DEALER", "SEAT_6", "SEAT_5", "SEAT_4", "SEAT_3", "SEAT_2", "SEAT_1"]


def rotate(first):
    k = ORDER.index(first)
    return ORDER[k:] + ORDER[:k]


# -- clean rounds ------------------------------------------------------------------------------


def test_clean_pai_gow_rounds_raise_nothing(pgp):
    t = pgp()
    r1 = t.pgp_round("R1", dice=(2, 3, 4))
    r2 = t.pgp_round("R2", dice=(6, 6, 5), dice_wagers={"SEAT_2": "SUM", "SEAT_4": "MATCH"})
    assert [s.to_position for s in r1.stacks] == rotate("SEAT_6")
    assert [s.to_position for s in r2.stacks] == rotate("SEAT_5")  # 17 = 2 x 7 + 3
    assert len(r1.cards) == 49 and {c.to_area for c in r1.cards} == {f"STACK_{i}" for i in range(1, 8)}
    t.assert_clean()


@pytest.mark.parametrize(
    ("dice", "first"),
    [((1, 1, 5), "SEAT_1"), ((2, 2, 4), "DEALER"), ((1, 1, 1), "SEAT_5"), ((6, 6, 6), "SEAT_4")],
    ids=["7-SEAT_1", "8-DEALER", "3-SEAT_5", "18-SEAT_4"],
)
def test_clean_pai_gow_round_first_stack_at_counted_position(pgp, dice, first):
    t = pgp()
    log = t.pgp_round("R1", dice=dice, start=first, deliver=[(p, 7) for p in rotate(first)])
    assert log.stacks[0].to_position == first
    t.assert_clean()


def test_clean_pai_gow_round_with_rng_number_where_elected(pgp):
    t = pgp(shaker_mode="RNG")
    t.pgp_round("R1", rng=9, dice=None, start="SEAT_6", deliver=[(p, 7) for p in rotate("SEAT_6")])
    t.assert_clean()


def test_clean_pai_gow_round_dealt_from_automated_shoe(pgp):
    t = pgp()
    t.pgp_round("R1", method="AUTO_SHOE")
    t.assert_clean()


# -- § 645a.14(a), (b) no roll -----------------------------------------------------------------


def _bad_roll(**fields):
    def hook(t):
        t.emit(ev.DiceShaken, shaker_id="SHK-1", shake_count=3)
        revealed = t.emit(ev.DiceRevealed, values=(1, 2, 6), **fields)
        reason = "NOT_FLAT" if "all_flat" in fields else "OUT_OF_SHAKER"
        t.emit(ev.NoRollCalled, reason=reason)
        return revealed

    return hook


def test_PGP_645a_14_a_no_roll_not_flat_raised_for_dice_not_flat(pgp):
    t = pgp()
    log = t.pgp_round("R1", hooks={"before_dice": _bad_roll(all_flat=False)})
    t.assert_raised("PGP-645a.14-a-no-roll-not-flat", round_id="R1", evidence=log.ids("before_dice"))


def test_PGP_645a_14_a_no_roll_not_flat_not_raised_for_flat_dice(pgp):
    t = pgp()
    t.pgp_round("R1", hooks={"before_dice": lambda t: None})
    t.assert_clean()


def test_PGP_645a_14_b_no_roll_out_raised_for_die_out_of_shaker(pgp):
    t = pgp()
    log = t.pgp_round("R1", hooks={"before_dice": _bad_roll(die_out_of_shaker=True)})
    t.assert_raised("PGP-645a.14-b-no-roll-out", round_id="R1", evidence=log.ids("before_dice"))


def test_PGP_645a_14_b_no_roll_out_not_raised_when_dice_stay_in_shaker(pgp):
    t = pgp()
    t.pgp_round("R1")
    t.assert_not_raised("PGP-645a.14-b-no-roll-out")
    t.assert_clean()


def test_invalid_roll_is_not_used_for_the_starting_position(pgp):
    # the void roll (1, 2, 6) = 9 counts to SEAT_6; the valid reshake (1, 1, 1) = 3 counts to SEAT_5
    t = pgp()
    t.pgp_round("R1", dice=(1, 1, 1), hooks={"before_dice": _bad_roll(all_flat=False)})
    t.assert_not_raised("PGP-645a.9-start-position-PROV")
    t.assert_not_raised("PGP-645a.14-c-wrong-total")


# -- § 645a.14(c) wrong total ------------------------------------------------------------------


def test_PGP_645a_14_c_wrong_total_raised_for_wrong_total_and_first_stack_to_wrong_position(pgp):
    # dice 2+3+4 = 9 (SEAT_6); the dealer announces 10 and deals from SEAT_5
    t = pgp()
    log = t.pgp_round("R1", dice=(2, 3, 4), announced_total=10, settle=False)
    assert log.stacks[0].to_position == "SEAT_5"
    t.assert_raised(
        "PGP-645a.14-c-wrong-total", round_id="R1", evidence=(*log.ids("revealed", "total"), log.stacks[0].event_id)
    )
    t.assert_not_raised("PGP-645a.9-start-position-PROV")


def test_PGP_645a_14_c_wrong_total_not_raised_when_first_stack_still_goes_to_true_position(pgp):
    t = pgp()
    t.pgp_round("R1", dice=(2, 3, 4), announced_total=10, start="SEAT_6")
    t.assert_clean()


# -- § 645a.14(d) player card exposed ----------------------------------------------------------


def _expose(**fields):
    return lambda t: t.emit(ev.CardExposed, card="KD", **fields)


def test_PGP_645a_14_d_player_card_exposed_raised_for_dealer_exposing_players_card(pgp):
    t = pgp()
    log = t.pgp_round(
        "R1",
        hooks={
            "after_delivery": _expose(location="PLAYER_HAND", seat="SEAT_3", exposed_by="DEALER", phase="PLAY"),
            "before_settle": lambda t: t.emit(ev.PlayerVoidDecided, seat="SEAT_3", decision="PLAY_OUT"),
        },
    )
    t.assert_raised("PGP-645a.14-d-player-card-exposed", round_id="R1", evidence=log.ids("after_delivery"))


def test_PGP_645a_14_d_player_card_exposed_not_raised_when_player_exposes_own_card(pgp):
    t = pgp()
    t.pgp_round("R1", hooks={"after_delivery": _expose(location="PLAYER_HAND", seat="SEAT_3", exposed_by="PLAYER")})
    t.assert_clean()


def test_PGP_645a_14_d_decision_after_look_raised_when_player_looks_before_deciding(pgp):
    # the round builder lets each player view the cards after delivery; SEAT_3 has not decided yet
    t = pgp()
    log = t.pgp_round("R1", hooks={"after_delivery": _expose(location="PLAYER_HAND", seat="SEAT_3", phase="PLAY")})
    viewed = next(e for e in t.events if isinstance(e, ev.PlayerViewedCards) and e.seat == "SEAT_3")
    t.assert_raised(
        "PGP-645a.14-d-decision-after-look", round_id="R1", evidence=(log.id("after_delivery"), viewed.event_id)
    )


def test_PGP_645a_14_d_decision_after_look_not_raised_when_decision_precedes_looking(pgp):
    def expose_then_decide(t):
        exposed = _expose(location="PLAYER_HAND", seat="SEAT_3", phase="PLAY")(t)
        t.emit(ev.PlayerVoidDecided, seat="SEAT_3", decision="PLAY_OUT", role="PLAYER", actor_id="P-3")
        return exposed

    t = pgp()
    t.pgp_round("R1", hooks={"after_delivery": expose_then_decide})
    t.assert_not_raised("PGP-645a.14-d-decision-after-look")
    assert t.rule_ids() == {"PGP-645a.14-d-player-card-exposed"}


# -- § 645a.14(e) dealer / bank card exposed ---------------------------------------------------


@pytest.mark.parametrize("location", ["DEALER_HAND", "BANK_HAND"])
def test_PGP_645a_14_e_dealer_bank_exposed_raised_for_dealer_or_bank_card_exposed(pgp, location):
    t = pgp()
    log = t.pgp_round("R1", settle=False, hooks={"after_delivery": _expose(location=location, phase="PLAY")})
    t.assert_raised("PGP-645a.14-e-dealer-bank-exposed", round_id="R1", evidence=log.ids("after_delivery"))


def test_PGP_645a_14_e_dealer_bank_exposed_not_raised_for_players_own_exposure(pgp):
    t = pgp()
    t.pgp_round("R1", hooks={"after_delivery": _expose(location="PLAYER_HAND", seat="SEAT_1", exposed_by="PLAYER")})
    t.assert_not_raised("PGP-645a.14-e-dealer-bank-exposed")
    t.assert_clean()


# -- § 645a.14(f) cards found face up ----------------------------------------------------------


def _face_up(location="DECK"):
    return lambda t: t.emit(ev.CardFoundFaceUp, location=location)


def test_PGP_645a_14_f_one_face_up_raised_for_first_card_found_face_up(pgp):
    t = pgp()
    log = t.pgp_round("R1", hooks={"after_dice": _face_up()})
    t.assert_raised("PGP-645a.14-f-one-face-up", round_id="R1", evidence=log.ids("after_dice"))
    t.assert_not_raised("PGP-645a.14-f-two-face-up")


def test_PGP_645a_14_f_one_face_up_not_raised_without_face_up_card(pgp):
    t = pgp()
    t.pgp_round("R1")
    t.assert_not_raised("PGP-645a.14-f-one-face-up")


def test_PGP_645a_14_f_two_face_up_raised_for_second_card_face_up_in_the_round(pgp):
    t = pgp()
    log = t.pgp_round("R1", settle=False, hooks={"after_dice": _face_up(), "after_stacks_dealt": _face_up("DECK")})
    t.assert_raised("PGP-645a.14-f-two-face-up", round_id="R1", evidence=log.ids("after_dice", "after_stacks_dealt"))
    t.assert_raised("PGP-645a.14-f-one-face-up", round_id="R1", evidence=log.ids("after_dice"))


def test_PGP_645a_14_f_two_face_up_not_raised_for_one_face_up_card_in_each_of_two_rounds(pgp):
    t = pgp()
    t.pgp_round("R1", hooks={"after_dice": _face_up()})
    t.pgp_round("R2", hooks={"after_dice": _face_up()})
    t.assert_not_raised("PGP-645a.14-f-two-face-up")
    assert [f.round_id for f in t.raised("PGP-645a.14-f-one-face-up")] == ["R1", "R2"]


# -- § 645a.14(g) card drawn in error ----------------------------------------------------------


def test_PGP_645a_14_g_drawn_in_error_raised_when_unexposed_card_discarded(pgp):
    t = pgp()
    log = t.pgp_round(
        "R1", hooks={"after_dice": lambda t: t.emit(ev.CardDrawnInError, face_exposed=False, disposition="DISCARDED")}
    )
    t.assert_raised("PGP-645a.14-g-drawn-in-error", round_id="R1", evidence=log.ids("after_dice"))


@pytest.mark.parametrize(
    ("exposed", "disposition"), [(False, "USED_AS_NEXT"), (True, "DISCARDED")], ids=["used-as-next", "exposed"]
)
def test_PGP_645a_14_g_drawn_in_error_not_raised_when_used_as_next_or_exposed(pgp, exposed, disposition):
    t = pgp()
    t.pgp_round(
        "R1", hooks={"after_dice": lambda t: t.emit(ev.CardDrawnInError, face_exposed=exposed, disposition=disposition)}
    )
    t.assert_clean()


# -- § 645a.14(h), (k) wrong number of cards ---------------------------------------------------


def test_PGP_645a_14_hk_wrong_count_raised_for_position_with_six_cards(pgp):
    t = pgp()
    deliver = [(p, 6 if p == "SEAT_4" else 7) for p in rotate("SEAT_6")]
    log = t.pgp_round("R1", deliver=deliver, settle=False)
    t.assert_raised("PGP-645a.14-hk-wrong-count", round_id="R1", evidence=(log.stacks[2].event_id,))


def test_PGP_645a_14_hk_wrong_count_not_raised_for_seven_cards_everywhere(pgp):
    t = pgp()
    log = t.pgp_round("R1")
    assert {s.card_count for s in log.stacks} == {7}
    t.assert_clean()


# -- § 645a.14(i) house way --------------------------------------------------------------------


def _first_settlement(t, round_id):
    return next(e.event_id for e in t.events if isinstance(e, ev.WagerSettled) and e.round_id == round_id)


def test_PGP_645a_14_i_house_way_raised_for_dealer_hand_not_set_house_way(pgp):
    # rulebook 10.5.3: raised at settlement, with the setting and the first settlement made on it
    t = pgp()
    log = t.pgp_round("R1", house_way=False)
    t.assert_raised(
        "PGP-645a.14-i-house-way", round_id="R1", evidence=(*log.ids("dealer_set"), _first_settlement(t, "R1"))
    )


def test_PGP_645a_14_i_house_way_raised_for_bank_hand(pgp):
    t = pgp()
    log = t.pgp_round(
        "R1", hooks={"before_settle": lambda t: t.emit(ev.HandSet, owner="BANK", matches_house_way=False)}
    )
    t.assert_raised(
        "PGP-645a.14-i-house-way", round_id="R1", evidence=(*log.ids("before_settle"), _first_settlement(t, "R1"))
    )


def test_PGP_645a_14_i_house_way_not_raised_for_dealer_hand_set_house_way(pgp):
    t = pgp()
    t.pgp_round("R1", house_way=True)
    t.assert_clean()


# -- § 645a.14(j) exposure while dealing the stacks --------------------------------------------


@pytest.mark.parametrize(
    "fields", [{"location": "DECK", "phase": "STACK_DEAL"}, {"location": "STACK"}], ids=["stack-deal-phase", "stack"]
)
def test_PGP_645a_14_j_exposed_during_stacks_raised_for_card_exposed_while_dealing_stacks(pgp, fields):
    t = pgp()
    log = t.pgp_round("R1", settle=False, hooks={"after_stacks_dealt": _expose(**fields)})
    t.assert_raised("PGP-645a.14-j-exposed-during-stacks", round_id="R1", evidence=log.ids("after_stacks_dealt"))


def test_PGP_645a_14_j_exposed_during_stacks_not_raised_for_player_exposing_own_hand_in_play(pgp):
    t = pgp()
    t.pgp_round(
        "R1",
        hooks={"after_delivery": _expose(location="PLAYER_HAND", seat="SEAT_5", exposed_by="PLAYER", phase="PLAY")},
    )
    t.assert_clean()


# -- § 645a.14(l)-(n) devices ------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["JAM", "STOPPED", "INCOMPLETE_CYCLE"])
def test_PGP_645a_14_l_shuffler_fault_raised_for_jam_stop_or_incomplete_cycle(pgp, fault):
    t = pgp()
    t.pgp_round("R1")
    faulted = t.emit(ev.ShufflerFaulted, device_id=t.SHUFFLER, fault=fault, role="DEVICE", actor_id=t.SHUFFLER)
    t.pgp_round("R2")  # the builder reshuffles in the same device before the round
    t.assert_raised("PGP-645a.14-l-shuffler-fault", round_id=None, evidence=(faulted.event_id,))


def test_PGP_645a_14_l_shuffler_fault_not_raised_for_count_error(pgp):
    t = pgp()
    t.emit(ev.ShufflerFaulted, device_id=t.SHUFFLER, fault="COUNT_ERROR", role="DEVICE", actor_id=t.SHUFFLER)
    t.pgp_round("R1")
    t.assert_not_raised("PGP-645a.14-l-shuffler-fault")
    t.assert_clean()


def _shoe_fault(t):
    return t.emit(
        ev.AutoShoeFaulted, device_id=t.SHOE, fault="JAM", cards_dealt_so_far=20, role="DEVICE", actor_id=t.SHOE
    )


def test_PGP_645a_14_m_shoe_fault_raised_for_auto_shoe_fault_during_round(pgp):
    t = pgp()
    log = t.pgp_round("R1", method="AUTO_SHOE", settle=False, hooks={"after_stacks_dealt": _shoe_fault})
    t.assert_raised("PGP-645a.14-m-shoe-fault", round_id="R1", evidence=log.ids("after_stacks_dealt"))


def test_PGP_645a_14_m_shoe_fault_not_raised_for_shoe_fault_between_rounds(pgp):
    t = pgp()
    t.pgp_round("R1", method="AUTO_SHOE")
    _shoe_fault(t)
    t.assert_not_raised("PGP-645a.14-m-shoe-fault")


def test_PGP_645a_14_n_out_of_order_raised_for_manual_shuffle_while_faulted_shuffler_uncovered(pgp):
    t = pgp()
    faulted = t.emit(ev.ShufflerFaulted, device_id=t.SHUFFLER, fault="JAM", role="DEVICE", actor_id=t.SHUFFLER)
    log = t.pgp_round("R1", shuffle="MANUAL")
    # rulebook 10.3.2: charged to the round dealt from that shuffle
    t.assert_raised(
        "PGP-645a.14-n-out-of-order", round_id="R1", evidence=(faulted.event_id, log.id("shuffled"), log.id("started"))
    )


def test_PGP_645a_14_n_out_of_order_raised_for_hand_deal_after_shoe_fault(pgp):
    t = pgp()

    def fault_then_deal_by_hand(t):
        fault = _shoe_fault(t)
        card = t.emit(ev.CardDealt, deal_index=1, dealt_from="DECK_IN_HAND", to_area="STACK_1")
        return fault, card

    log = t.pgp_round("R1", method="AUTO_SHOE", settle=False, hooks={"after_dice": fault_then_deal_by_hand})
    fault, card = log["after_dice"]
    t.assert_raised("PGP-645a.14-n-out-of-order", round_id="R1", evidence=(fault.event_id, card.event_id))


def test_PGP_645a_14_n_out_of_order_raised_for_next_round_dealt_by_hand_with_shoe_uncovered(pgp):
    t = pgp()
    fault = {}
    t.pgp_round("R1", method="AUTO_SHOE", hooks={"after_complete": lambda t: fault.setdefault("e", _shoe_fault(t))})
    r2 = t.pgp_round("R2", method="HAND")
    t.assert_raised("PGP-645a.14-n-out-of-order", round_id="R2", evidence=(fault["e"].event_id, r2.id("started")))


def test_PGP_645a_14_n_out_of_order_not_raised_when_device_covered_first(pgp):
    t = pgp()
    t.emit(ev.ShufflerFaulted, device_id=t.SHUFFLER, fault="JAM", role="DEVICE", actor_id=t.SHUFFLER)
    t.emit(
        ev.DeviceTakenOutOfService,
        device_id=t.SHUFFLER,
        covered=True,
        out_of_order_sign=False,
        role="FLOOR",
        actor_id="F-01",
    )
    t.pgp_round("R1", shuffle="MANUAL")
    t.assert_not_raised("PGP-645a.14-n-out-of-order")


def test_PGP_645a_14_n_out_of_order_not_raised_when_faulted_shuffler_itself_reshuffles_after_its_return(pgp):
    t = pgp()
    t.emit(ev.ShufflerFaulted, device_id=t.SHUFFLER, fault="JAM", role="DEVICE", actor_id=t.SHUFFLER)
    t.emit(ev.DeviceReturnedToService, device_id=t.SHUFFLER, role="FLOOR", actor_id="F-01")  # rulebook 10.3.2
    t.pgp_round("R1", shuffle="AUTOMATED")
    t.assert_not_raised("PGP-645a.14-n-out-of-order")


# -- § 645c.2 dice wagers ----------------------------------------------------------------------


def test_PGP_645c_2_f_wager_before_shake_raised_for_dice_wager_after_shake(pgp):
    t = pgp()
    late = lambda t: t.emit(  # noqa: E731
        ev.WagerPlaced, wager_id="R1-SUM-2", seat="SEAT_2", wager_type="SUM", amount=100, role="PLAYER", actor_id="P-2"
    )
    log = t.pgp_round("R1", hooks={"after_reveal": late})
    t.assert_raised("PGP-645c.2-f-wager-before-shake", round_id="R1", evidence=log.ids("shaken", "after_reveal"))


def test_PGP_645c_2_f_wager_before_shake_raised_for_shake_without_no_more_bets(pgp):
    t = pgp()
    log = t.pgp_round("R1", dice_wagers={"SEAT_2": "SUM", "SEAT_4": "BEAT_IT"}, announce=False)
    t.assert_raised(
        "PGP-645c.2-f-wager-before-shake",
        round_id="R1",
        evidence=(log.wagers["R1-SUM-2"].event_id, log.wagers["R1-BEAT_IT-4"].event_id, log.id("shaken")),
    )


def test_PGP_645c_2_f_wager_before_shake_not_raised_for_wagers_then_no_more_bets_then_shake(pgp):
    t = pgp()
    t.pgp_round("R1", dice_wagers={"SEAT_2": "SUM", "SEAT_4": "BEAT_IT"}, announce=True)
    t.assert_clean()


def test_PGP_645c_2_g_announce_dice_raised_for_dice_wager_settled_without_values_announced(pgp):
    t = pgp()
    log = t.pgp_round("R1", dice_wagers={"SEAT_2": "MATCH"}, announce_values=False)
    settled = next(e for e in t.events if isinstance(e, ev.WagerSettled) and e.wager_id == "R1-MATCH-2")
    t.assert_raised("PGP-645c.2-g-announce-dice", round_id="R1", evidence=(log.id("revealed"), settled.event_id))


def test_PGP_645c_2_g_announce_dice_not_raised_when_values_announced(pgp):
    t = pgp()
    t.pgp_round("R1", dice_wagers={"SEAT_2": "MATCH"}, announce_values=True)
    t.assert_clean()


# -- provisional § 645a.9 rules ----------------------------------------------------------------


def test_PGP_645a_9_shake_3x_PROV_raised_for_two_shakes(pgp):
    t = pgp()
    log = t.pgp_round("R1", shakes=2)
    f = t.assert_raised("PGP-645a.9-shake-3x-PROV", round_id="R1", evidence=log.ids("shaken"))
    assert f.provisional is True


def test_PGP_645a_9_shake_3x_PROV_not_raised_for_three_shakes(pgp):
    t = pgp()
    t.pgp_round("R1", shakes=3)
    t.assert_clean()


def test_PGP_645a_9_start_position_PROV_raised_for_first_stack_to_wrong_position(pgp):
    t = pgp()
    log = t.pgp_round("R1", dice=(2, 3, 4), start="SEAT_5")
    t.assert_raised(
        "PGP-645a.9-start-position-PROV", round_id="R1", evidence=(log.id("revealed"), log.stacks[0].event_id)
    )
    t.assert_not_raised("PGP-645a.14-c-wrong-total")


def test_PGP_645a_9_start_position_PROV_raised_for_first_stack_not_at_rng_count(pgp):
    t = pgp(shaker_mode="RNG")
    log = t.pgp_round("R1", rng=9, dice=None, start="DEALER")
    t.assert_raised("PGP-645a.9-start-position-PROV", round_id="R1", evidence=(log.id("rng"), log.stacks[0].event_id))


def test_PGP_645a_9_start_position_PROV_not_raised_for_first_stack_at_counted_position(pgp):
    t = pgp()
    t.pgp_round("R1", dice=(2, 3, 4), start="SEAT_6")
    t.assert_clean()


def test_PGP_645a_9_rng_PROV_raised_for_rng_number_without_election(pgp):
    t = pgp(shaker_mode="MANUAL")
    log = t.pgp_round("R1", rng=9, dice=None)
    t.assert_raised("PGP-645a.9-rng-PROV", round_id="R1", evidence=log.ids("rng"))


def test_PGP_645a_9_rng_PROV_raised_for_player_activated_shaker_without_election(pgp):
    t = pgp(shaker_mode="MANUAL")
    log = t.pgp_round("R1", shake_mode="PLAYER_ACTIVATED", shakes=1)
    t.assert_raised("PGP-645a.9-rng-PROV", round_id="R1", evidence=log.ids("shaken"))
    t.assert_not_raised("PGP-645a.9-shake-3x-PROV")


@pytest.mark.parametrize(
    ("mode", "kwargs"),
    [("RNG", {"rng": 9, "dice": None}), ("PLAYER_ACTIVATED", {"shake_mode": "PLAYER_ACTIVATED", "shakes": 1})],
    ids=["rng", "player-activated"],
)
def test_PGP_645a_9_rng_PROV_not_raised_where_rules_submission_elects_it(pgp, mode, kwargs):
    t = pgp(shaker_mode=mode)
    t.pgp_round("R1", **kwargs)
    t.assert_clean()


def test_PGP_645a_9_stacks_PROV_raised_for_leftover_cards_discarded_exposed(pgp):
    t = pgp()
    log = t.pgp_round("R1", discard_exposed=True)
    t.assert_raised("PGP-645a.9-stacks-PROV", round_id="R1", evidence=log.ids("discard"))


def test_PGP_645a_9_stacks_PROV_raised_for_six_stacks_delivered(pgp):
    t = pgp()
    log = t.pgp_round("R1", deliver=[(p, 7) for p in rotate("SEAT_6")[:6]])
    t.assert_raised(
        "PGP-645a.9-stacks-PROV",
        round_id="R1",
        evidence=(*(s.event_id for s in log.stacks), log.id("completed")),
    )


def test_PGP_645a_9_stacks_PROV_not_raised_for_seven_stacks_and_unexposed_leftovers(pgp):
    t = pgp()
    log = t.pgp_round("R1", discard_exposed=False)
    assert len(log.stacks) == 7
    t.assert_clean()


def test_PGP_645a_9_unwagered_stacks_PROV_raised_when_unwagered_position_gets_no_stack(pgp):
    # SEAT_2 has no wager and the dealer skips it
    t = pgp()
    log = t.pgp_round("R1", deliver=[(p, 7) for p in rotate("SEAT_6") if p != "SEAT_2"])
    t.assert_raised("PGP-645a.9-unwagered-stacks-PROV", round_id="R1", evidence=log.ids("started", "completed"))


def test_PGP_645a_9_unwagered_stacks_PROV_not_raised_when_every_position_gets_a_stack(pgp):
    t = pgp()
    log = t.pgp_round("R1", bettors=("SEAT_1",))
    assert {s.to_position for s in log.stacks} == set(ORDER)
    t.assert_clean()
