"""``replay --at``: the state as of one event or instant, on hand-written trails of each game."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from dealtrail.investigate.replay import describe_state, layout, replay
from schemas import events as ev
from schemas.codec import encode
from tests.unit.rules.conftest import Trail


def _trail(t: Trail) -> list[tuple[str, str]]:
    return [(e.event_id, encode(e).decode()) for e in t.events]


def _first(t: Trail, cls: type[ev.Envelope], after: int = 0) -> ev.Envelope:
    return next(e for e in t.events[after:] if isinstance(e, cls))


def test_at_after_the_three_card_prime_deal_shows_three_cards_per_ante_seat_and_the_dealer(
    tcp: Callable[..., Trail],
) -> None:
    t = tcp()
    t.tcp_round("R1", antes=("SEAT_2", "SEAT_5"))
    last_card = [e for e in t.events if isinstance(e, ev.CardDealt)][-1]
    result = replay(t.events[0].table_id, _trail(t), None, at=last_card.event_id)
    assert result.at_event == last_card
    assert result.state_at is not None
    rows = {r["area"]: r["cards"] for r in layout(result.state_at, result.cards)}
    assert set(rows) == {"SEAT_2", "SEAT_5", "DEALER"}
    assert all(len(cards) == 3 for cards in rows.values())
    dealt = [e for e in t.events if isinstance(e, ev.CardDealt)]
    # deal order: one card at a time, SEAT_2, SEAT_5, DEALER, three passes
    assert [c[0] for c in rows["SEAT_2"]] == [dealt[0].event_id, dealt[3].event_id, dealt[6].event_id]
    assert [c[1] for c in rows["DEALER"]] == [dealt[2].card, dealt[5].card, dealt[8].card]
    assert all(face == "DOWN" for cards in rows.values() for _e, _c, face in cards)


def test_at_an_instant_gives_the_state_of_the_last_event_before_it(tcp: Callable[..., Trail]) -> None:
    t = tcp()
    t.tcp_round("R1")
    fourth = [e for e in t.events if isinstance(e, ev.CardDealt)][3]
    result = replay(fourth.table_id, _trail(t), None, at=(fourth.occurred_at + timedelta(milliseconds=1)).isoformat())
    assert result.at_event == fourth
    assert result.state_at is not None and result.state_at.round is not None
    assert result.state_at.round.cards_dealt == 4


def test_at_after_a_stub_count_the_window_is_reset(tcp: Callable[..., Trail]) -> None:
    t = tcp(counting_shuffler=False)
    for n in range(1, 4):
        t.tcp_round(f"R{n}", round_no=n, stub=None)
    before = replay(t.events[0].table_id, _trail(t), None, at=t.events[-1].event_id)
    assert before.state_at is not None
    assert describe_state(before.state_at)["rounds_since_stub_count"] == 3
    t.tcp_round("R4", round_no=4)
    count = [e for e in t.events if isinstance(e, ev.StubCounted)][-1]
    done = [e for e in t.events if isinstance(e, ev.RoundCompleted)][-1]
    at_count = replay(count.table_id, _trail(t), None, at=count.event_id)
    assert at_count.state_at is not None and at_count.state_at.round is not None
    assert at_count.state_at.round.stub_count == count.count
    after = replay(done.table_id, _trail(t), None, at=done.event_id)
    assert after.state_at is not None
    assert describe_state(after.state_at)["rounds_since_stub_count"] == 0


def test_at_after_the_chapter_691_deal_shows_one_burn_and_five_community_cards(c691: Callable[..., Trail]) -> None:
    t = c691()
    t.c691_round("R1")
    last_card = [e for e in t.events if isinstance(e, ev.CardDealt)][-1]
    result = replay(last_card.table_id, _trail(t), None, at=last_card.event_id)
    assert result.state_at is not None
    state = describe_state(result.state_at)
    assert (state["burns"], state["community"]) == (1, 5)
    rows = {r["area"]: len(r["cards"]) for r in layout(result.state_at, result.cards)}
    assert rows == {"BURN": 1, **{f"COMMUNITY_{j}": 1 for j in range(1, 6)}}


def test_at_after_the_pai_gow_stacks_shows_seven_stacks_of_seven(pgp: Callable[..., Trail]) -> None:
    t = pgp()
    t.pgp_round("R1")
    last_card = [e for e in t.events if isinstance(e, ev.CardDealt)][-1]
    result = replay(last_card.table_id, _trail(t), None, at=last_card.event_id)
    assert result.state_at is not None
    rows = {r["area"]: len(r["cards"]) for r in layout(result.state_at, result.cards)}
    assert rows == {f"STACK_{s}": 7 for s in range(1, 8)}
    delivered = [e for e in t.events if isinstance(e, ev.StackDelivered)][-1]
    at_delivery = replay(delivered.table_id, _trail(t), None, at=delivered.event_id)
    assert at_delivery.state_at is not None and at_delivery.state_at.round is not None
    assert len(at_delivery.state_at.round.stacks) == 7
