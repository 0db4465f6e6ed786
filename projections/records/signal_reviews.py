"""Reviews of control-chart signals (issue 50): a signal is a review item, not a verdict. Each
action (acknowledge, note, close, reopen) is a new row of ``signal_reviews`` with who and when;
the signal's status is the latest status-changing action (a note changes none): ``open`` until
acknowledged, ``closed`` once closed, ``open`` again when reopened.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb
from ulid import ULID

ACTIONS = ("acknowledge", "note", "close", "reopen")
"""What a reviewer does with a signal."""
STATUS_OF = {"acknowledge": "acknowledged", "close": "closed", "reopen": "open"}
"""The status each status-changing action leaves the signal in."""
MAX_NOTE = 2000
"""The longest note (characters)."""


class SignalReviewError(ValueError):
    """An unknown action, a bad signal ID, or a note too long, missing (a note, a close) or unprintable."""


def history(con: duckdb.DuckDBPyConnection, signal_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each signal's reviews, oldest first (``review_id``, ``action``, ``note``, ``user_name``,
    ``reviewed_at``); a signal without review has none."""
    if not signal_ids:
        return {}
    cur = con.execute(
        """SELECT signal_id, review_id, action, note, user_name, reviewed_at FROM signal_reviews
           WHERE signal_id IN (SELECT unnest($ids::VARCHAR[])) ORDER BY reviewed_at, rowid""",
        {"ids": signal_ids},
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for sid, rid, action, note, user, at in cur.fetchall():
        out.setdefault(str(sid), []).append(
            {"review_id": rid, "action": action, "note": note, "user_name": user, "reviewed_at": at}
        )
    return out


def status(reviews: list[dict[str, Any]]) -> str:
    """A signal's status from its reviews (oldest first): ``open``, ``acknowledged`` or ``closed``."""
    current = "open"
    for r in reviews:
        current = STATUS_OF.get(str(r["action"]), current)
    return current


def record(con: duckdb.DuckDBPyConnection, signal_id: str, action: str, note: str, by: str, at: datetime) -> str:
    """Record a review action on a signal (a new row).

    Args:
        con: the store's writer connection.
        signal_id: the signal (:func:`projections.models.control.signal_id`).
        action: one of :data:`ACTIONS`.
        note: the reviewer's words; required for ``note`` and ``close``.
        by: the reviewer.
        at: when (timezone-aware).

    Returns:
        The review's ID.

    Raises:
        SignalReviewError: see the class.
    """
    if action not in ACTIONS:
        raise SignalReviewError(f"action must be one of {', '.join(ACTIONS)}")
    if not signal_id or len(signal_id) > 400 or not signal_id.isprintable():
        raise SignalReviewError("not a signal")
    note = note.strip()
    if len(note) > MAX_NOTE or not note.replace("\n", " ").isprintable():
        raise SignalReviewError(f"a note is at most {MAX_NOTE} printable characters")
    if action in ("note", "close") and not note:
        raise SignalReviewError(f"{action} needs a note saying what was looked at")
    review_id = str(ULID())
    con.execute(
        "INSERT INTO signal_reviews VALUES ($1, $2, $3, $4, $5, $6)", [review_id, signal_id, action, note, by, at]
    ).fetchall()
    return review_id
