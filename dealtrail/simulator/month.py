"""A month of a floor's rounds and incidents at the grain the control charts read (issue 50).

The event simulator (:mod:`dealtrail.simulator.floor`) deals every card: about 100 thousand events
per table-day, so a month of a floor takes hours to simulate and audit. The control charts read
only who dealt each round, when it completed, and the incidents raised in it by category; this
module writes exactly those rows (``rounds`` and revision 0 of ``findings``, from which the
store's ``sum_findings`` summary is built as the writer builds it), for a month in seconds.

Each table is open around the clock with three 8-hour shifts a day (starting 06:00, 14:00 and
22:00 local time), each dealt by its own dealer every day (``D-<table>-<1|2|3>``). A shift deals
``rounds_per_shift`` rounds give or take a fifth, and one shift in ``short_every`` closes early
with a few dozen rounds (a point drawn hollow). Each round carries an incident of a category with
probability ``rate / 1000``, times the shift's own factor (a gamma draw of mean 1 and coefficient
of variation ``overdispersion``: busy nights, new decks, the variation between shifts that is not
Poisson's) times the dealer's raise if the round falls in a :class:`Raise`. Same spec, same rows.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pyarrow as pa

from streams.engine.catalog import RULES_BY_ID

CATEGORIES = ("voiding", "procedural", "integrity")


@dataclass(frozen=True)
class Raise:
    """A dealer's error rate multiplied by ``factor`` for rounds completed in ``[start, end)``."""

    dealer_id: str
    start: datetime
    end: datetime
    factor: float


@dataclass(frozen=True)
class MonthSpec:
    """What to simulate.

    Attributes:
        tables: tables on the floor (TCP-01, C691-01, PGP-01, TCP-02, ...).
        days: days simulated.
        start: local midnight of the first day (timezone-aware, in ``tz``).
        tz: the casino's zone (shifts are on its wall clock).
        seed: seed of every random choice.
        rates: incidents per 1,000 rounds per category (voiding, procedural, integrity).
        rounds_per_shift: rounds a shift deals on average.
        short_every: one shift in this many closes early (0: none).
        overdispersion: the coefficient of variation of a shift's own factor (0: Poisson).
        raises: dealers whose rate is raised for a while.
    """

    tables: int = 8
    days: int = 30
    start: datetime = datetime(2026, 11, 2, tzinfo=ZoneInfo("UTC"))
    tz: str = "UTC"
    seed: int = 50
    rates: tuple[float, float, float] = (1.0, 3.0, 1.0)
    rounds_per_shift: int = 600
    short_every: int = 40
    overdispersion: float = 0.15
    raises: Sequence[Raise] = field(default_factory=tuple)


def _table_ids(n: int) -> list[tuple[str, str]]:
    games = ("TCP", "C691", "PGP")
    return [(f"{games[i % 3]}-{i // 3 + 1:02d}", games[i % 3]) for i in range(n)]


def _rules() -> dict[tuple[str, str], list[str]]:
    """Rule IDs per (game, severity), so each incident names a rule of its table's game."""
    out: dict[tuple[str, str], list[str]] = {}
    for r in RULES_BY_ID.values():
        if r.game is not None:
            out.setdefault((r.game.value, r.severity.value), []).append(r.rule_id)
    return out


def rows(spec: MonthSpec) -> tuple[pa.Table, pa.Table]:
    """The month's rounds and findings (revision 0) as Arrow tables with the store's columns.

    Returns:
        ``(rounds, findings)``.
    """
    rnd = random.Random(spec.seed)
    zone = ZoneInfo(spec.tz)
    rules = _rules()
    rounds: list[dict[str, object]] = []
    findings: list[dict[str, object]] = []
    for table_id, game in _table_ids(spec.tables):
        round_no = 0
        for day in range(spec.days):
            local_day = (spec.start.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0)).replace(
                tzinfo=None
            ) + timedelta(days=day)
            for shift in range(3):
                begin = (local_day + timedelta(hours=6 + 8 * shift)).replace(tzinfo=zone)
                finish = (local_day + timedelta(hours=14 + 8 * shift)).replace(tzinfo=zone)
                dealer = f"D-{table_id}-{shift + 1}"
                n = max(1, round(rnd.gauss(spec.rounds_per_shift, spec.rounds_per_shift / 5)))
                if spec.short_every and rnd.randrange(spec.short_every) == 0:
                    n = rnd.randint(20, 80)
                cv = spec.overdispersion
                factor = rnd.gammavariate(1 / cv**2, cv**2) if cv > 0 else 1.0
                span = (finish - begin).total_seconds()
                for i in range(n):
                    round_no += 1
                    done = begin + timedelta(seconds=span * (i + 0.5) / n)
                    started = done - timedelta(seconds=min(60.0, span / n / 2))
                    round_id = f"{table_id}-{spec.seed}-R{round_no:06d}"
                    rounds.append(_round(table_id, round_id, game, round_no, dealer, started, done))
                    raised = next(
                        (r.factor for r in spec.raises if r.dealer_id == dealer and r.start <= done < r.end), 1.0
                    )
                    for cat, rate in zip(CATEGORIES, spec.rates, strict=True):
                        if rnd.random() < rate / 1000 * factor * raised:
                            rule = rnd.choice(rules[(game, cat)])
                            fid = hashlib.sha256(f"{spec.seed}:{round_id}:{cat}".encode()).hexdigest()[:32]
                            findings.append(_finding(fid, rule, game, cat, table_id, round_id, started))
    return pa.Table.from_pylist(rounds), pa.Table.from_pylist(findings)


def _round(
    table_id: str, round_id: str, game: str, round_no: int, dealer: str, started: datetime, done: datetime
) -> dict[str, object]:
    return {
        "table_id": table_id,
        "round_id": round_id,
        "game": game,
        "round_no": round_no,
        "dealer_id": dealer,
        "dealing_method": "HAND",
        "deck_id": None,
        "started_at": started,
        "completed_at": done,
        "started_event_id": f"{round_id}-start",
        "completed_event_id": f"{round_id}-done",
        "exempt_from_stub_count": True,
        "stub_counted": False,
        "rounds_since_stub_count": 0,
        "voided": False,
        "cards_dealt": 0,
        "wagers": 0,
        "deck_suspect": False,
    }


def _finding(
    finding_id: str, rule_id: str, game: str, severity: str, table_id: str, round_id: str, at: datetime
) -> dict[str, object]:
    spec = RULES_BY_ID[rule_id]
    return {
        "finding_id": finding_id,
        "revision": 0,
        "rule_id": rule_id,
        "citation": spec.citation,
        "game": game,
        "severity": severity,
        "provisional": False,
        "table_id": table_id,
        "round_id": round_id,
        "status": "open",
        "message": f"simulated: {spec.summary}",
        "required_remedy": None,
        "evidence_event_ids": [f"{round_id}-start"],
        "trigger_event_id": f"{round_id}-start",
        "observed_at": at,
        "remedy_event_ids": [],
        "remedy_delay_seconds": None,
        "late": False,
        "rulebook_revision": 1,
    }


def write_month(path: str, spec: MonthSpec) -> tuple[int, int]:
    """Write the month into the store at ``path`` (made if missing): :func:`write_rows` of :func:`rows`.

    Returns:
        ``(rounds, findings)`` written.
    """
    rounds, findings = rows(spec)
    write_rows(path, rounds, findings)
    return rounds.num_rows, findings.num_rows


def write_rows(path: str, rounds: pa.Table, findings: pa.Table) -> None:
    """Append rounds and findings (the store's columns) to the store at ``path`` through its
    writer, in one transaction, with the ``sum_findings`` summary of their findings built as the
    writer builds it (generation 1)."""
    from projections.store import summaries
    from projections.store.store import Store

    with Store(path) as store:
        con = store.con.cursor()
        con.register("month_rounds", rounds)
        con.register("month_findings", findings)
        con.execute("BEGIN TRANSACTION")
        con.execute("INSERT INTO rounds BY NAME SELECT * FROM month_rounds")
        if findings.num_rows:
            con.execute("INSERT INTO findings BY NAME SELECT * FROM month_findings")
        summaries.build_findings(con, 1)
        con.execute("COMMIT")
        con.close()


def dealers(spec: MonthSpec) -> Iterator[str]:
    """The dealers of the month (three per table)."""
    for table_id, _ in _table_ids(spec.tables):
        for shift in range(3):
            yield f"D-{table_id}-{shift + 1}"
