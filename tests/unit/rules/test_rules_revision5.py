"""Rulebook revision 5 (section 10.5): the trails of each decision with the findings the rulebook
text gives them, written before the engine learnt them.

Test names carry the rule ID and the decision (reshuffle = 10.5.1's "what clears a deck's fault",
idle = 10.5.2's fault of an empty device, in_time = 10.5.3's remedy before settlement, exempt =
10.5.4's counting-shuffler exemption). 10.5.5 (the plausibility bounds) is in
tests/unit/test_bounds_revision5.py; 10.4.3 (arrival order and other tables) for these trails is in
tests/integration/test_revision5_order.py, over the audit.
"""

from __future__ import annotations

from schemas import events as ev
from streams.engine import RULEBOOK_REVISION
from streams.engine.catalog import RULES_BY_ID
from tests.unit.rules.test_rules_revision3 import deal, fault, on, shuffle_deck, two_decks
from tests.unit.rules.test_rules_revision4 import jam, out_of_service, returned, rounds_of

FAULT = "DT-deal-after-device-fault"
TCP_A1 = "TCP-679a.9-a1-shuffler-required"
JAM_L = "PGP-645a.14-l-shuffler-fault"
OUT_OF_ORDER = "PGP-645a.14-n-out-of-order"
HOUSE_WAY = "PGP-645a.14-i-house-way"
STUB_DUE = "TCP-679a.9-d-stub-count-due"
SPARE = "SHF-2"


def register_spare(t, counting=True):
    """A second registered shuffler at the table (the spare the floor brings)."""
    return t.emit(
        ev.DeviceRegistered,
        round_id=None,
        device_id=SPARE,
        device_type="SHUFFLER",
        counts_each_shuffle=counting,
        indicates_full_deck=counting,
        role="FLOOR",
        actor_id="F-01",
    )


def shuffle_in(t, deck_id, device_id, **report):
    """A full shuffle of ``deck_id`` in ``device_id`` (None: by hand), with the counting device's report."""
    keep = t.writer.deck_id
    on(t, deck_id)
    method = "AUTOMATED" if device_id is not None else "MANUAL"
    if device_id is not None:
        report = {"device_card_count": t.deck_size, "device_full_deck_ok": True, **report}
    started = t.emit(ev.ShuffleStarted, round_id=None, method=method, device_id=device_id)
    done = t.emit(ev.ShuffleCompleted, round_id=None, method=method, device_id=device_id, **report)
    on(t, keep)
    return started, done


def idle_fault(t, fault_kind="STOPPED"):
    """The shuffler signals a fault while it stands empty: no deck named, ``during`` IDLE."""
    return fault(t, None, fault=fault_kind, during="IDLE")


# -- 10.5.2 a fault of an empty device concerns no deck outside it --------------------------------


def test_DT_deal_after_device_fault_idle_the_deck_in_play_shuffled_before_an_empty_shufflers_fault_is_dealt_clean(
    tcp,
):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    idle_fault(t)  # the shuffler blinks between shuffles, nothing in it
    deal(t, "R2", "DK-2")  # shuffled and counted before the fault, never in the device since
    shuffle_deck(t, "DK-1")  # the next deck in the device: a clearing completion started after the fault
    deal(t, "R3", "DK-1")
    shuffle_deck(t, "DK-2")
    deal(t, "R4", "DK-2")
    t.assert_clean()


def test_DT_deal_after_device_fault_idle_the_next_deck_shuffled_in_it_without_a_clearing_completion_is_charged(tcp):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    stopped = idle_fault(t)
    deal(t, "R2", "DK-2")
    # the counting shuffler reports no count for DK-1's shuffle: a completion that clears nothing (10.1.2)
    shuffle_deck(t, "DK-1", device_card_count=None, device_full_deck_ok=None)
    r3 = deal(t, "R3", "DK-1")
    shuffle_deck(t, "DK-1")  # a clearing completion in the device: the fault is behind both decks
    shuffle_deck(t, "DK-2")
    deal(t, "R4", "DK-1")
    deal(t, "R5", "DK-2")
    assert rounds_of(t, FAULT) == ["R3"]
    t.assert_raised(FAULT, round_id="R3", evidence=(stopped.event_id, r3.cards[0].event_id))


def test_DT_deal_after_device_fault_idle_a_deck_put_in_the_shuffler_after_the_fault_and_dealt_unfinished_is_charged(
    tcp,
):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    stopped = idle_fault(t, "INCOMPLETE_CYCLE")
    t.emit(ev.ShuffleStarted, round_id=None, deck_id="DK-2", method="AUTOMATED", device_id=t.SHUFFLER)
    r2 = deal(t, "R2", "DK-2")  # in the device since the fault, no completion: dealt on the fault
    t.assert_raised(FAULT, round_id="R2", evidence=(stopped.event_id, r2.cards[0].event_id))


def test_DT_deal_after_device_fault_idle_the_first_clearing_completion_in_the_device_ends_the_devices_fault(tcp):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    idle_fault(t)
    shuffle_deck(t, "DK-1")  # clears the device
    deal(t, "R2", "DK-2")
    deal(t, "R3", "DK-1")
    shuffle_deck(t, "DK-2", device_card_count=None, device_full_deck_ok=None)  # after the clearing one
    deal(t, "R4", "DK-2")
    t.assert_not_raised(FAULT)


def test_DT_deal_after_device_fault_idle_a_version_1_fault_with_no_deck_and_no_during_still_concerns_every_deck(tcp):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    shuffle_deck(t, "DK-1")
    stopped = fault(t, None, fault="STOPPED", during=None)  # not recorded: every deck (10.3.1)
    r2 = deal(t, "R2", "DK-2")
    shuffle_deck(t, "DK-2")
    deal(t, "R3", "DK-1")  # shuffled before the fault as well
    assert rounds_of(t, FAULT) == ["R2", "R3"]
    assert t.raised(FAULT)[0].evidence_event_ids == (stopped.event_id, r2.cards[0].event_id)


def test_PGP_645a14_l_idle_a_fault_of_the_empty_shuffler_interrupts_no_shuffle_and_the_deck_in_play_deals_clean(pgp):
    t = pgp()
    t.pgp_round("R1")
    idle_fault(t, "JAM")
    t.pgp_round("R2")  # the round's own shuffle in the device is a clearing completion after the fault
    t.assert_clean()


# -- 10.5.1 what clears a deck's fault -------------------------------------------------------------


def test_DT_deal_after_device_fault_reshuffle_a_deck_cleared_in_a_usable_spare_shuffler_is_not_dealt_on_a_fault(tcp):
    t = tcp()
    register_spare(t)
    t.tcp_round("R1")
    jam(t)
    shuffle_in(t, "DK-1", SPARE)  # the floor brings the spare; the jammed deck is reshuffled in it
    t.tcp_round("R2", shuffle=None)
    t.assert_not_raised(FAULT)
    t.assert_not_raised(TCP_A1)  # an automated shuffle fed the round


def test_DT_deal_after_device_fault_reshuffle_a_deck_cleared_by_hand_is_a1s_matter_not_a_deal_on_a_fault(tcp):
    t = tcp()
    t.tcp_round("R1")
    jam(t)
    out_of_service(t, t.SHUFFLER, covered=True)
    r2 = t.tcp_round("R2", shuffle="MANUAL")
    t.assert_not_raised(FAULT)
    assert rounds_of(t, TCP_A1) == ["R2"]  # (a)(1): the round was not fed by an automated shuffle
    assert r2 is not None


def test_PGP_645a14_n_reshuffle_a_hand_shuffle_under_a_covered_shuffler_clears_the_deck_and_raises_no_n(pgp):
    t = pgp()
    t.pgp_round("R1")
    jammed = jam(t)
    out_of_service(t, t.SHUFFLER, covered=True)
    t.pgp_round("R2", shuffle="MANUAL")
    t.pgp_round("R3", shuffle="MANUAL")
    t.assert_not_raised(FAULT)
    t.assert_not_raised(OUT_OF_ORDER)
    [f] = t.raised(JAM_L)
    assert f.evidence_event_ids == (jammed.event_id,)


def test_PGP_645a14_n_reshuffle_a_spare_used_while_the_faulted_shuffler_stands_uncovered_is_another_method(pgp):
    t = pgp()
    register_spare(t)
    t.pgp_round("R1")
    jammed = jam(t)
    _, spare_done = shuffle_in(t, "DK-1", SPARE)
    r2 = t.pgp_round("R2", shuffle=None)
    t.assert_not_raised(FAULT)  # the cards were reshuffled: never a deal on a fault
    t.assert_raised(OUT_OF_ORDER, round_id="R2", evidence=(jammed.event_id, spare_done.event_id, r2.id("started")))


def test_PGP_645a14_n_reshuffle_the_faulted_device_stays_unusable_until_its_own_clearing_completion(pgp):
    t = pgp()
    register_spare(t)
    t.pgp_round("R1")
    jam(t)
    shuffle_in(t, "DK-1", SPARE)
    t.pgp_round("R2", shuffle=None)  # (n): the faulted shuffler passed over, uncovered
    t.pgp_round("R3", shuffle="MANUAL")  # still unusable: another method again
    t.pgp_round("R4")  # its own clearing completion: usable again
    t.pgp_round("R5", shuffle="MANUAL")  # a hand shuffle beside a working shuffler: never (n)
    assert rounds_of(t, OUT_OF_ORDER) == ["R2", "R3"]
    t.assert_not_raised(FAULT)


def test_PGP_645a14_n_reshuffle_the_covered_faulted_device_used_before_its_return_still_deals_on_a_fault(pgp):
    t = pgp()
    register_spare(t)
    t.pgp_round("R1")
    jammed = jam(t)
    off = out_of_service(t, t.SHUFFLER, covered=True)
    shuffle_in(t, "DK-1", SPARE)
    t.pgp_round("R2", shuffle=None)  # the spare, the faulted one covered: clean
    assert rounds_of(t, FAULT) == [] and rounds_of(t, OUT_OF_ORDER) == []
    r3 = t.pgp_round("R3")  # the covered shuffler used with no return to service (10.3.2)
    t.assert_raised(FAULT, round_id="R3", evidence=(off.event_id, r3.cards[0].event_id))
    returned(t, t.SHUFFLER)
    t.pgp_round("R4")
    assert rounds_of(t, FAULT) == ["R3"]
    assert jammed is not None


def test_DT_deal_after_device_fault_reshuffle_a_spare_taken_out_of_service_clears_nothing(tcp):
    t = tcp()
    register_spare(t)
    t.tcp_round("R1")
    jammed = jam(t)
    out_of_service(t, SPARE, covered=True)
    shuffle_in(t, "DK-1", SPARE)  # not a usable shuffler
    r2 = t.tcp_round("R2", shuffle=None)
    assert rounds_of(t, FAULT) == ["R2"]
    assert t.raised(FAULT)[0].evidence_event_ids[-1] == r2.cards[0].event_id
    assert jammed is not None


# -- 10.5.3 a remedy in time is no breach -----------------------------------------------------------


def reset_dealer(t):
    return t.emit(ev.HandReset, owner="DEALER")


def test_PGP_645a14_i_in_time_a_house_way_setting_reset_before_settlement_raises_nothing(pgp):
    t = pgp()
    t.pgp_round("R1", house_way=False, hooks={"before_settle": reset_dealer})
    t.assert_clean()


def test_PGP_645a14_i_in_time_a_hand_settled_as_set_is_one_finding_for_its_round(pgp):
    t = pgp()
    r1 = t.pgp_round("R1", house_way=False)
    [f] = t.raised(HOUSE_WAY)
    assert f.round_id == "R1"
    assert f.evidence_event_ids[0] == r1.id("dealer_set")
    assert len(f.evidence_event_ids) == 2  # the setting and the first settlement made on it
    assert rounds_of(t, HOUSE_WAY) == ["R1"]
    assert RULES_BY_ID[HOUSE_WAY].remedies == ()  # nothing is owed after settlement: no overdue remedy
    t.pgp_round("R2")
    assert t.rule_ids() == {HOUSE_WAY}


def test_PGP_645a14_i_in_time_a_reset_after_settlement_does_not_undo_the_finding(pgp):
    t = pgp()
    t.pgp_round("R1", house_way=False, hooks={"before_complete": reset_dealer})
    assert rounds_of(t, HOUSE_WAY) == ["R1"]


def test_PGP_645a14_i_in_time_a_hand_set_wrong_again_after_its_reset_is_judged_again(pgp):
    t = pgp()

    def reset_then_wrong(t):
        reset_dealer(t)
        return t.emit(ev.HandSet, owner="DEALER", matches_house_way=False)

    t.pgp_round("R1", house_way=False, hooks={"before_settle": reset_then_wrong})
    assert rounds_of(t, HOUSE_WAY) == ["R1"]


def test_PGP_645a14_i_in_time_a_voided_round_settles_nothing_and_raises_nothing(pgp):
    t = pgp()

    def void(t):
        t.void_all()
        t.return_wagers()

    t.pgp_round("R1", house_way=False, settle=False, hooks={"before_complete": void})
    t.assert_not_raised(HOUSE_WAY)


# -- 10.5.4 a counting shuffler exempts only the rounds a counted shuffle fed ---------------------


def test_TCP_679a9_d_exempt_rounds_dealt_from_a_deck_with_no_shuffle_since_its_last_round_are_counted(tcp):
    t = tcp()
    t.tcp_round("R1", stub=None)  # fed by a counted shuffle: exempt
    logs = [t.tcp_round(f"R{n}", shuffle=None, stub=None) for n in range(2, 7)]  # dealt again unshuffled
    [due] = t.raised(STUB_DUE)
    assert due.round_id == "R6"
    assert due.evidence_event_ids == tuple(log.id("completed") for log in logs)
    assert rounds_of(t, TCP_A1) == ["R2", "R3", "R4", "R5", "R6"]  # and each is 10.1.1's a1


def test_TCP_679a9_d_exempt_a_stub_count_in_an_exempt_round_resets_the_window(tcp):
    t = tcp()

    def uncounted(n):  # a round fed by a shuffle the counting device did not count: not exempt
        hook = {"before_start": lambda t: t.shuffle("AUTOMATED", device_card_count=None, device_full_deck_ok=None)}
        t.tcp_round(f"R{n}", stub=None, shuffle=None, hooks=hook)

    for n in range(1, 5):
        uncounted(n)
    t.tcp_round("R5")  # exempt (a counted shuffle fed it), and the stub counted all the same
    for n in range(6, 10):  # four more uncounted: the window restarted at R5
        uncounted(n)
    t.assert_not_raised(STUB_DUE)
    uncounted(10)
    assert rounds_of(t, STUB_DUE) == ["R10"]


def test_C691_DH_d_exempt_a_round_from_a_deck_not_shuffled_since_its_last_round_is_not_exempt(c691):
    t = c691()
    t.c691_round("R1", stub=None)
    for n in range(2, 7):
        t.c691_round(f"R{n}", shuffle=None, stub=None)
    assert rounds_of(t, "C691-DH-d-stub-count-due") == ["R6"]


# -- the revision -------------------------------------------------------------------------------


def test_findings_judged_under_revision_5_carry_it_and_the_changed_rules_say_so(pgp):
    t = pgp()
    t.pgp_round("R1", house_way=False)
    assert {f.rulebook_revision for f in t.findings()} == {RULEBOOK_REVISION} == {5}
    for rule_id in (FAULT, HOUSE_WAY, STUB_DUE, "C691-DH-d-stub-count-due", OUT_OF_ORDER):
        assert RULES_BY_ID[rule_id].revised_in == 5, rule_id
        assert any(d.startswith("10.5.") for d in RULES_BY_ID[rule_id].decisions), rule_id
