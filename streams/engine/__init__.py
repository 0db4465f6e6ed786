"""The pure rule engine: table state, ``apply(state, event) -> (state, findings)``, rule modules
per game and the rule catalogue. No I/O, no clock, no randomness (checked by a test)."""

from streams.engine.catalog import RULEBOOK_REVISION, RULES, RULES_BY_ID, Remedy, Rule
from streams.engine.engine import EventRejected, Plausibility, apply, check_plausible, check_recorded, fold
from streams.engine.state import RoundState, TableState

__all__ = [
    "RULEBOOK_REVISION",
    "RULES",
    "RULES_BY_ID",
    "EventRejected",
    "Plausibility",
    "Remedy",
    "RoundState",
    "Rule",
    "TableState",
    "apply",
    "check_plausible",
    "check_recorded",
    "fold",
]
