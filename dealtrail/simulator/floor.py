"""A casino floor that deals real rounds of the three seed games and makes dealers' mistakes.

Each table plays rounds with a shuffled deck from a seeded :class:`random.Random`, dealt exactly
as the rulebook requires; with probability ``error_rate`` a round carries one injected
procedural error (one *kind* of error per rule the engine checks, cycled per table so a long run
covers every rule ID). Each injection knows the findings it must cause; they are the *truth*
(``rule_id``, ``table_id``, ``round_id``) that the audit's findings must equal exactly.

Each kind takes one place in a table's cycle, except the floor's common events
(:attr:`FloorSpec.floor_events`, rulebook 10.4), which take more: a jam or stop cleared by a
reshuffle in the same shuffler, with no return to service, takes three (it raises nothing at a
Three Card or Chapter 691 table, and PGP-645a.14-l-shuffler-fault at Pai Gow). The other floor
events take one each: a jammed deck dealt before it was reshuffled, a device taken out of service
(covered or signed, or neither) for two to four rounds shuffled or dealt by another method, a shoe
fault remedied per § 645a.14(m) with the shoe left in use, and a table that closes owing a voiding
remedy and opens again after the remedy window.

Same seed, same events, same bytes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import datetime

from dealtrail.simulator import chapter_691, pai_gow_poker, three_card_prime
from dealtrail.simulator.table import FloorSpec, GameSim, Injection, TableSim, Truth, table_ids
from schemas.base import Envelope, Game

__all__ = ["GAMES", "INJECTIONS", "FloorSpec", "Truth", "simulate"]

GAMES: dict[Game, GameSim] = {
    Game.TCP: three_card_prime.GAME,
    Game.C691: chapter_691.GAME,
    Game.PGP: pai_gow_poker.GAME,
}
"""Each game's dealing and injections (:mod:`dealtrail.simulator.table`)."""

INJECTIONS: dict[Game, dict[str, Injection]] = {game: sim.injections for game, sim in GAMES.items()}
"""Every kind of error the simulator injects, per game."""


def simulate(spec: FloorSpec, truth: list[Truth] | None = None) -> Iterator[Envelope]:
    """Yield the events of a whole floor, merged across tables by ``occurred_at`` (then table, seq).

    Args:
        spec: what to simulate.
        truth: a list that receives the expected findings as the simulation runs (complete once
            the iterator is exhausted).

    Yields:
        Events in time order; each table's events stay in seq order.
    """
    sink = truth if truth is not None else []
    sims = [
        TableSim(spec, table_id, game, i // 3, sink, GAMES[game])
        for i, (table_id, game) in enumerate(table_ids(spec.tables))
    ]

    def key(e: Envelope) -> tuple[datetime, str, int]:
        return (e.occurred_at, e.table_id, e.seq)

    yield from heapq.merge(*(s.events() for s in sims), key=key)
