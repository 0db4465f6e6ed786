"""Cards and layout areas in words and symbols, for pages people read (the console's finding
page and the incident replay page): ``KH`` -> K♥ in red, ``SEAT_3`` -> Seat 3."""

from __future__ import annotations

from typing import Any

_SUITS = {"H": ("♥", True), "D": ("♦", True), "C": ("♣", False), "S": ("♠", False)}
_RANKS = {"T": "10"}


def card_face(code: str) -> dict[str, Any]:
    """A card code (``KH``, ``TC``, ``JK``, ``UNKNOWN``) as rank, suit symbol and colour."""
    if code == "JK":
        return {"rank": "Joker", "suit": "", "red": False, "label": "Joker"}
    if len(code) == 2 and code[1] in _SUITS:
        suit, red = _SUITS[code[1]]
        rank = _RANKS.get(code[0], code[0])
        return {"rank": rank, "suit": suit, "red": red, "label": rank + suit}
    return {"rank": "?", "suit": "", "red": False, "label": "unknown card"}


AREA_NAMES = {"DEALER": "Dealer", "BANK": "Bank", "BURN": "Burn", "PAIR_BONUS_COMMUNITY": "Pair Bonus community"}


def area_name(area: str) -> str:
    """A layout area in words: ``SEAT_3`` -> ``Seat 3``, ``COMMUNITY_1`` -> ``Community 1``."""
    if area in AREA_NAMES:
        return AREA_NAMES[area]
    head, _, n = area.rpartition("_")
    return f"{head.replace('_', ' ').capitalize()} {n}" if n.isdigit() else area.replace("_", " ").capitalize()
