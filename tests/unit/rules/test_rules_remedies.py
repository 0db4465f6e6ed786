"""Remedy tracking (rulebook sections 5 and 8a) and DT-remedy-overdue.

A voiding rule opens an obligation: its finding is ``open``; the remedy events give a revision
``remedied`` (with ``remedy_event_ids``); if the next RoundStarted comes first the finding gets an
``overdue`` revision and DT-remedy-overdue is raised; a late remedy then closes both, ``late``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from schemas import events as ev
from schemas.findings import FindingStatus

OPEN, REMEDIED, OVERDUE = FindingStatus.OPEN, FindingStatus.REMEDIED, FindingStatus.OVERDUE
TCP_PLAN = ["SEAT_1", "SEAT_3", "DEALER"] * 3
BOARD = ["COMMUNITY_1", "COMMUNITY_2", "COMMUNITY_3", "COMMUNITY_4", "COMMUNITY_5"]


@dataclass
class Scenario:
    """A round left open right after a voiding trigger, and how the remedy is carried out:
    ``in_round`` (void, wagers returned, ...) before RoundCompleted, ``after_round`` (deck
    removal, reshuffle) after it; each returns the remedy events in order."""

    trail: Any
    in_round: Callable[[Any], tuple[Any, ...]]
    after_round: Callable[[Any], tuple[Any, ...]] | None = None


def _void_return(t):
    return t.void_all(), t.return_wagers()


def _expose(**fields):
    return lambda t: t.emit(ev.CardExposed, card="9C", **fields)


OPEN_ROUND = {"settle": False, "complete": False}


def scenario(rule_id: str, tcp, c691, pgp) -> Scenario:
    match rule_id:
        case "TCP-679a.9-f-misdeal-full-deck":
            t = tcp()
            t.tcp_round("R1", deal=TCP_PLAN[:-1], stub=44, play={}, **OPEN_ROUND)
            return Scenario(t, _void_return)
        case "TCP-679a.9-f-wrong-deck":
            t = tcp()
            t.tcp_round("R1", stub=42, play={}, **OPEN_ROUND)
            return Scenario(t, _void_return, lambda t: (t.remove_deck(),))
        case "C691-DH-f-misdeal-full-deck":
            t = c691()
            t.c691_round("R1", deal=["BURN", "BURN", *BOARD], stub=47, **OPEN_ROUND)
            return Scenario(t, _void_return)
        case "C691-DH-f-wrong-deck":
            t = c691()
            t.c691_round("R1", stub=47, **OPEN_ROUND)
            return Scenario(t, _void_return, lambda t: (t.remove_deck(),))
        case "PGP-645a.14-c-wrong-total":
            t = pgp()
            t.pgp_round("R1", dice=(2, 3, 4), announced_total=10, **OPEN_ROUND)
            return Scenario(t, _void_return, lambda t: (t.reshuffle(),))
        case "PGP-645a.14-d-player-card-exposed":
            t = pgp()
            exposed = _expose(location="PLAYER_HAND", seat="SEAT_3", exposed_by="DEALER", phase="PLAY")
            t.pgp_round("R1", views=("SEAT_1", "SEAT_5"), hooks={"after_delivery": exposed}, **OPEN_ROUND)
            return Scenario(t, lambda t: (t.emit(ev.PlayerVoidDecided, seat="SEAT_3", decision="PLAY_OUT"),))
        case "PGP-645a.14-e-dealer-bank-exposed":
            t = pgp()
            t.pgp_round("R1", hooks={"after_delivery": _expose(location="DEALER_HAND", phase="PLAY")}, **OPEN_ROUND)
            return Scenario(t, _void_return, lambda t: (t.reshuffle(),))
        case "PGP-645a.14-f-two-face-up":
            t = pgp()
            face_up = lambda t: t.emit(ev.CardFoundFaceUp, location="DECK")  # noqa: E731
            t.pgp_round("R1", hooks={"after_dice": face_up, "after_stacks_dealt": face_up}, **OPEN_ROUND)
            return Scenario(t, _void_return, lambda t: (t.reshuffle(),))
        case "PGP-645a.14-hk-wrong-count":
            t = pgp()
            order = ["SEAT_6", "SEAT_5", "SEAT_4", "SEAT_3", "SEAT_2", "SEAT_1", "DEALER"]
            t.pgp_round("R1", deliver=[(p, 8 if p == "DEALER" else 7) for p in order], **OPEN_ROUND)
            return Scenario(t, _void_return, lambda t: (t.reshuffle(),))
        case "PGP-645a.14-j-exposed-during-stacks":
            t = pgp()
            t.pgp_round("R1", hooks={"after_stacks_dealt": _expose(location="DECK", phase="STACK_DEAL")}, **OPEN_ROUND)
            return Scenario(t, lambda t: (t.return_wagers(),), lambda t: (t.reshuffle(),))
        case "PGP-645a.14-m-shoe-fault":
            t = pgp()
            fault = lambda t: t.emit(ev.AutoShoeFaulted, device_id=t.SHOE, fault="STOPPED", cards_dealt_so_far=30)  # noqa: E731
            t.pgp_round("R1", method="AUTO_SHOE", hooks={"after_stacks_dealt": fault}, **OPEN_ROUND)
            return Scenario(
                t,
                lambda t: (*_void_return(t), t.emit(ev.CardsRemovedFromDevice, device_id=t.SHOE, count=4)),
                lambda t: (t.reshuffle(),),
            )
    raise AssertionError(rule_id)


VOIDING = [
    "TCP-679a.9-f-misdeal-full-deck",
    "TCP-679a.9-f-wrong-deck",
    "C691-DH-f-misdeal-full-deck",
    "C691-DH-f-wrong-deck",
    "PGP-645a.14-c-wrong-total",
    "PGP-645a.14-d-player-card-exposed",
    "PGP-645a.14-e-dealer-bank-exposed",
    "PGP-645a.14-f-two-face-up",
    "PGP-645a.14-hk-wrong-count",
    "PGP-645a.14-j-exposed-during-stacks",
    "PGP-645a.14-m-shoe-fault",
]
WITH_AFTER_ROUND_REMEDY = [r for r in VOIDING if "misdeal" not in r and "-d-" not in r]


def test_voiding_list_is_every_voiding_rule_of_the_catalogue():
    from schemas.findings import Severity
    from streams.engine import RULES

    assert {r.rule_id for r in RULES if r.severity is Severity.VOIDING and r.remedies} == set(VOIDING)


@pytest.fixture
def given(tcp, c691, pgp):
    return lambda rule_id: scenario(rule_id, tcp, c691, pgp)


@pytest.mark.parametrize("rule_id", VOIDING, ids=VOIDING)
def test_voiding_rule_finding_is_open_until_remedy(given, rule_id):
    sc = given(rule_id)
    [f] = sc.trail.raised(rule_id)
    assert [h.status for h in sc.trail.history(f.finding_id)] == [OPEN]
    assert f.required_remedy


@pytest.mark.parametrize("rule_id", VOIDING, ids=VOIDING)
def test_voiding_rule_remedied_by_remedy_events(given, rule_id):
    # given the trigger, when every remedy follows before the next round
    sc = given(rule_id)
    t = sc.trail
    remedy = list(sc.in_round(t))
    t.complete()
    if sc.after_round:
        remedy += sc.after_round(t)
    t.start_round("R2")
    # then the finding gets a "remedied" revision naming the remedy events, and nothing is overdue
    [f] = t.raised(rule_id)
    history = t.history(f.finding_id)
    assert [(h.revision, h.status) for h in history] == [(0, OPEN), (1, REMEDIED)]
    assert history[1].remedy_event_ids == tuple(e.event_id for e in remedy)
    assert history[1].late is False
    assert history[1].trigger_event_id == remedy[-1].event_id
    assert history[1].remedy_delay_seconds is not None and history[1].remedy_delay_seconds > 0
    t.assert_not_raised("DT-remedy-overdue")


@pytest.mark.parametrize("rule_id", WITH_AFTER_ROUND_REMEDY, ids=WITH_AFTER_ROUND_REMEDY)
def test_voiding_rule_not_remedied_by_partial_remedy(given, rule_id):
    sc = given(rule_id)
    t = sc.trail
    sc.in_round(t)
    t.complete()
    [f] = t.raised(rule_id)
    assert [h.status for h in t.history(f.finding_id)] == [OPEN]


@pytest.mark.parametrize("rule_id", VOIDING, ids=VOIDING)
def test_DT_remedy_overdue_raised_when_next_round_starts_before_remedy(given, rule_id):
    sc = given(rule_id)
    t = sc.trail
    t.complete()
    next_round = t.start_round("R2")
    [f] = t.raised(rule_id)
    history = t.history(f.finding_id)
    assert [(h.revision, h.status) for h in history] == [(0, OPEN), (1, OVERDUE)]
    assert history[1].trigger_event_id == next_round.event_id
    overdue = t.assert_raised("DT-remedy-overdue", round_id="R1", evidence=(*f.evidence_event_ids, next_round.event_id))
    assert overdue.game == f.game


@pytest.mark.parametrize("rule_id", WITH_AFTER_ROUND_REMEDY, ids=WITH_AFTER_ROUND_REMEDY)
def test_DT_remedy_overdue_late_remedy_closes_finding_and_overdue_finding(given, rule_id):
    sc = given(rule_id)
    t = sc.trail
    remedy = list(sc.in_round(t))
    t.complete()
    t.start_round("R2")
    assert sc.after_round is not None
    remedy += sc.after_round(t)  # late: during the next round
    [f] = t.raised(rule_id)
    [o] = t.raised("DT-remedy-overdue")
    history, overdue_history = t.history(f.finding_id), t.history(o.finding_id)
    assert [(h.revision, h.status) for h in history] == [(0, OPEN), (1, OVERDUE), (2, REMEDIED)]
    assert [(h.revision, h.status) for h in overdue_history] == [(0, OPEN), (1, REMEDIED)]
    for closed in (history[-1], overdue_history[-1]):
        assert closed.late is True
        assert closed.remedy_event_ids == tuple(e.event_id for e in remedy)


def test_DT_remedy_overdue_not_raised_when_remedy_precedes_next_round(tcp):
    t = tcp()
    t.tcp_round("R1", stub=42, play={}, settle=False, complete=False)
    t.void_all()
    t.return_wagers()
    t.complete()
    t.remove_deck()
    t.start_round("R2")
    t.assert_not_raised("DT-remedy-overdue")


def test_DT_remedy_overdue_raised_once_per_obligation_over_several_rounds(tcp):
    t = tcp()
    t.tcp_round("R1", stub=42, play={}, settle=False)
    t.tcp_round("R2")
    t.tcp_round("R3")
    assert [f.round_id for f in t.raised("DT-remedy-overdue")] == ["R1"]


# -- round-scoped remedies: which round they belong to -----------------------------------------


def test_void_and_return_in_another_round_do_not_remedy(tcp):
    t = tcp()
    t.tcp_round("R1", deal=TCP_PLAN[:-1], stub=44, play={}, settle=False)
    t.tcp_round("R2", play={}, settle=False, complete=False)
    t.void_all()
    t.emit(ev.WagersReturned, wager_ids=("R2-ANTE-1", "R2-ANTE-3"))
    [f] = t.raised("TCP-679a.9-f-misdeal-full-deck")
    assert [h.status for h in t.history(f.finding_id)] == [OPEN, OVERDUE]


def test_wagers_returned_must_cover_every_open_wager(tcp):
    t = tcp()
    t.tcp_round("R1", deal=TCP_PLAN[:-1], stub=44, pair_bonus=("SEAT_3",), play={}, settle=False, complete=False)
    t.void_all()
    t.emit(ev.WagersReturned, wager_ids=("R1-ANTE-1", "R1-ANTE-3"))  # the Pair Bonus Wager is kept
    t.complete()
    [f] = t.raised("TCP-679a.9-f-misdeal-full-deck")
    assert [h.status for h in t.history(f.finding_id)] == [OPEN]


def test_DT_remedy_overdue_late_void_and_return_for_earlier_round_close_it(tcp):
    t = tcp()
    t.tcp_round("R1", deal=TCP_PLAN[:-1], stub=44, play={}, settle=False)
    t.tcp_round("R2", complete=False, settle=False, play={}, stub=None, discard=False)  # R2 wagers are on the layout
    void = t.emit(ev.RoundVoided, scope="ALL_HANDS", reason_code="MISDEAL", round_id="R1")
    returned = t.return_wagers("R1")
    [f] = t.raised("TCP-679a.9-f-misdeal-full-deck")
    last = t.history(f.finding_id)[-1]
    assert (last.status, last.late, last.remedy_event_ids) == (REMEDIED, True, (void.event_id, returned.event_id))


def test_wagers_settled_instead_of_returned_do_not_remedy_and_turn_overdue(tcp):
    t = tcp()
    t.tcp_round("R1", deal=TCP_PLAN[:-1], stub=44, play={}, settle=True, complete=False)  # every wager settled LOSS
    t.void_all()
    t.emit(ev.WagersReturned, wager_ids=())
    t.complete()
    t.start_round("R2")
    [f] = t.raised("TCP-679a.9-f-misdeal-full-deck")
    assert REMEDIED not in [h.status for h in t.history(f.finding_id)]
    assert [o.round_id for o in t.raised("DT-remedy-overdue")] == ["R1"]


# -- § 645a.14(d): the player's choice ---------------------------------------------------------


def test_PGP_645a_14_d_player_card_exposed_remedied_by_void_decision_and_seat_void(pgp):
    t = pgp()
    exposed = _expose(location="PLAYER_HAND", seat="SEAT_3", exposed_by="DEALER", phase="PLAY")
    t.pgp_round("R1", views=("SEAT_1", "SEAT_5"), hooks={"after_delivery": exposed}, **OPEN_ROUND)
    decided = t.emit(ev.PlayerVoidDecided, seat="SEAT_3", decision="VOID")
    [f] = t.raised("PGP-645a.14-d-player-card-exposed")
    assert [h.status for h in t.history(f.finding_id)] == [OPEN]  # the seat void is still owed
    voided = t.emit(ev.RoundVoided, scope="SEAT_3", reason_code="EXPOSED_CARD")
    history = t.history(f.finding_id)
    assert [h.status for h in history] == [OPEN, REMEDIED]
    assert history[-1].remedy_event_ids == (decided.event_id, voided.event_id)


def test_PGP_645a_14_d_player_card_exposed_not_remedied_by_other_seats_decision(pgp):
    t = pgp()
    exposed = _expose(location="PLAYER_HAND", seat="SEAT_3", exposed_by="DEALER", phase="PLAY")
    t.pgp_round("R1", views=("SEAT_1", "SEAT_5"), hooks={"after_delivery": exposed}, **OPEN_ROUND)
    t.emit(ev.PlayerVoidDecided, seat="SEAT_1", decision="PLAY_OUT")
    [f] = t.raised("PGP-645a.14-d-player-card-exposed")
    assert [h.status for h in t.history(f.finding_id)] == [OPEN]


# -- rules with remedies that are not voiding --------------------------------------------------


def _roll(t, *, call_no_roll, **fields):
    t.emit(ev.DiceShaken, shaker_id="SHK-1", shake_count=3)
    revealed = t.emit(ev.DiceRevealed, values=(1, 2, 6), **fields)
    called = t.emit(ev.NoRollCalled, reason="NOT_FLAT") if call_no_roll else None
    return revealed, called


@pytest.mark.parametrize(
    ("rule_id", "fields"),
    [
        ("PGP-645a.14-a-no-roll-not-flat", {"all_flat": False}),
        ("PGP-645a.14-b-no-roll-out", {"die_out_of_shaker": True}),
    ],
    ids=["PGP-645a.14-a-no-roll-not-flat", "PGP-645a.14-b-no-roll-out"],
)
def test_no_roll_remedied_by_no_roll_call_and_reshake(pgp, rule_id, fields):
    t = pgp()
    log = t.pgp_round("R1", hooks={"before_dice": lambda t: _roll(t, call_no_roll=True, **fields)})
    _, called = log["before_dice"]
    [f] = t.raised(rule_id)
    history = t.history(f.finding_id)
    assert [h.status for h in history] == [OPEN, REMEDIED]
    assert history[-1].remedy_event_ids == (called.event_id, log.id("shaken"))


@pytest.mark.parametrize(
    ("rule_id", "fields"),
    [
        ("PGP-645a.14-a-no-roll-not-flat", {"all_flat": False}),
        ("PGP-645a.14-b-no-roll-out", {"die_out_of_shaker": True}),
    ],
    ids=["PGP-645a.14-a-no-roll-not-flat", "PGP-645a.14-b-no-roll-out"],
)
def test_no_roll_not_remedied_by_reshake_without_no_roll_call(pgp, rule_id, fields):
    t = pgp()
    t.pgp_round("R1", hooks={"before_dice": lambda t: _roll(t, call_no_roll=False, **fields)})
    next_round = t.start_round("R2")
    [f] = t.raised(rule_id)
    history = t.history(f.finding_id)
    assert [h.status for h in history] == [OPEN, OVERDUE]
    assert history[-1].trigger_event_id == next_round.event_id
    # DT-remedy-overdue is for voiding rules only (rulebook 8a); this rule is integrity.
    t.assert_not_raised("DT-remedy-overdue")


def test_PGP_645a_14_i_house_way_reset_before_settlement_is_no_finding_not_a_remedied_one(pgp):
    # rulebook 10.5.3: the trigger names the missing remedy, so a remedy in time is no breach
    t = pgp()
    t.pgp_round("R1", house_way=False, hooks={"before_settle": lambda t: t.emit(ev.HandReset, owner="DEALER")})
    t.assert_not_raised("PGP-645a.14-i-house-way")


def test_PGP_645a_14_i_house_way_reset_of_another_hand_leaves_the_finding_open(pgp):
    t = pgp()
    t.pgp_round("R1", house_way=False, hooks={"before_settle": lambda t: t.emit(ev.HandReset, owner="SEAT_1")})
    [f] = t.raised("PGP-645a.14-i-house-way")
    assert [h.status for h in t.history(f.finding_id)] == [OPEN]


def test_PGP_645a_14_i_house_way_reset_after_settlement_is_not_a_remedy(pgp):
    t = pgp()
    t.pgp_round("R1", house_way=False, hooks={"before_complete": lambda t: t.emit(ev.HandReset, owner="DEALER")})
    [f] = t.raised("PGP-645a.14-i-house-way")
    assert REMEDIED not in [h.status for h in t.history(f.finding_id)]
    t.assert_not_raised("DT-remedy-overdue")


def test_PGP_645a_14_l_shuffler_fault_remedied_by_new_shuffle(pgp):
    t = pgp()
    t.emit(ev.ShufflerFaulted, device_id=t.SHUFFLER, fault="JAM")
    log = t.pgp_round("R1")
    [f] = t.raised("PGP-645a.14-l-shuffler-fault")
    history = t.history(f.finding_id)
    assert [h.status for h in history] == [OPEN, REMEDIED]
    assert history[-1].remedy_event_ids == log.ids("shuffled")


def test_PGP_645a_14_l_shuffler_fault_not_remedied_by_shuffle_started_before_the_fault(pgp):
    t = pgp()
    t.emit(ev.ShuffleStarted, method="AUTOMATED", device_id=t.SHUFFLER)
    t.emit(ev.ShufflerFaulted, device_id=t.SHUFFLER, fault="STOPPED")
    t.emit(
        ev.ShuffleCompleted, method="AUTOMATED", device_id=t.SHUFFLER, device_card_count=53, device_full_deck_ok=True
    )
    [f] = t.raised("PGP-645a.14-l-shuffler-fault")
    assert [h.status for h in t.history(f.finding_id)] == [OPEN]


def test_ALL_shuffle_count_mismatch_PROV_remedied_by_deck_removal(tcp):
    t = tcp()
    t.shuffle(device_card_count=51, device_full_deck_ok=False)
    removed = t.remove_deck()
    [f] = t.raised("ALL-shuffle-count-mismatch-PROV")
    history = t.history(f.finding_id)
    assert [h.status for h in history] == [OPEN, REMEDIED]
    assert history[-1].remedy_event_ids == (removed.event_id,)


def test_DT_remedy_overdue_late_void_and_return_close_it_when_next_round_has_no_wagers_yet(tcp):
    t = tcp()
    t.tcp_round("R1", deal=TCP_PLAN[:-1], stub=44, play={}, settle=False)
    t.start_round("R2")
    void = t.emit(ev.RoundVoided, scope="ALL_HANDS", reason_code="MISDEAL", round_id="R1")
    returned = t.return_wagers("R1")
    [f] = t.raised("TCP-679a.9-f-misdeal-full-deck")
    [o] = t.raised("DT-remedy-overdue")
    for history in (t.history(f.finding_id), t.history(o.finding_id)):
        assert history[-1].status == REMEDIED
        assert history[-1].late is True
        assert history[-1].remedy_event_ids == (void.event_id, returned.event_id)


def test_late_void_of_earlier_round_does_not_void_the_round_in_progress(tcp):
    t = tcp()
    t.tcp_round("R1", deal=TCP_PLAN[:-1], stub=44, play={}, settle=False)
    late_void = {
        "after_start": lambda t: (
            t.emit(ev.RoundVoided, scope="ALL_HANDS", reason_code="MISDEAL", round_id="R1"),
            t.return_wagers("R1"),
        )
    }
    log = t.tcp_round("R2", stub=None, discard=False, hooks=late_void)  # R2's stub never reaches the discard rack
    t.assert_raised("TCP-679a.9-c-stub-unexposed", round_id="R2", evidence=log.ids("started", "completed"))


# -- a voided wager settled win or loss undoes the void (issue 19, item 6) ----------------------


def _seat_wager(t, seat: str) -> str:
    return next(w for w, placed in t.round_wagers[t.writer.round_id].items() if placed.seat == seat)


def test_PGP_645a_14_d_seat_void_is_not_remedied_once_its_wager_is_then_settled_win(pgp):
    # given a player card exposed at SEAT_3, the player voids, and the seat is voided
    t = pgp()
    exposed = _expose(location="PLAYER_HAND", seat="SEAT_3", exposed_by="DEALER", phase="PLAY")
    t.pgp_round("R1", views=("SEAT_1", "SEAT_5"), hooks={"after_delivery": exposed}, **OPEN_ROUND)
    t.emit(ev.PlayerVoidDecided, seat="SEAT_3", decision="VOID")
    t.emit(ev.RoundVoided, scope="SEAT_3", reason_code="EXPOSED_CARD")
    [f] = t.raised("PGP-645a.14-d-player-card-exposed")
    assert [h.status for h in t.history(f.finding_id)] == [OPEN, REMEDIED]
    # when the voided seat's wager is then settled as a win
    t.emit(ev.WagerSettled, wager_id=_seat_wager(t, "SEAT_3"), outcome="WIN")
    # then the remedy is no longer remedied, and the next round finds it overdue
    assert [h.status for h in t.history(f.finding_id)] == [OPEN, REMEDIED, OPEN]
    t.complete()
    t.start_round("R2")
    assert t.history(f.finding_id)[-1].status == OVERDUE


def test_PGP_645a_14_d_seat_void_stays_remedied_when_other_seats_are_settled(pgp):
    # given the seat void of SEAT_3 carried out
    t = pgp()
    exposed = _expose(location="PLAYER_HAND", seat="SEAT_3", exposed_by="DEALER", phase="PLAY")
    t.pgp_round("R1", views=("SEAT_1", "SEAT_5"), hooks={"after_delivery": exposed}, **OPEN_ROUND)
    t.emit(ev.PlayerVoidDecided, seat="SEAT_3", decision="VOID")
    t.emit(ev.RoundVoided, scope="SEAT_3", reason_code="EXPOSED_CARD")
    # when another seat's wager is settled and the round goes on to the next
    t.emit(ev.WagerSettled, wager_id=_seat_wager(t, "SEAT_1"), outcome="WIN")
    t.complete()
    t.start_round("R2")
    # then the finding stays remedied
    [f] = t.raised("PGP-645a.14-d-player-card-exposed")
    assert [h.status for h in t.history(f.finding_id)] == [OPEN, REMEDIED]


def test_TCP_679a_9_f_misdeal_void_all_is_not_remedied_by_a_void_after_a_wager_was_settled_loss(tcp):
    # given a misdeal and one of the round's wagers settled as a loss
    t = tcp()
    t.tcp_round("R1", deal=TCP_PLAN[:-1], stub=44, play={}, **OPEN_ROUND)
    [f] = t.raised("TCP-679a.9-f-misdeal-full-deck")
    wager = next(iter(t.round_wagers["R1"]))
    t.emit(ev.WagerSettled, wager_id=wager, outcome="LOSS")
    # when all hands are voided and the wagers returned
    t.void_all()
    t.return_wagers()
    # then the finding is never remedied
    assert REMEDIED not in [h.status for h in t.history(f.finding_id)]


def test_PGP_645a_14_d_a_player_who_plays_out_stays_remedied_when_the_hand_is_settled(pgp):
    # given a player card exposed at SEAT_3 and the player decides to play the hand out
    t = pgp()
    exposed = _expose(location="PLAYER_HAND", seat="SEAT_3", exposed_by="DEALER", phase="PLAY")
    t.pgp_round("R1", views=("SEAT_1", "SEAT_5"), hooks={"after_delivery": exposed}, **OPEN_ROUND)
    t.emit(ev.PlayerVoidDecided, seat="SEAT_3", decision="PLAY_OUT")
    # when the hand is settled as a loss (nothing was voided)
    t.emit(ev.WagerSettled, wager_id=_seat_wager(t, "SEAT_3"), outcome="LOSS")
    # then the finding stays remedied
    [f] = t.raised("PGP-645a.14-d-player-card-exposed")
    assert [h.status for h in t.history(f.finding_id)] == [OPEN, REMEDIED]
