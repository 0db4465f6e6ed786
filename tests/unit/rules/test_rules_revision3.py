"""Rulebook revision 3 (section 10.3): the trails of each decision with the findings the rulebook
text gives them, written before the engine learnt them.

Test names carry the rule ID and the decision (deck = 10.3.1, every_round = 10.3.2, one_suspicion =
10.3.3, window = 10.3.5; 10.3.4 is in tests/unit/test_plausible.py and tests/integration/test_poison.py).

The two-deck trails rotate DK-1 and DK-2 through one counting shuffler, as Three Card tables do: one
deck is shuffled while the other is dealt.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from schemas import events as ev
from schemas.findings import FindingStatus
from streams.engine import RULEBOOK_REVISION, Plausibility, fold
from streams.engine.catalog import RULES_BY_ID

FAULT = "DT-deal-after-device-fault"
TCP_A1 = "TCP-679a.9-a1-shuffler-required"
COMPOSITION = "DT-deck-composition"
OUT_OF_ORDER = "PGP-645a.14-n-out-of-order"
WRONG_DECK = "TCP-679a.9-f-wrong-deck"
OVERDUE = "DT-remedy-overdue"
DAY = 24 * 3600


def on(t, deck_id):
    """Stamp the next events with ``deck_id`` (the deck the dealer or the shuffler handles)."""
    t.writer.deck_id = deck_id
    return t


def fault(t, deck_id, fault="JAM", during="SHUFFLE", **fields):
    """A shuffler fault naming ``deck_id`` (None: a fault of the device, no deck named)."""
    return t.emit(
        ev.ShufflerFaulted,
        round_id=None,
        deck_id=deck_id,
        device_id=t.SHUFFLER,
        fault=fault,
        during=during,
        role="DEVICE",
        actor_id=t.SHUFFLER,
        **fields,
    )


def shuffle_deck(t, deck_id, **completed):
    """A full counting-shuffler shuffle of ``deck_id`` (between rounds or while the other deck is in play)."""
    keep = t.writer.deck_id
    on(t, deck_id)
    started, done = t.shuffle("AUTOMATED", **completed)
    on(t, keep)
    return started, done


def two_decks(make):
    """A table with DK-1 and DK-2 both shuffled by the counting shuffler, DK-1 to be dealt first."""
    t = make()
    on(t, "DK-2")
    t.emit(ev.DeckIntroduced, declared_count=t.deck_size, jokers=0, role="FLOOR", actor_id="F-01")
    shuffle_deck(t, "DK-1")
    shuffle_deck(t, "DK-2")
    on(t, "DK-1")
    return t


def deal(t, round_id, deck_id, **kwargs):
    """A Three Card round dealt from ``deck_id``, with no shuffle of its own (the rotation shuffled it)."""
    on(t, deck_id)
    return t.tcp_round(round_id, shuffle=None, **kwargs)


def rounds_of(t, rule_id):
    return [f.round_id for f in t.raised(rule_id)]


# -- 10.3.1 a fault belongs to its deck -----------------------------------------------------------


@pytest.mark.parametrize("when", ["after_held", "after_deal"])
def test_DT_deal_after_device_fault_deck_jam_on_the_idle_deck_while_the_other_is_in_play_is_charged_to_that_deck(
    tcp, when
):
    # R1 from DK-1; DK-1 then goes into the shuffler while R2 is dealt from DK-2 and jams there,
    # logged before R2's first card (after_held) or after its last (after_deal)
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")

    def jam_dk1(t):
        t.emit(ev.ShuffleStarted, round_id=None, deck_id="DK-1", method="AUTOMATED", device_id=t.SHUFFLER)
        return fault(t, "DK-1")

    r2 = deal(t, "R2", "DK-2", hooks={when: jam_dk1})
    r3 = deal(t, "R3", "DK-1")  # the jammed deck dealt next, unshuffled
    jam = r2[when]
    t.assert_raised(FAULT, round_id="R3", evidence=(jam.event_id, r3.cards[0].event_id))
    assert rounds_of(t, TCP_A1) == ["R3"]  # and no automated shuffle of DK-1 fed R3 (10.1.1)


def test_DT_deal_after_device_fault_deck_jam_on_the_idle_deck_before_the_deal_is_charged_to_that_deck(tcp):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    t.emit(ev.ShuffleStarted, round_id=None, deck_id="DK-1", method="AUTOMATED", device_id=t.SHUFFLER)
    jam = fault(t, "DK-1")
    deal(t, "R2", "DK-2")  # shuffled fully before the jam: no breach
    r3 = deal(t, "R3", "DK-1")
    t.assert_raised(FAULT, round_id="R3", evidence=(jam.event_id, r3.cards[0].event_id))


def test_DT_deal_after_device_fault_deck_the_jammed_deck_reshuffled_after_the_jam_is_dealt_clean(tcp):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    t.emit(ev.ShuffleStarted, round_id=None, deck_id="DK-1", method="AUTOMATED", device_id=t.SHUFFLER)
    fault(t, "DK-1", fault="COUNT_ERROR")
    deal(t, "R2", "DK-2", hooks={"after_deal": lambda t: shuffle_deck(t, "DK-1")})
    deal(t, "R3", "DK-1")
    t.assert_clean()


def test_DT_deal_after_device_fault_deck_fault_on_the_deck_in_play_before_its_deal_is_charged_to_its_round(tcp):
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    shuffle_deck(t, "DK-1")
    flagged = fault(t, "DK-2", fault="COUNT_ERROR", during="IDLE")  # after DK-2's completion, before its deal
    r2 = deal(t, "R2", "DK-2")
    deal(t, "R3", "DK-1")  # the other deck, shuffled before the fault and not dealt since
    t.assert_raised(FAULT, round_id="R2", evidence=(flagged.event_id, r2.cards[0].event_id))


def test_DT_deal_after_device_fault_deck_fault_on_the_deck_in_play_during_its_deal_is_charged_to_its_round(tcp):
    t = two_decks(tcp)
    r1 = deal(t, "R1", "DK-1", hooks={"after_deal": lambda t: fault(t, "DK-1", fault="WRONG_MODE", during="DEAL")})
    # the fault came after R1's cards: the next round dealt from DK-1 before a clearing shuffle is the breach
    shuffle_deck(t, "DK-1", mode="SORT")  # a completion in SORT mode clears nothing (10.1.2)
    deal(t, "R2", "DK-2")
    r3 = deal(t, "R3", "DK-1")
    assert rounds_of(t, FAULT) == ["R3"]
    [f] = t.raised(FAULT)
    assert f.evidence_event_ids == (r1["after_deal"].event_id, r3.cards[0].event_id)


def test_DT_deal_after_device_fault_deck_a_fault_naming_no_deck_is_a_fault_of_every_deck(tcp):
    # revision 5 (10.5.2) reads a fault recorded during IDLE with no deck as the empty device's:
    # this holds for a fault that says neither (tests/unit/rules/test_rules_revision5.py)
    t = two_decks(tcp)
    deal(t, "R1", "DK-1")
    shuffle_deck(t, "DK-1")  # both decks shuffled, then the device faults naming no deck
    device = fault(t, None, fault="STOPPED", during=None)
    t.emit(ev.DeviceReturnedToService, device_id=t.SHUFFLER, role="FLOOR", actor_id="F-01")
    r2 = deal(t, "R2", "DK-2")  # shuffled before the fault: must pass a clearing completion first
    shuffle_deck(t, "DK-1")  # DK-1 passes one started after the fault
    deal(t, "R3", "DK-1")
    shuffle_deck(t, "DK-2")
    deal(t, "R4", "DK-2")
    t.assert_raised(FAULT, round_id="R2", evidence=(device.event_id, r2.cards[0].event_id))


def test_DT_deal_after_device_fault_deck_one_finding_per_round_dealt_on_an_unresolved_fault(tcp):
    t = tcp()
    flagged = fault(t, "DK-1", fault="COUNT_ERROR", during="IDLE")
    logs = []
    for rid in ("R1", "R2", "R3"):
        # the counting device reports no count: a completion that clears nothing (10.1.2)
        shuffle_deck(t, "DK-1", device_card_count=None, device_full_deck_ok=None)
        logs.append(deal(t, rid, "DK-1"))
    assert rounds_of(t, FAULT) == ["R1", "R2", "R3"]
    assert [f.evidence_event_ids for f in t.raised(FAULT)] == [
        (flagged.event_id, log.cards[0].event_id) for log in logs
    ]
    assert len({f.finding_id for f in t.raised(FAULT)}) == 3


def test_PGP_645a14_l_shuffler_fault_deck_a_jam_of_the_deck_in_the_shuffler_raises_once(pgp):
    t = pgp()
    t.emit(ev.ShuffleStarted, round_id=None, method="AUTOMATED", device_id=t.SHUFFLER)
    jam = fault(t, "DK-1")
    t.assert_raised("PGP-645a.14-l-shuffler-fault", round_id=None, evidence=(jam.event_id,))


# -- 10.3.2 (n) counts every round ----------------------------------------------------------------


def out_of_service(t, device_id, covered=True):
    return t.emit(
        ev.DeviceTakenOutOfService,
        device_id=device_id,
        covered=covered,
        out_of_order_sign=False,
        role="FLOOR",
        actor_id="F-01",
    )


def returned(t, device_id):
    return t.emit(ev.DeviceReturnedToService, device_id=device_id, role="FLOOR", actor_id="F-01")


def test_PGP_645a14_n_every_round_each_round_shuffled_by_hand_while_uncovered_is_one_finding(pgp):
    t = pgp()
    jam = fault(t, "DK-1")
    r1 = t.pgp_round("R1", shuffle="MANUAL")
    r2 = t.pgp_round("R2", shuffle="MANUAL")
    out_of_service(t, t.SHUFFLER, covered=True)
    t.pgp_round("R3", shuffle="MANUAL")  # covered now: no more findings
    assert rounds_of(t, OUT_OF_ORDER) == ["R1", "R2"]
    assert [f.evidence_event_ids for f in t.raised(OUT_OF_ORDER)] == [
        (jam.event_id, r.id("shuffled"), r.id("started")) for r in (r1, r2)
    ]


def test_PGP_645a14_n_every_round_a_shuffle_by_a_device_taken_out_of_service_is_another_methods_round(pgp):
    # revision 3 read this of any stopping fault; revision 4 (10.4.1) of a device taken out of
    # service only: a jam cleared by its own reshuffle leaves the shuffler in use
    # (tests/unit/rules/test_rules_revision4.py)
    t = pgp()
    jam = fault(t, "DK-1")
    off = out_of_service(t, t.SHUFFLER, covered=False)
    r1 = t.pgp_round("R1")  # the shuffler used again with no DeviceReturnedToService
    t.assert_raised(OUT_OF_ORDER, round_id="R1", evidence=(off.event_id, r1.id("shuffled"), r1.id("started")))
    # ... and, for a shuffler, a deal after an unresolved fault (its own fault stays the evidence)
    t.assert_raised(FAULT, round_id="R1", evidence=(jam.event_id, r1.cards[0].event_id))


def test_PGP_645a14_n_every_round_the_device_returned_to_service_then_used_raises_nothing(pgp):
    t = pgp()
    fault(t, "DK-1")
    returned(t, t.SHUFFLER)
    t.pgp_round("R1")
    t.pgp_round("R2")
    t.assert_not_raised(OUT_OF_ORDER)
    t.assert_not_raised(FAULT)


def test_PGP_645a14_n_every_round_registering_the_device_again_returns_it_to_use(pgp):
    t = pgp()
    fault(t, "DK-1")
    t.emit(
        ev.DeviceRegistered,
        device_id=t.SHUFFLER,
        device_type="SHUFFLER",
        counts_each_shuffle=True,
        indicates_full_deck=True,
        role="FLOOR",
        actor_id="F-01",
    )
    t.pgp_round("R1")
    t.assert_not_raised(OUT_OF_ORDER)


def test_PGP_645a14_n_every_round_covered_device_taken_out_then_used_before_its_return_raises_no_n(pgp):
    t = pgp()
    jam = fault(t, "DK-1")
    out_of_service(t, t.SHUFFLER, covered=True)
    r1 = t.pgp_round("R1")  # used while covered and out of service: (n) is about uncovered devices
    t.assert_not_raised(OUT_OF_ORDER)
    t.assert_raised(FAULT, round_id="R1", evidence=(jam.event_id, r1.cards[0].event_id))


def test_PGP_645a14_n_every_round_each_round_dealt_by_hand_after_a_shoe_fault_is_one_finding(pgp):
    t = pgp()
    shoe = {}

    def shoe_fault(t):
        shoe["e"] = t.emit(
            ev.AutoShoeFaulted, device_id=t.SHOE, fault="JAM", cards_dealt_so_far=20, role="DEVICE", actor_id=t.SHOE
        )

    t.pgp_round("R1", method="AUTO_SHOE", hooks={"after_complete": shoe_fault})
    r2 = t.pgp_round("R2", method="HAND")
    r3 = t.pgp_round("R3", method="AUTO_SHOE")  # the faulted shoe used before its return
    returned(t, t.SHOE)
    t.pgp_round("R4", method="AUTO_SHOE")
    assert rounds_of(t, OUT_OF_ORDER) == ["R2", "R3"]
    assert [f.evidence_event_ids for f in t.raised(OUT_OF_ORDER)] == [
        (shoe["e"].event_id, r.id("started")) for r in (r2, r3)
    ]


# -- 10.3.3 a suspicion is one finding ------------------------------------------------------------


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


def test_DT_deck_composition_one_suspicion_further_triggers_add_their_events_as_new_revisions(tcp):
    t = tcp()
    r1 = duplicate_round(t, "R1")
    r2 = duplicate_round(t, "R2")  # the same duplicate again on the suspect deck
    short = verify(t, result="SHORT", count=51)
    taken = t.emit(ev.CardRemovedFromDeck, round_id=None, card="7H", reason="OTHER")
    [first] = t.raised(COMPOSITION)
    assert first.round_id == "R1" and first.evidence_event_ids == r1.card_ids(0, 5)
    history = t.history(first.finding_id)
    assert [h.revision for h in history] == [0, 1, 2, 3]
    assert {h.status for h in history} == {FindingStatus.OPEN}
    assert history[1].evidence_event_ids == (*r1.card_ids(0, 5), *r2.card_ids(0, 5))
    assert history[2].evidence_event_ids == (*r1.card_ids(0, 5), *r2.card_ids(0, 5), short.event_id)
    assert history[3].evidence_event_ids == (*history[2].evidence_event_ids, taken.event_id)
    assert [h.trigger_event_id for h in history[1:]] == [r2.cards[5].event_id, short.event_id, taken.event_id]
    assert {h.rulebook_revision for h in history} == {RULEBOOK_REVISION}


def test_DT_deck_composition_one_suspicion_after_it_ends_the_next_trigger_is_a_new_finding(tcp):
    t = tcp()
    duplicate_round(t, "R1")
    verify(t)  # the suspicion ends
    r2 = duplicate_round(t, "R2")
    assert rounds_of(t, COMPOSITION) == ["R1", "R2"]
    second = t.raised(COMPOSITION)[1]
    assert second.evidence_event_ids == r2.card_ids(0, 5)
    assert [h.revision for h in t.history(second.finding_id)] == [0]


def test_DT_deck_composition_one_suspicion_a_trigger_on_another_deck_is_its_own_finding(tcp):
    t = two_decks(tcp)
    plan = [*t.tcp_plan(("SEAT_1", "SEAT_3"))]
    plan[5] = ("DEALER", {"card": "2C"})
    deal(t, "R1", "DK-1", deal=plan)
    deal(t, "R2", "DK-2", deal=plan)
    assert rounds_of(t, COMPOSITION) == ["R1", "R2"]


# -- 10.3.5 an owed remedy is awaited for a bounded window ---------------------------------------


def limits() -> Plausibility:
    """The limits the settings resolve by default: a remedy awaited for 24 hours of event time."""
    return Plausibility(max_seq_jump=100_000, max_clock_skew=timedelta(hours=1), remedy_window=timedelta(hours=24))


def wrong_deck_unremedied(t):
    """R1 dealt from a deck the stub count finds short: void, wagers returned, deck removed, owed."""
    log = t.tcp_round("R1", stub=40, settle=False, complete=False)
    t.complete()
    return log


def test_DT_remedy_overdue_window_a_remedy_within_the_window_closes_the_obligation_late(tcp):
    t = tcp()
    log = wrong_deck_unremedied(t)
    t.start_round("R2")
    t.complete()
    on(t, "DK-1")
    voided = t.emit(ev.RoundVoided, round_id="R1", scope="ALL_HANDS", reason_code="IRREGULARITY", after=3600)
    back = t.return_wagers("R1")
    gone = t.emit(ev.DeckRemoved, round_id="R1", reason_code="WRONG_COUNT", role="FLOOR", actor_id="F-01")
    state, found = fold(t.events, limits=limits())
    [f] = [x for x in found if x.rule_id == WRONG_DECK and x.revision == 0]
    last = [x for x in found if x.finding_id == f.finding_id][-1]
    assert last.status == FindingStatus.REMEDIED and last.late
    assert last.remedy_event_ids == (voided.event_id, back.event_id, gone.event_id)
    assert state is not None and state.obligations == ()
    assert log is not None


def test_DT_remedy_overdue_window_after_the_window_the_obligation_leaves_the_state_and_the_finding_stays_overdue(
    tcp,
):
    t = tcp()
    wrong_deck_unremedied(t)
    t.start_round("R2")
    t.complete()
    state, _ = fold(t.events, limits=limits())
    assert state is not None and len(state.obligations) == 1  # within the window: still awaited
    t.emit(ev.RoundStarted, round_id="R3", round_no=3, dealing_method="HAND", dealer_id="D-0001", after=DAY + 60)
    state, found = fold(t.events, limits=limits())
    assert state is not None and state.obligations == ()
    [f] = [x for x in found if x.rule_id == WRONG_DECK and x.revision == 0]
    assert [x.status for x in found if x.finding_id == f.finding_id][-1] == FindingStatus.OVERDUE


def test_DT_remedy_overdue_window_a_remedy_recorded_after_the_window_changes_no_engine_state(tcp):
    t = tcp()
    wrong_deck_unremedied(t)
    t.start_round("R2")
    t.complete()
    before, found_before = fold(t.events, limits=limits())
    on(t, "DK-1")
    t.emit(ev.RoundVoided, round_id="R1", scope="ALL_HANDS", reason_code="IRREGULARITY", after=DAY + 60)
    t.return_wagers("R1")
    t.emit(ev.DeckRemoved, round_id="R1", reason_code="WRONG_COUNT", role="FLOOR", actor_id="F-01")
    state, found = fold(t.events, limits=limits())
    assert found[len(found_before) :] == []  # no remedied revision: the finding stays overdue
    assert state is not None and state.obligations == ()
    [f] = [x for x in found if x.rule_id == WRONG_DECK and x.revision == 0]
    assert [x.status for x in found if x.finding_id == f.finding_id][-1] == FindingStatus.OVERDUE
    assert before is not None


def test_DT_remedy_overdue_window_an_obligation_of_a_table_that_deals_no_more_turns_overdue_after_the_window(tcp):
    t = tcp()
    wrong_deck_unremedied(t)
    later = t.emit(ev.DeckIntroduced, deck_id="DK-9", declared_count=52, jokers=0, after=DAY + 60)
    t.emit(ev.RoundStarted, round_id="R2", round_no=2, dealing_method="HAND", dealer_id="D-0001")
    state, found = fold(t.events, limits=limits())
    assert state is not None and state.obligations == ()
    [f] = [x for x in found if x.rule_id == WRONG_DECK and x.revision == 0]
    statuses = [x.status for x in found if x.finding_id == f.finding_id]
    assert statuses[-1] == FindingStatus.OVERDUE
    assert later is not None


# -- the revision -------------------------------------------------------------------------------


def test_the_rules_revision_3_changed_say_so_unless_a_later_revision_changed_them_again(tcp):
    assert RULES_BY_ID[COMPOSITION].revised_in == 3
    for rule_id in ("PGP-645a.14-l-shuffler-fault", OVERDUE):
        assert RULES_BY_ID[rule_id].revised_in == 4, rule_id
    for rule_id in (FAULT, OUT_OF_ORDER):
        assert RULES_BY_ID[rule_id].revised_in == 5, rule_id


def test_PGP_645a14_l_shuffler_fault_deck_remedied_only_by_a_reshuffle_of_the_deck_that_jammed(pgp):
    t = pgp()
    on(t, "DK-2")
    t.emit(ev.DeckIntroduced, declared_count=53, jokers=1, role="FLOOR", actor_id="F-01")
    t.emit(ev.ShuffleStarted, round_id=None, deck_id="DK-1", method="AUTOMATED", device_id=t.SHUFFLER)
    fault(t, "DK-1")
    returned(t, t.SHUFFLER)
    shuffle_deck(t, "DK-2")  # the other deck: not the cards that were in the device
    [f] = t.raised("PGP-645a.14-l-shuffler-fault")
    assert [h.status for h in t.history(f.finding_id)] == [FindingStatus.OPEN]
    _, done = shuffle_deck(t, "DK-1")
    assert [h.status for h in t.history(f.finding_id)] == [FindingStatus.OPEN, FindingStatus.REMEDIED]
    assert t.history(f.finding_id)[-1].remedy_event_ids == (done.event_id,)
