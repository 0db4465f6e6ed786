"""Rulebook revision 4 (section 10.4): the trails of each decision with the findings the rulebook
text gives them, written before the engine learnt them.

Test names carry the rule ID and the decision (cleared = 10.4.1's "a fault is cleared by its own
remedy", unusable = 10.4.1's two cases of an unusable device, window = 10.4.2). 10.4.3 (arrival
order and other tables) is in tests/integration/test_revision4_order.py, over the audit.
"""

from __future__ import annotations

from datetime import timedelta

from schemas import events as ev
from schemas.findings import FindingStatus
from streams.engine import RULEBOOK_REVISION, Plausibility, fold
from streams.engine.catalog import RULES_BY_ID
from tests.unit.rules.test_rules_revision3 import deal, on, shuffle_deck, two_decks

FAULT = "DT-deal-after-device-fault"
TCP_A1 = "TCP-679a.9-a1-shuffler-required"
C691_A1 = "C691-DH-a1-shuffler-required"
JAM_L = "PGP-645a.14-l-shuffler-fault"
SHOE_M = "PGP-645a.14-m-shoe-fault"
OUT_OF_ORDER = "PGP-645a.14-n-out-of-order"
WRONG_DECK = "TCP-679a.9-f-wrong-deck"
OVERDUE = "DT-remedy-overdue"
HOUR = 3600
DAY = 24 * HOUR


def jam(t, deck_id="DK-1", fault="JAM", during="SHUFFLE"):
    """The deck goes into the shuffler and the shuffler reports ``fault`` on it."""
    keep = t.writer.deck_id
    on(t, deck_id)
    t.emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=t.SHUFFLER)
    raised = t.emit(
        ev.ShufflerFaulted,
        round_id=None,
        device_id=t.SHUFFLER,
        fault=fault,
        during=during,
        role="DEVICE",
        actor_id=t.SHUFFLER,
    )
    on(t, keep)
    return raised


def out_of_service(t, device_id, covered=False, sign=False):
    return t.emit(
        ev.DeviceTakenOutOfService,
        round_id=None,
        device_id=device_id,
        covered=covered,
        out_of_order_sign=sign,
        role="FLOOR",
        actor_id="F-01",
    )


def returned(t, device_id):
    return t.emit(ev.DeviceReturnedToService, round_id=None, device_id=device_id, role="FLOOR", actor_id="F-01")


def rounds_of(t, rule_id):
    return [f.round_id for f in t.raised(rule_id)]


def shoe_fault(t):
    """The automated dealing shoe jams in the round in progress."""
    return t.emit(
        ev.AutoShoeFaulted, device_id=t.SHOE, fault="JAM", cards_dealt_so_far=20, role="DEVICE", actor_id=t.SHOE
    )


def shoe_remedy(t):
    """§ 645a.14(m)'s remedy in the faulted round: all hands void, wagers returned, the cards taken
    out of the shoe (the reshuffle follows with the next round's shuffle)."""
    t.void_all(SHOE_M)
    t.return_wagers()
    t.emit(ev.CardsRemovedFromDevice, device_id=t.SHOE, count=29, role="DEALER", actor_id="D-0001")


# -- 10.4.1 a fault is cleared by its own remedy ---------------------------------------------------


def test_DT_deal_after_device_fault_cleared_a_jam_reshuffled_in_the_same_shuffler_leaves_the_later_rounds_clean(tcp):
    t = tcp()
    t.tcp_round("R1")
    jam(t)
    shuffle_deck(t, "DK-1")  # the dealer clears the jam and reshuffles in the same shuffler
    for n in range(2, 8):
        t.tcp_round(f"R{n}")
    t.assert_clean()


def test_DT_deal_after_device_fault_cleared_each_deck_of_two_rotating_decks_is_cleared_by_its_own_completion(tcp):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    j1 = jam(t, "DK-1", fault="STOPPED")
    deal(t, "R2", "DK-2")  # the other deck, shuffled before the jam: no breach
    shuffle_deck(t, "DK-1")  # the stopped deck reshuffled to a clearing completion
    deal(t, "R3", "DK-1")
    jam(t, "DK-2", fault="INCOMPLETE_CYCLE")
    shuffle_deck(t, "DK-2")
    deal(t, "R4", "DK-2")
    shuffle_deck(t, "DK-1")
    for n in range(5, 11):
        deal(
            t,
            f"R{n}",
            "DK-1" if n % 2 else "DK-2",
            hooks={"after_deal": lambda t, n=n: shuffle_deck(t, f"DK-{1 + n % 2}")},
        )
    t.assert_clean()
    assert j1 is not None


def test_DT_deal_after_device_fault_cleared_only_rounds_dealt_before_the_clearing_completion_are_charged(tcp):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    stopped = jam(t, "DK-1", fault="STOPPED")
    deal(t, "R2", "DK-2")
    r3 = deal(t, "R3", "DK-1")  # the stopped deck dealt unshuffled
    shuffle_deck(t, "DK-1")
    shuffle_deck(t, "DK-2")
    deal(t, "R4", "DK-1")
    deal(t, "R5", "DK-2")
    t.assert_raised(FAULT, round_id="R3", evidence=(stopped.event_id, r3.cards[0].event_id))
    assert rounds_of(t, TCP_A1) == ["R3"]


def test_DT_deal_after_device_fault_cleared_a_chapter_691_jam_cleared_by_its_reshuffle_raises_nothing_after(c691):
    t = c691()
    t.c691_round("R1")
    jam(t)
    shuffle_deck(t, "DK-1")
    for n in range(2, 25):
        t.c691_round(f"R{n}")
    t.assert_clean()


def test_PGP_645a14_l_cleared_a_jam_gives_the_fault_finding_and_nothing_on_the_rounds_after_its_reshuffle(pgp):
    t = pgp()
    t.pgp_round("R1")
    j = jam(t)
    for n in range(2, 8):  # each round shuffles in the same shuffler first: the first clears the jam
        t.pgp_round(f"R{n}")
    t.assert_raised(JAM_L, round_id=None, evidence=(j.event_id,))
    assert t.rule_ids() == {JAM_L}
    [f] = t.raised(JAM_L)
    assert [h.status for h in t.history(f.finding_id)] == [FindingStatus.OPEN, FindingStatus.REMEDIED]


def test_PGP_645a14_m_cleared_a_shoe_fault_remedied_per_m_leaves_the_shoe_in_use(pgp):
    t = pgp()
    t.pgp_round("R1", method="AUTO_SHOE")
    t.pgp_round(
        "R2", method="AUTO_SHOE", settle=False, hooks={"after_delivery": lambda t: (shoe_fault(t), shoe_remedy(t))}
    )
    for n in range(3, 8):  # each round reshuffled, dealt from the same shoe
        t.pgp_round(f"R{n}", method="AUTO_SHOE")
    assert rounds_of(t, SHOE_M) == ["R2"]
    assert t.rule_ids() == {SHOE_M}


def test_PGP_645a14_n_cleared_hand_dealing_after_a_remedied_shoe_fault_is_not_another_method_on_a_fault(pgp):
    # the shoe's fault was remedied per (m); a later round dealt by hand uses another method while
    # the shoe is in service and not faulted: a matter for other rules, never (n)
    t = pgp()
    t.pgp_round(
        "R1", method="AUTO_SHOE", settle=False, hooks={"after_delivery": lambda t: (shoe_fault(t), shoe_remedy(t))}
    )
    t.pgp_round("R2", method="HAND")
    t.assert_not_raised(OUT_OF_ORDER)


# -- 10.4.1 the two cases of an unusable device --------------------------------------------------


def test_PGP_645a14_n_unusable_shuffled_by_hand_on_an_uncleared_jam_neither_covered_nor_signed_is_one_per_round(pgp):
    t = pgp()
    t.pgp_round("R1")
    j = jam(t)
    rounds = [t.pgp_round(f"R{n}", shuffle="MANUAL") for n in range(2, 5)]
    assert rounds_of(t, OUT_OF_ORDER) == ["R2", "R3", "R4"]
    assert [f.evidence_event_ids for f in t.raised(OUT_OF_ORDER)] == [
        (j.event_id, r.id("shuffled"), r.id("started")) for r in rounds
    ]
    t.assert_not_raised(FAULT)  # the cards were reshuffled, by another method: (n)'s matter, not 8a's


def test_PGP_645a14_n_unusable_another_method_with_the_shuffler_covered_or_signed_raises_no_n(pgp):
    for covered, sign in ((True, False), (False, True)):
        t = pgp()
        t.pgp_round("R1")
        jam(t)
        out_of_service(t, t.SHUFFLER, covered=covered, sign=sign)
        for n in range(2, 5):
            t.pgp_round(f"R{n}", shuffle="MANUAL")
        t.assert_not_raised(OUT_OF_ORDER)


def test_PGP_645a14_n_unusable_the_device_stays_unusable_until_it_completes_a_clearing_shuffle_again(pgp):
    t = pgp()
    t.pgp_round("R1")
    jam(t)
    t.pgp_round("R2", shuffle="MANUAL")  # another method on the uncleared jam: the shuffler is unusable
    t.pgp_round("R3", shuffle="MANUAL")
    t.pgp_round("R4")  # the shuffler completes a clearing shuffle: usable again
    t.pgp_round("R5", shuffle="MANUAL")  # a hand shuffle with a working shuffler: never (n)
    assert rounds_of(t, OUT_OF_ORDER) == ["R2", "R3"]


def test_PGP_645a14_n_unusable_taken_out_of_service_uncovered_each_round_by_hand_until_its_return(pgp):
    t = pgp()
    t.pgp_round("R1", method="AUTO_SHOE")
    off = out_of_service(t, t.SHOE)
    r2 = t.pgp_round("R2", method="HAND")
    r3 = t.pgp_round("R3", method="HAND")
    returned(t, t.SHOE)
    t.pgp_round("R4", method="AUTO_SHOE")
    t.pgp_round("R5", method="HAND")  # in service and not faulted: not (n)
    assert rounds_of(t, OUT_OF_ORDER) == ["R2", "R3"]
    assert [f.evidence_event_ids for f in t.raised(OUT_OF_ORDER)] == [(off.event_id, r.id("started")) for r in (r2, r3)]


def test_PGP_645a14_n_unusable_a_shoe_fault_not_remedied_then_dealt_by_hand_is_another_method_on_a_fault(pgp):
    t = pgp()
    faulted = {}
    t.pgp_round("R1", method="AUTO_SHOE", hooks={"after_complete": lambda t: faulted.setdefault("e", shoe_fault(t))})
    r2 = t.pgp_round("R2", method="HAND")  # cards never taken out of the shoe: the fault is not cleared
    t.pgp_round("R3", method="HAND")
    returned(t, t.SHOE)
    t.pgp_round("R4", method="HAND")
    assert rounds_of(t, OUT_OF_ORDER) == ["R2", "R3"]
    assert t.raised(OUT_OF_ORDER)[0].evidence_event_ids == (faulted["e"].event_id, r2.id("started"))


def test_PGP_645a14_n_unusable_a_registered_working_shuffler_makes_a_hand_shuffle_no_n(pgp):
    t = pgp()
    t.pgp_round("R1")
    t.pgp_round("R2", shuffle="MANUAL")
    t.assert_not_raised(OUT_OF_ORDER)


# -- 10.4.2 a window that closes raises the consequence -------------------------------------------


def limits() -> Plausibility:
    """The limits the settings resolve by default: a remedy awaited for 24 hours of event time."""
    return Plausibility(max_seq_jump=100_000, max_clock_skew=timedelta(hours=1), remedy_window=timedelta(hours=24))


def owed_then(t, gap_seconds):
    """R1 dealt from a deck the stub count finds short (void, wagers returned and deck removed owed,
    none done); then, ``gap_seconds`` later, the table's next event: R2's start."""
    on(t, "DK-1")
    t.tcp_round("R1", stub=40, settle=False, complete=False)
    t.complete()
    return t.emit(
        ev.RoundStarted, round_id="R2", round_no=2, dealing_method="HAND", dealer_id="D-0001", after=gap_seconds
    )


def judged(t):
    _, found = fold(t.events, limits=limits())
    return found


def test_DT_remedy_overdue_window_a_table_idle_for_two_days_raises_it_at_its_next_event(tcp):
    t = tcp()
    nxt = owed_then(t, 2 * DAY)
    found = judged(t)
    [owed] = [f for f in found if f.rule_id == WRONG_DECK and f.revision == 0]
    [overdue] = [f for f in found if f.rule_id == OVERDUE]
    assert overdue.round_id == "R1"
    assert overdue.evidence_event_ids == (*owed.evidence_event_ids, nxt.event_id)
    assert overdue.trigger_event_id == nxt.event_id
    assert [f.status for f in found if f.finding_id == owed.finding_id][-1] == FindingStatus.OVERDUE


def test_DT_remedy_overdue_window_the_same_lateness_gives_the_same_findings_with_or_without_a_next_round(tcp):
    near, far = tcp(), tcp()
    owed_then(near, HOUR)
    owed_then(far, 2 * DAY)

    def shape(found):
        return sorted((f.rule_id, f.round_id, f.revision, f.status) for f in found)

    assert shape(judged(near)) == shape(judged(far))


def test_DT_remedy_overdue_window_any_event_past_the_window_raises_it_once(tcp):
    t = tcp()
    on(t, "DK-1")
    t.tcp_round("R1", stub=40, settle=False, complete=False)
    t.complete()
    first = t.emit(ev.DeckIntroduced, deck_id="DK-9", declared_count=52, jokers=0, after=DAY + 60)
    t.emit(ev.DeckIntroduced, deck_id="DK-8", declared_count=52, jokers=0, after=60)
    t.emit(ev.RoundStarted, round_id="R2", round_no=2, dealing_method="HAND", dealer_id="D-0001")
    found = judged(t)
    [overdue] = [f for f in found if f.rule_id == OVERDUE]
    assert overdue.trigger_event_id == first.event_id and overdue.round_id == "R1"


def test_DT_remedy_overdue_window_an_event_before_the_window_ends_raises_nothing_yet(tcp):
    t = tcp()
    on(t, "DK-1")
    t.tcp_round("R1", stub=40, settle=False, complete=False)
    t.complete()
    t.emit(ev.DeckIntroduced, deck_id="DK-9", declared_count=52, jokers=0, after=DAY - 60)
    state, found = fold(t.events, limits=limits())
    assert [f for f in found if f.rule_id == OVERDUE] == []
    assert state is not None and len(state.obligations) == 1


# -- the revision -------------------------------------------------------------------------------


def test_findings_judged_under_revision_4_or_later_carry_it_and_the_changed_rules_say_so(tcp):
    t = tcp()
    t.tcp_round("R1", stub=40, settle=False, complete=False)
    t.complete()
    t.start_round("R2")
    assert {f.rulebook_revision for f in t.findings()} == {RULEBOOK_REVISION}
    assert RULEBOOK_REVISION >= 4
    for rule_id in (JAM_L, SHOE_M, OVERDUE):
        assert RULES_BY_ID[rule_id].revised_in == 4, rule_id
    for rule_id in (FAULT, OUT_OF_ORDER):  # revised again by revision 5 (10.5.1, 10.5.2)
        assert RULES_BY_ID[rule_id].revised_in == 5, rule_id


def test_PGP_645a14_n_unusable_an_automated_shuffle_naming_no_device_is_not_taken_for_another_method(pgp):
    # a version 1 completion may name no device: nothing shows the table passed the shuffler over
    t = pgp()
    t.pgp_round("R1")
    jam(t)
    t.emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED")
    t.emit(ev.ShuffleCompleted, round_id=None, method="AUTOMATED", device_card_count=53, device_full_deck_ok=True)
    t.pgp_round("R2", shuffle=None)
    t.assert_not_raised(OUT_OF_ORDER)
