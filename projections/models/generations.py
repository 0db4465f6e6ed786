"""Generations of findings: what a re-audit (``dealtrail reaudit``) added, withdrew and changed
per rule against the generation before, for its printout and the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import duckdb


@dataclass
class RuleDiff:
    """How one rule's finding revisions changed from the previous generation to the new one.

    Attributes:
        rule_id: the rule.
        added / withdrawn / changed / unchanged: finding revisions (finding_id, revision) in the
            new generation only, in the previous one only, in both with other content (status,
            severity, message, evidence), in both alike.
        rounds_added / rounds_withdrawn / rounds_changed: ``table_id/round_id`` of those (the
            round's replay: ``dealtrail replay --table T --round R``), at most ``ROUND_LINKS``.
    """

    rule_id: str
    added: int = 0
    withdrawn: int = 0
    changed: int = 0
    unchanged: int = 0
    rounds_added: list[str] = field(default_factory=list)
    rounds_withdrawn: list[str] = field(default_factory=list)
    rounds_changed: list[str] = field(default_factory=list)

    @property
    def moved(self) -> bool:
        """True if the rule gained, lost or changed a finding revision."""
        return bool(self.added or self.withdrawn or self.changed)


ROUND_LINKS = 10
"""Rounds listed per rule and kind of change."""


@dataclass(frozen=True)
class GenerationInfo:
    """One generation of the store (``generations``; generation 1 is what the audit wrote).

    Attributes:
        generation: its number; previous: the one it was compared with (None for 1).
        created_at / rulebook_revision / engine_version / scope: from its row (None for 1).
        latest: the store's latest generation.
    """

    generation: int
    latest: int
    previous: int | None = None
    created_at: datetime | None = None
    rulebook_revision: int | None = None
    engine_version: str | None = None
    scope: str | None = None


def _has_generations(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'generations'").fetchall()
    return bool(rows[0][0])


def generation_info(con: duckdb.DuckDBPyConnection, generation: int | None = None) -> GenerationInfo:
    """The generation ``generation`` (None: the latest) of the store.

    Raises:
        LookupError: the store has no such generation.
    """
    if generation not in (None, 1) and not _has_generations(con):
        raise LookupError(f"the store has no generation {generation} (it holds generation 1 only)")
    try:
        latest_row = con.execute("SELECT coalesce(max(generation), 1) FROM generations").fetchall()
    except duckdb.CatalogException:  # a store no writer has opened since generations came
        latest_row = [(1,)]
    latest = int(latest_row[0][0])
    wanted = latest if generation is None else generation
    if wanted == 1:
        return GenerationInfo(1, latest)
    rows = con.execute(
        """SELECT previous, created_at, rulebook_revision, engine_version, scope FROM generations
           WHERE generation = ?""",
        [wanted],
    ).fetchall()
    if not rows:
        raise LookupError(f"the store has no generation {wanted} (generations 1 to {latest})")
    previous, created_at, revision, engine, scope = rows[0]
    return GenerationInfo(wanted, latest, int(previous), created_at, int(revision), str(engine), str(scope))


def generation_revisions(con: duckdb.DuckDBPyConnection, generation: int) -> list[int]:
    """The rulebook revisions that judged the findings of ``generation`` (its findings'
    ``rulebook_revision``, ascending; empty for a generation with no finding)."""
    rows = con.execute(
        "SELECT DISTINCT rulebook_revision FROM findings WHERE generation = ? ORDER BY 1", [generation]
    ).fetchall()
    return [int(r[0]) for r in rows if r[0] is not None]


def generation_diff(con: duckdb.DuckDBPyConnection, generation: int, previous: int) -> list[RuleDiff]:
    """Per rule, the finding revisions ``generation`` added, withdrew, changed and kept against
    ``previous`` (see :class:`RuleDiff`), rules in ID order.

    Args:
        con: a connection to the store (read-only is enough).
        generation: the newer generation.
        previous: the generation it is compared with.
    """
    rows = con.execute(
        """WITH n AS (SELECT * FROM findings WHERE generation = $g),
                p AS (SELECT * FROM findings WHERE generation = $p),
                j AS (
                    SELECT coalesce(n.rule_id, p.rule_id) AS rule_id,
                           coalesce(n.table_id, p.table_id) || '/' || coalesce(n.round_id, p.round_id, '-') AS round,
                           CASE WHEN p.finding_id IS NULL THEN 'added'
                                WHEN n.finding_id IS NULL THEN 'withdrawn'
                                WHEN (n.status, n.severity, n.message, n.evidence_event_ids, n.late)
                                     IS DISTINCT FROM (p.status, p.severity, p.message, p.evidence_event_ids, p.late)
                                     THEN 'changed'
                                ELSE 'unchanged' END AS kind
                    FROM n FULL OUTER JOIN p USING (finding_id, revision)
                )
           SELECT rule_id, kind, count(*), list(DISTINCT round ORDER BY round)[1:$links]
           FROM j GROUP BY ALL ORDER BY rule_id, kind""",
        {"g": generation, "p": previous, "links": ROUND_LINKS},
    ).fetchall()
    out: dict[str, RuleDiff] = {}
    for rule_id, kind, n, rounds in rows:
        d = out.setdefault(str(rule_id), RuleDiff(str(rule_id)))
        setattr(d, str(kind), int(n))
        if kind != "unchanged":
            setattr(d, f"rounds_{kind}", [str(r) for r in rounds])
    return list(out.values())
