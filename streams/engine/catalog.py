"""The rule catalogue: every rule ID of rulebook sections 6, 7 and 8a with its citation,
severity, paraphrase and the remedy the regulation demands.

Reports, the incident replay and findings read citations and paraphrases from here, so a rule's
wording lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from importlib.metadata import PackageNotFoundError, version

from schemas.base import Game
from schemas.findings import Severity


class Remedy(StrEnum):
    """A step the regulation requires after an irregularity (rulebook sections 3 and 6)."""

    VOID_ALL = "VOID_ALL"
    """``RoundVoided(scope=ALL_HANDS)`` in the round."""
    WAGERS_RETURNED = "WAGERS_RETURNED"
    """``WagersReturned`` covering every open wager of the round."""
    DECK_REMOVED = "DECK_REMOVED"
    """``DeckRemoved`` for the deck in use."""
    RESHUFFLE = "RESHUFFLE"
    """A ``ShuffleCompleted`` of a shuffle started after the trigger."""
    NO_ROLL_CALLED = "NO_ROLL_CALLED"
    """``NoRollCalled`` after the invalid roll."""
    RESHAKEN = "RESHAKEN"
    """A new ``DiceShaken`` after the "no roll"."""
    PLAYER_DECISION = "PLAYER_DECISION"
    """``PlayerVoidDecided`` for the seat (then ``VOID_SEAT`` if the player voids)."""
    VOID_SEAT = "VOID_SEAT"
    """``RoundVoided(scope=SEAT_k)`` for the seat that chose to void."""
    HAND_RESET = "HAND_RESET"
    """``HandReset`` of the hand set against the house way. No rule owes it since revision 5 (10.5.3:
    a reset in time means no finding); kept so that an obligation in a state stored under revision 4
    still loads, and is still met by its reset."""
    REMOVED_FROM_DEVICE = "REMOVED_FROM_DEVICE"
    """``CardsRemovedFromDevice`` for the faulted automated dealing shoe."""


REMEDY_TEXT = {
    Remedy.VOID_ALL: "all hands void",
    Remedy.WAGERS_RETURNED: "all wagers returned",
    Remedy.DECK_REMOVED: "entire deck removed from the table",
    Remedy.RESHUFFLE: "cards reshuffled",
    Remedy.NO_ROLL_CALLED: '"no roll" called',
    Remedy.RESHAKEN: "dice reshaken",
    Remedy.PLAYER_DECISION: "player decides to play out or void without looking",
    Remedy.VOID_SEAT: "that player's hand void",
    Remedy.HAND_RESET: "hand reset per the house way",
    Remedy.REMOVED_FROM_DEVICE: "cards removed from the device",
}


@dataclass(frozen=True, slots=True)
class Rule:
    """One checkable rule.

    Attributes:
        rule_id: the rulebook's stable ID.
        citation: the regulation (58 Pa. Code) or "dealtrail integrity rule".
        game: the game it applies to, or None for every game.
        severity: voiding / integrity / procedural (rulebook section 5).
        summary: the rule in one sentence (a paraphrase; the seed text is the authority).
        remedies: the steps the regulation requires after the trigger, checked by remedy tracking.
        provisional: True for section 7 rules (analog text; behind ``TableConfig.provisional_rules``).
        revised_in: the rulebook revision that last changed the rule's trigger or remedy (1 for a
            rule as first written; see :data:`LAST_REVISED`).
    """

    rule_id: str
    citation: str
    game: Game | None
    severity: Severity
    summary: str
    remedies: tuple[Remedy, ...] = ()
    provisional: bool = False

    @property
    def revised_in(self) -> int:
        """The rulebook revision that last changed this rule (:data:`LAST_REVISED`, else 1)."""
        return LAST_REVISED.get(self.rule_id, 1)

    @property
    def decisions(self) -> tuple[str, ...]:
        """The rulebook section 10 decisions that shape this rule (:data:`DECISIONS`), e.g. ``10.4.1``."""
        return DECISIONS.get(self.rule_id, ())

    @property
    def cleared_by(self) -> str:
        """What clears the finding, or would have prevented it, in one line (:data:`CLEARED_BY`)."""
        return CLEARED_BY[self.rule_id]

    @property
    def required_remedy(self) -> str | None:
        """The remedies in words, or None."""
        return "; ".join(REMEDY_TEXT[r] for r in self.remedies) or None


RULEBOOK_REVISION = 5
"""The revision of the rulebook (``shared/rulebook.md``) these rules apply: 2 adds section 10's
decisions (a deck re-dealt unshuffled, what clears a device fault, the composition window,
showdown is not an exposure, a verified deck ends a composition suspicion); 3 adds section 10.3's
(a fault belongs to its deck, (n) counts every round, a suspicion is one finding, implausible
values are refused, an owed remedy is awaited for a bounded window); 4 adds section 10.4's (a
fault is cleared by its own remedy and a device is unusable only when taken out of service or
passed over for another method on an uncleared fault; a remedy window that closes with nothing
met raises DT-remedy-overdue at the table's next event; findings do not depend on arrival order
or other tables); 5 adds section 10.5's (any complete reshuffle of the deck clears its fault, in
the faulted shuffler, a usable spare or by hand; a fault of an empty shuffler concerns only the
next deck shuffled in it; a remedy in time before a "... and no X before Y" trigger is no breach;
a counting shuffler exempts only the rounds a counted shuffle fed, and a stub count resets the
window in any round). Every finding carries it (``Finding.rulebook_revision``)."""

LAST_REVISED: dict[str, int] = {
    # revision 2 (rulebook section 10.1): a deck re-dealt unshuffled (10.1.1), what clears a device
    # fault (10.1.2), the composition window and a verified deck (10.1.3, 10.1.5), showdown is not
    # an exposure (10.1.4), the Chapter 691 cut (section 10.2's DeckCut)
    "TCP-679a.9-a1-shuffler-required": 2,
    "C691-DH-a1-shuffler-required": 2,
    "C691-DH-a2-same-hand": 2,
    "PGP-645a.14-d-player-card-exposed": 2,
    "PGP-645a.14-e-dealer-bank-exposed": 2,
    # revision 3 (rulebook section 10.3): a fault belongs to its deck and is counted per round
    # (10.3.1), (n) counts every round and a device returns to use only by its return to service
    # (10.3.2), a suspicion is one finding (10.3.3), an owed remedy is awaited for a bounded
    # window (10.3.5)
    "DT-deck-composition": 3,
    # revision 4 (rulebook section 10.4): a fault is cleared by its own remedy, a device is unusable
    # only when taken out of service or passed over for another method on an uncleared fault
    # (10.4.1), a remedy window that closes raises DT-remedy-overdue at the next event (10.4.2)
    "PGP-645a.14-l-shuffler-fault": 4,
    "PGP-645a.14-m-shoe-fault": 4,
    "DT-remedy-overdue": 4,
    # revision 5 (rulebook section 10.5): any complete reshuffle clears a deck's fault while the
    # faulted shuffler stays faulted for (n) (10.5.1), a fault of an empty shuffler concerns the next
    # deck in it (10.5.2), a remedy in time is no breach (10.5.3), the exemption follows the round's
    # own counted shuffle and a stub count resets the window in any round (10.5.4)
    "DT-deal-after-device-fault": 5,
    "PGP-645a.14-n-out-of-order": 5,
    "PGP-645a.14-i-house-way": 5,
    "TCP-679a.9-d-stub-count-due": 5,
    "C691-DH-d-stub-count-due": 5,
}
"""Rule ID -> the rulebook revision that last changed it, for the rules changed after revision 1
(``docs/rules.md`` shows it; a test checks every key is a rule of the catalogue)."""

DECISIONS: dict[str, tuple[str, ...]] = {
    "TCP-679a.9-a1-shuffler-required": ("10.1.1", "10.4.1"),
    "C691-DH-a1-shuffler-required": ("10.1.1", "10.4.1"),
    "C691-DH-a2-same-hand": ("10.2",),
    "PGP-645a.14-d-player-card-exposed": ("10.1.4",),
    "PGP-645a.14-e-dealer-bank-exposed": ("10.1.4",),
    "PGP-645a.14-j-exposed-during-stacks": ("10.1.4",),
    "PGP-645a.14-f-one-face-up": ("10.2",),
    "PGP-645a.14-l-shuffler-fault": ("10.1.2", "10.3.1", "10.4.1"),
    "PGP-645a.14-m-shoe-fault": ("10.4.1",),
    "PGP-645a.14-n-out-of-order": ("10.3.2", "10.4.1", "10.5.1"),
    "PGP-645a.14-i-house-way": ("10.5.3",),
    "TCP-679a.9-d-stub-count-due": ("10.5.4",),
    "C691-DH-d-stub-count-due": ("10.5.4",),
    "ALL-shuffle-count-mismatch-PROV": ("10.1.2",),
    "DT-deck-composition": ("10.1.3", "10.1.5", "10.2", "10.3.3"),
    "DT-deal-after-device-fault": ("10.1.2", "10.3.1", "10.3.2", "10.4.1", "10.5.1", "10.5.2"),
    "DT-remedy-overdue": ("10.3.5", "10.4.2"),
    "DT-sequence-gap": ("10.3.4",),
}
"""Rule ID -> the decisions of rulebook section 10 (revisions 2 to 5) that shape how the rule is
read; 10.4.3 (arrival order and other tables) holds for every rule. ``docs/rules.md`` shows them."""

CLEARED_BY: dict[str, str] = {
    "TCP-679a.7-a-instrument": "Take the wager in chips, plaques or approved instruments only.",
    "TCP-679a.7-b-seated": "Take wagers from seated players only.",
    "TCP-679a.7-c-late-wager": 'Place, change or withdraw wagers (other than the Play Wager) before "no more bets".',
    "TCP-679a.7-d1-play-equals-ante": "Make each Play Wager equal to the same seat's Ante Wager.",
    "TCP-679a.7-d23-optional-wager-enabled": "Offer Prime and Pair Bonus Wagers only where the Rules Submission does.",
    "TCP-679a.9-a1-shuffler-required": (
        "A ShuffleCompleted by the automated shuffler of the deck since its last round, before the deal."
    ),
    "TCP-679a.9-a2-same-hand": "A DeckHeld in the chosen hand, over the inventory container, kept all round.",
    "TCP-679a.9-a3-no-more-bets": "A NoMoreBetsAnnounced before the first card.",
    "TCP-679a.9-b-deal-order": "Deal one card at a time, clockwise from the Ante seat farthest to the dealer's left.",
    "TCP-679a.9-b-three-each": "Exactly three cards to each Ante seat and the dealer.",
    "TCP-679a.9-b-face-down": "Every card dealt face down.",
    "TCP-679a.9-b-pair-bonus-4th": "One fourth card to each Pair Bonus seat and to no other.",
    "TCP-679a.9-g-pair-bonus-community": "A community card only where elected, after every three-card hand.",
    "TCP-679a.9-c-stub-unexposed": "The stub placed in the discard rack unexposed (StubDiscarded, exposed false).",
    "TCP-679a.9-d-stub-count-due": (
        "A StubCounted within every 5 rounds, or a counting shuffler that counted the full deck for each round "
        "(a round dealt from a deck not shuffled since its last round is counted, 10.5.4)."
    ),
    "TCP-679a.9-d-count-method": "Count the stub face down on the layout.",
    "TCP-679a.9-e-correct-count": "After a count of 52 cards, the stub to the discard rack unexposed.",
    "TCP-679a.9-f-misdeal-full-deck": "Cleared by RoundVoided (all hands) and WagersReturned for every open wager.",
    "TCP-679a.9-f-wrong-deck": "Cleared by RoundVoided (all hands), WagersReturned for every open wager and DeckRemoved.",
    "TCP-679a.9-f-finding-mismatch": "A misdeal determination that agrees with the deck total the events give.",
    "C691-DH-a1-shuffler-required": (
        "A ShuffleCompleted by the automated shuffler of the deck since its last round, before the deal."
    ),
    "C691-DH-a2-same-hand": "A DeckCut after the shuffle, then a DeckHeld in the chosen hand kept all round.",
    "C691-DH-a3-no-more-bets": "A NoMoreBetsAnnounced before the first card.",
    "C691-DH-b-burn-first": "Exactly one burn card before the community cards.",
    "C691-DH-b-five-community": "Five community cards, one at a time, and nothing else but the burn card.",
    "C691-DH-b-face-down": "Every card dealt face down from the top of the deck.",
    "C691-DH-c-stub-unexposed": "The stub placed in the discard rack unexposed after the five community cards.",
    "C691-DH-d-stub-count-due": (
        "A StubCounted within every 5 rounds, or a counting shuffler that counted the full deck for each round "
        "(a round dealt from a deck not shuffled since its last round is counted, 10.5.4)."
    ),
    "C691-DH-d-count-method": "Count the stub face down on the layout.",
    "C691-DH-f-misdeal-full-deck": "Cleared by RoundVoided (all hands) and WagersReturned for every open wager.",
    "C691-DH-f-wrong-deck": "Cleared by RoundVoided (all hands), WagersReturned for every open wager and DeckRemoved.",
    "PGP-645a.14-a-no-roll-not-flat": "Cleared by NoRollCalled, then a new DiceShaken.",
    "PGP-645a.14-b-no-roll-out": "Cleared by NoRollCalled, then a new DiceShaken.",
    "PGP-645a.14-c-wrong-total": "Cleared by RoundVoided (all hands), WagersReturned and a reshuffle of the deck.",
    "PGP-645a.14-d-player-card-exposed": (
        "Cleared by the player's PlayerVoidDecided (and RoundVoided for the seat if the player voids)."
    ),
    "PGP-645a.14-d-decision-after-look": "The player decides on the exposed hand before looking at the others.",
    "PGP-645a.14-e-dealer-bank-exposed": "Cleared by RoundVoided (all hands), WagersReturned and a reshuffle.",
    "PGP-645a.14-f-one-face-up": "The face-up card not used this round and placed in the discard rack.",
    "PGP-645a.14-f-two-face-up": "Cleared by RoundVoided (all hands), WagersReturned and a reshuffle.",
    "PGP-645a.14-g-drawn-in-error": "The card drawn in error used as the next card.",
    "PGP-645a.14-hk-wrong-count": "Cleared by RoundVoided (all hands), WagersReturned and a reshuffle.",
    "PGP-645a.14-i-house-way": "Prevented by a HandReset of the hand per the house way before any wager is settled (10.5.3).",
    "PGP-645a.14-j-exposed-during-stacks": "Cleared by WagersReturned for every open wager and a reshuffle.",
    "PGP-645a.14-l-shuffler-fault": (
        "Cleared by the reshuffle: a clearing ShuffleCompleted of the jammed deck started after the fault; the "
        "shuffler stays in use (10.4.1)."
    ),
    "PGP-645a.14-m-shoe-fault": (
        "Cleared by RoundVoided (all hands), WagersReturned, CardsRemovedFromDevice and a reshuffle; the shoe stays "
        "in use once its cards are out and reshuffled (10.4.1)."
    ),
    "PGP-645a.14-n-out-of-order": (
        "A DeviceTakenOutOfService with covered or out_of_order_sign true before another method is used; ends at "
        "DeviceReturnedToService, or when the faulted device completes a clearing shuffle again."
    ),
    "PGP-645c.2-f-wager-before-shake": 'Dice wagers placed before "no more bets" and the shake.',
    "PGP-645c.2-g-announce-dice": "A DiceValuesAnnounced before the dice wagers are settled.",
    "TCP-679a.8/10-stub-count-PROV": "A StubCounted within every 5 shoe-dealt rounds, or a counting shuffler.",
    "ALL-shuffle-count-mismatch-PROV": "Cleared by DeckRemoved for the deck the shuffler found short or long.",
    "PGP-645a.9-shake-3x-PROV": "Shake the shaker at least three times.",
    "PGP-645a.9-start-position-PROV": "The first stack to the position the dice total or RNG number counts to.",
    "PGP-645a.9-rng-PROV": "Use an RNG or player-activated shaker only where the Rules Submission provides.",
    "PGP-645a.9-stacks-PROV": "Seven stacks dealt, the leftover cards discarded unexposed.",
    "PGP-645a.9-unwagered-stacks-PROV": "A stack delivered to every position and to the dealer.",
    "DT-deck-composition": "The suspicion ends at DeckRemoved or a DeckVerified with result OK.",
    "DT-deal-after-device-fault": (
        "A complete reshuffle of the faulted deck started after the fault before it is dealt again: a clearing "
        "ShuffleCompleted (mode SHUFFLE, full deck reported by a counting shuffler) in the faulted shuffler or a "
        "usable spare, or a manual shuffle (10.5.1); no return to service is needed (10.4.1). A fault of an empty "
        "shuffler concerns only the next deck shuffled in it (10.5.2)."
    ),
    "DT-remedy-overdue": (
        "The owed remedy events before the next round starts, and within the remedy window after the round ended."
    ),
    "DT-chain-broken": "Events stored as the device wrote them, each linking to the hash of the one before.",
    "DT-sequence-gap": "Every seq of the table delivered once, each copy identical to the first.",
}
"""Rule ID -> what clears a finding of the rule (its remedy events) or, for a rule with no remedy,
what would have prevented it, in one line for the compliance manager (``docs/rules.md``; a test
checks every rule has one)."""

V, INTEG, P = Severity.VOIDING, Severity.INTEGRITY, Severity.PROCEDURAL
TCP, C691, PGP = Game.TCP, Game.C691, Game.PGP
VOID_RETURN = (Remedy.VOID_ALL, Remedy.WAGERS_RETURNED)
VOID_RETURN_RESHUFFLE = (Remedy.VOID_ALL, Remedy.WAGERS_RETURNED, Remedy.RESHUFFLE)
C691_SECTION = "58 Pa. Code Ch. 691, dealing from the hand (section no. unconfirmed) "
"""Chapter 691's dealing-from-the-hand section number is unconfirmed (§ 691.5-691.7, likely § 691.7)."""

RULES: tuple[Rule, ...] = (
    # 6.1 Three Card Prime
    Rule(
        "TCP-679a.7-a-instrument",
        "58 Pa. Code § 679a.7(a)",
        TCP,
        P,
        "Wagers are made with chips, plaques or approved instruments; a verbal wager backed by cash is not accepted.",
    ),
    Rule("TCP-679a.7-b-seated", "58 Pa. Code § 679a.7(b)", TCP, P, "Only a seated player may wager."),
    Rule(
        "TCP-679a.7-c-late-wager",
        "58 Pa. Code § 679a.7(c)",
        TCP,
        INTEG,
        'No wager other than the Play Wager may be placed, changed or withdrawn after "no more bets".',
    ),
    Rule(
        "TCP-679a.7-d1-play-equals-ante",
        "58 Pa. Code § 679a.7(d)(1)",
        TCP,
        P,
        "The Play Wager must equal the same seat's Ante Wager.",
    ),
    Rule(
        "TCP-679a.7-d23-optional-wager-enabled",
        "58 Pa. Code § 679a.7(d)(2)-(3)",
        TCP,
        P,
        "Prime and Pair Bonus Wagers are offered only if the Rules Submission provides for them.",
    ),
    Rule(
        "TCP-679a.9-a1-shuffler-required",
        "58 Pa. Code § 679a.9(a)(1)",
        TCP,
        INTEG,
        "Cards dealt from the hand must have been shuffled by an automated shuffling device.",
    ),
    Rule(
        "TCP-679a.9-a2-same-hand",
        "58 Pa. Code § 679a.9(a)(2)",
        TCP,
        P,
        "The dealer keeps the deck in the chosen hand all round, over the table inventory container and in front of the dealer.",
    ),
    Rule(
        "TCP-679a.9-a3-no-more-bets",
        "58 Pa. Code § 679a.9(a)(3)",
        TCP,
        P,
        'The dealer announces "no more bets" before dealing any card.',
    ),
    Rule(
        "TCP-679a.9-b-deal-order",
        "58 Pa. Code § 679a.9(b)",
        TCP,
        P,
        "Deal one card at a time, clockwise from the Ante seat farthest to the dealer's left, to Ante seats and the dealer only.",
    ),
    Rule(
        "TCP-679a.9-b-three-each",
        "58 Pa. Code § 679a.9(b)",
        TCP,
        INTEG,
        "Each player with an Ante Wager and the dealer receive exactly three cards.",
    ),
    Rule("TCP-679a.9-b-face-down", "58 Pa. Code § 679a.9(b)", TCP, INTEG, "All cards are dealt face down."),
    Rule(
        "TCP-679a.9-b-pair-bonus-4th",
        "58 Pa. Code § 679a.9(b)",
        TCP,
        P,
        "Each Pair Bonus seat, and only such a seat, receives one card in its fourth-card area.",
    ),
    Rule(
        "TCP-679a.9-g-pair-bonus-community",
        "58 Pa. Code § 679a.9(g)",
        TCP,
        P,
        "A Pair Bonus community card is dealt only if elected in the Rules Submission, after every three-card hand, instead of fourth cards.",
    ),
    Rule(
        "TCP-679a.9-c-stub-unexposed",
        "58 Pa. Code § 679a.9(c),(e)",
        TCP,
        INTEG,
        "The stub goes to the discard rack without exposing its cards.",
    ),
    Rule(
        "TCP-679a.9-d-stub-count-due",
        "58 Pa. Code § 679a.9(d)",
        TCP,
        P,
        "Without a counting shuffler, the stub is counted at least once every 5 rounds.",
    ),
    Rule(
        "TCP-679a.9-d-count-method",
        "58 Pa. Code § 679a.9(d)",
        TCP,
        INTEG,
        "The stub is counted face down on the layout.",
    ),
    Rule(
        "TCP-679a.9-e-correct-count",
        "58 Pa. Code § 679a.9(e)",
        TCP,
        P,
        "When the count shows 52 cards, the stub goes to the discard rack unexposed.",
    ),
    Rule(
        "TCP-679a.9-f-misdeal-full-deck",
        "58 Pa. Code § 679a.9(f)",
        TCP,
        V,
        "A wrong stub count from a misdeal with 52 cards present: all hands void and all wagers returned.",
        VOID_RETURN,
    ),
    Rule(
        "TCP-679a.9-f-wrong-deck",
        "58 Pa. Code § 679a.9(f)",
        TCP,
        V,
        "A wrong stub count with the deck itself wrong: all hands void, all wagers returned, the entire deck removed.",
        (*VOID_RETURN, Remedy.DECK_REMOVED),
    ),
    Rule(
        "TCP-679a.9-f-finding-mismatch",
        "58 Pa. Code § 679a.9(f) (checker cross-check)",
        TCP,
        INTEG,
        "The dealer's misdeal determination disagrees with the deck total computed from the events.",
    ),
    # 6.2 Chapter 691
    Rule(
        "C691-DH-a1-shuffler-required",
        f"{C691_SECTION}(a)(1)",
        C691,
        INTEG,
        "Cards dealt from the hand must have been shuffled by an automated shuffling device.",
    ),
    Rule(
        "C691-DH-a2-same-hand",
        f"{C691_SECTION}(a)(2)",
        C691,
        P,
        "After the § 691.4 shuffle and cut, the dealer keeps the deck in the chosen hand, over the inventory container, in front of the dealer.",
    ),
    Rule(
        "C691-DH-a3-no-more-bets",
        f"{C691_SECTION}(a)(3)",
        C691,
        P,
        'The dealer announces "no more bets" before dealing any card.',
    ),
    Rule(
        "C691-DH-b-burn-first",
        f"{C691_SECTION}(b)",
        C691,
        INTEG,
        "The dealer burns exactly one card before the community cards.",
    ),
    Rule(
        "C691-DH-b-five-community",
        f"{C691_SECTION}(b)",
        C691,
        INTEG,
        "Five community cards are dealt one at a time to the community area, and nothing else but the burn card.",
    ),
    Rule(
        "C691-DH-b-face-down",
        f"{C691_SECTION}(b)",
        C691,
        INTEG,
        "All cards are dealt face down from the top of the deck.",
    ),
    Rule(
        "C691-DH-c-stub-unexposed",
        f"{C691_SECTION}(c),(e)",
        C691,
        INTEG,
        "After the five community cards the stub goes to the discard rack without exposing its cards.",
    ),
    Rule(
        "C691-DH-d-stub-count-due",
        f"{C691_SECTION}(d)",
        C691,
        P,
        "Without a counting shuffler (54 cards), the stub is counted at least once every five rounds.",
    ),
    Rule("C691-DH-d-count-method", f"{C691_SECTION}(d)", C691, INTEG, "The stub is counted face down on the layout."),
    Rule(
        "C691-DH-f-misdeal-full-deck",
        f"{C691_SECTION}(f)",
        C691,
        V,
        "A wrong stub count from a misdeal with 54 cards present: all hands void and all wagers returned.",
        VOID_RETURN,
    ),
    Rule(
        "C691-DH-f-wrong-deck",
        f"{C691_SECTION}(f)",
        C691,
        V,
        "A wrong stub count with the deck itself wrong: all hands void, all wagers returned, the entire deck removed.",
        (*VOID_RETURN, Remedy.DECK_REMOVED),
    ),
    # 6.3 Pai Gow Poker
    Rule(
        "PGP-645a.14-a-no-roll-not-flat",
        "58 Pa. Code § 645a.14(a)",
        PGP,
        INTEG,
        'Dice not all flat: the dealer calls "no roll" and reshakes.',
        (Remedy.NO_ROLL_CALLED, Remedy.RESHAKEN),
    ),
    Rule(
        "PGP-645a.14-b-no-roll-out",
        "58 Pa. Code § 645a.14(b)",
        PGP,
        INTEG,
        'A die fell out of the shaker: the dealer calls "no roll" and reshakes.',
        (Remedy.NO_ROLL_CALLED, Remedy.RESHAKEN),
    ),
    Rule(
        "PGP-645a.14-c-wrong-total",
        "58 Pa. Code § 645a.14(c)",
        PGP,
        V,
        "Dice totalled wrongly and the first card dealt to the wrong position: all hands void, wagers returned, reshuffle.",
        VOID_RETURN_RESHUFFLE,
    ),
    Rule(
        "PGP-645a.14-d-player-card-exposed",
        "58 Pa. Code § 645a.14(d)",
        PGP,
        V,
        "A player's card exposed by the dealer: the player may void the hand, deciding without looking.",
        (Remedy.PLAYER_DECISION,),
    ),
    Rule(
        "PGP-645a.14-d-decision-after-look",
        "58 Pa. Code § 645a.14(d)",
        PGP,
        P,
        "The player decided on the exposed hand after looking at the unexposed cards.",
    ),
    Rule(
        "PGP-645a.14-e-dealer-bank-exposed",
        "58 Pa. Code § 645a.14(e)",
        PGP,
        V,
        "A card of the dealer's or bank's hand exposed: all hands void, wagers returned, reshuffle.",
        VOID_RETURN_RESHUFFLE,
    ),
    Rule(
        "PGP-645a.14-f-one-face-up",
        "58 Pa. Code § 645a.14(f)",
        PGP,
        INTEG,
        "A card found face up in the shoe or deck is not used this round and goes to the discard rack.",
    ),
    Rule(
        "PGP-645a.14-f-two-face-up",
        "58 Pa. Code § 645a.14(f)",
        PGP,
        V,
        "More than one card found face up while dealing: all hands void, wagers returned, reshuffle.",
        VOID_RETURN_RESHUFFLE,
    ),
    Rule(
        "PGP-645a.14-g-drawn-in-error",
        "58 Pa. Code § 645a.14(g)",
        PGP,
        P,
        "A card drawn in error without its face exposed is used as the next card.",
    ),
    Rule(
        "PGP-645a.14-hk-wrong-count",
        "58 Pa. Code § 645a.14(h),(k)",
        PGP,
        V,
        "A position or the dealer dealt the wrong number of cards: all hands void, wagers returned, reshuffle.",
        VOID_RETURN_RESHUFFLE,
    ),
    Rule(
        "PGP-645a.14-i-house-way",
        "58 Pa. Code § 645a.14(i)",
        PGP,
        P,
        "A dealer or bank hand not set the house way is reset per the Rules Submission before settlement.",
    ),
    Rule(
        "PGP-645a.14-j-exposed-during-stacks",
        "58 Pa. Code § 645a.14(j)",
        PGP,
        V,
        "A card exposed while dealing the seven stacks: all wagers returned, reshuffle.",
        (Remedy.WAGERS_RETURNED, Remedy.RESHUFFLE),
    ),
    Rule(
        "PGP-645a.14-l-shuffler-fault",
        "58 Pa. Code § 645a.14(l)",
        PGP,
        INTEG,
        "The automated card shuffling device jammed, stopped or failed a cycle: the cards are reshuffled.",
        (Remedy.RESHUFFLE,),
    ),
    Rule(
        "PGP-645a.14-m-shoe-fault",
        "58 Pa. Code § 645a.14(m)",
        PGP,
        V,
        "The automated dealing shoe failed: round void, wagers returned, cards removed from the device and reshuffled.",
        (*VOID_RETURN, Remedy.REMOVED_FROM_DEVICE, Remedy.RESHUFFLE),
    ),
    Rule(
        "PGP-645a.14-n-out-of-order",
        "58 Pa. Code § 645a.14(n)",
        PGP,
        P,
        "A device that cannot be used (taken out of service, or passed over for another method on a fault its own "
        "remedy had not cleared) is covered or signed out of order before another shuffle or deal method is used: "
        "each round shuffled or dealt otherwise (or with the device before its return to service) is one finding.",
    ),
    Rule(
        "PGP-645c.2-f-wager-before-shake",
        "58 Pa. Code § 645c.2(f)",
        PGP,
        INTEG,
        'Dice wagers are placed before the shaker is used, after "no more bets".',
    ),
    Rule(
        "PGP-645c.2-g-announce-dice",
        "58 Pa. Code § 645c.2(g)",
        PGP,
        P,
        "Each die's value is announced before the dice wagers are settled.",
    ),
    # 7 provisional rules
    Rule(
        "TCP-679a.8/10-stub-count-PROV",
        "58 Pa. Code § 663a.9(c)-(d), § 684a.10(c)-(d) (analog)",
        TCP,
        P,
        "The 5-round stub count also applies to shoe-dealt Three Card Prime rounds.",
        provisional=True,
    ),
    Rule(
        "ALL-shuffle-count-mismatch-PROV",
        "COMAR 36.05.03.27C (analog)",
        None,
        INTEG,
        "A counting shuffler reported a short or long deck: no deal, the deck is removed.",
        (Remedy.DECK_REMOVED,),
        provisional=True,
    ),
    Rule(
        "PGP-645a.9-shake-3x-PROV",
        "58 Pa. Code § 621a.6(a)(2) (analog)",
        PGP,
        P,
        "The shaker is shaken at least three times.",
        provisional=True,
    ),
    Rule(
        "PGP-645a.9-start-position-PROV",
        "58 Pa. Code § 621a.6(c) (analog)",
        PGP,
        INTEG,
        "The first stack goes to the position the dice total or RNG number counts to, dealer = 1, counter-clockwise.",
        provisional=True,
    ),
    Rule(
        "PGP-645a.9-rng-PROV",
        "58 Pa. Code § 621a.6(a)(1), § 645c.2(a) (analog)",
        PGP,
        P,
        "An RNG or a player-activated shaker replaces manual dice only where the Rules Submission provides.",
        provisional=True,
    ),
    Rule(
        "PGP-645a.9-stacks-PROV",
        "58 Pa. Code § 645a.14(j); WA Pai Gow Poker rules (analog)",
        PGP,
        P,
        "Seven stacks are dealt and the leftover cards go to the discard rack unexposed.",
        provisional=True,
    ),
    Rule(
        "PGP-645a.9-unwagered-stacks-PROV",
        "58 Pa. Code § 670a.10(c) (analog)",
        PGP,
        P,
        "A stack is delivered to every position, wagered or not, and to the dealer.",
        provisional=True,
    ),
    # 8a dealtrail integrity rules
    Rule(
        "DT-deck-composition",
        "dealtrail integrity rule",
        None,
        INTEG,
        "A card seen twice between two shuffles of a deck (from its ShuffleStarted), one the deck's composition does not "
        "hold, an unauthorised card added to or removed from the deck, or a floor verification that did not find it "
        "whole: the deck is compromised until removed or verified OK; a further trigger meanwhile is a new revision of "
        "the same finding.",
    ),
    Rule(
        "DT-deal-after-device-fault",
        "dealtrail integrity rule",
        None,
        INTEG,
        "A round dealt from a deck after a shuffler fault naming it (or naming no deck) or a short-deck signal of it, "
        "with no complete full-deck shuffle of that deck started since (from a counting device, one that reported the "
        "full deck; not by a device taken out of service): one finding per round.",
    ),
    Rule(
        "DT-remedy-overdue",
        "dealtrail integrity rule",
        None,
        V,
        "A voiding rule's remedy was not seen before the next round started, or before the remedy window after its "
        "round ended closed (raised at the table's first event past it).",
    ),
    Rule(
        "DT-chain-broken",
        "dealtrail integrity rule",
        None,
        INTEG,
        "The table's hash chain does not verify: an event's prev_hash is not the hash of the event before it.",
    ),
    Rule(
        "DT-sequence-gap",
        "dealtrail integrity rule",
        None,
        INTEG,
        "The table's event sequence has a gap or a conflicting duplicate: the trail is incomplete for that span.",
    ),
)

RULES_BY_ID: dict[str, Rule] = {r.rule_id: r for r in RULES}
"""Rule ID -> :class:`Rule`."""


def _package_version() -> str:
    try:
        return version("dealtrail")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


ENGINE_VERSION = f"{_package_version()}+rulebook.{RULEBOOK_REVISION}"
"""The engine that made a snapshot or a generation of findings: the package version and the
rulebook revision. A snapshot of another engine version is never a start for a replay."""


def rule(rule_id: str) -> Rule:
    """Return the catalogue entry for ``rule_id``.

    Raises:
        KeyError: the ID is not in the catalogue.
    """
    return RULES_BY_ID[rule_id]
