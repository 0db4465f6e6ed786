"""Console users, their roles and API tokens in the store (append-only revisions; the latest row is in force).

Only hashes are stored: passwords as argon2id hashes, API tokens as their SHA-256 (a token is a
random 256-bit secret, so a fast hash is enough). The hashing itself is the caller's
(``dealtrail/console/auth.py``); this module writes and reads rows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

from schemas.reviews import identity_key

ROLES = ("viewer", "reviewer", "manager", "admin")
"""Console roles, least to most: a viewer reads, a reviewer also reviews, a manager also signs
reports and approves or rejects a proposed disposition (four eyes), an admin can do what a
manager can and manages users."""
REVIEWER_ROLES = ("reviewer", "manager", "admin")
"""The roles that review findings (and so may be assigned one)."""
MANAGER_ROLES = ("manager", "admin")
"""The roles that approve or reject a proposed disposition."""


def role_at_least(role: str, least: str) -> bool:
    """Whether ``role`` is ``least`` or above it in :data:`ROLES` (viewer < reviewer < manager <
    admin); an unknown role is below every role, and an unknown ``least`` is reached by none."""
    return role in ROLES and least in ROLES and ROLES.index(role) >= ROLES.index(least)


def user(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any] | None:
    """The user's current row (name, role, password_hash, active, changed_at, must_change: the
    password is a one-time password from an admin's reset), or None."""
    cur = con.execute(
        """SELECT name, role, password_hash, active, changed_at, coalesce(must_change, false) AS must_change
           FROM dim_users WHERE name = ?""",
        [name],
    )
    rows = cur.fetchall()
    if not rows:
        return None
    return dict(zip([d[0] for d in cur.description], rows[0], strict=True))


def same_person(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    """The names of the users (any state) who are the same person as ``name``: equal in
    :func:`schemas.reviews.identity_key` form (``Rita`` for ``rita``), ``name`` itself included
    if it is a user; by name."""
    key = identity_key(name)
    rows = con.execute("SELECT name FROM dim_users ORDER BY name").fetchall()
    return [str(r[0]) for r in rows if identity_key(str(r[0])) == key]


def twins(con: duckdb.DuckDBPyConnection) -> list[list[str]]:
    """The groups of users whose names are one person (equal in :func:`schemas.reviews.identity_key`
    form: ``rita``, ``Rita``, ``RITA``), each by name, in the order of their key. A store written
    before names were unique in that form may hold them; an admin resolves them (deactivates all
    but one)."""
    groups: dict[str, list[str]] = {}
    for (name,) in con.execute("SELECT name FROM dim_users ORDER BY name").fetchall():
        groups.setdefault(identity_key(str(name)), []).append(str(name))
    return [names for _, names in sorted(groups.items()) if len(names) > 1]


def users(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every user's current row (without the hash), by name."""
    cur = con.execute("SELECT name, role, active, changed_at, changed_by FROM dim_users ORDER BY name")
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def put_user(
    con: duckdb.DuckDBPyConnection,
    name: str,
    role: str,
    password_hash: str | None,
    active: bool,
    at: datetime,
    by: str,
    must_change: bool | None = None,
) -> None:
    """Append a revision of a user (new user, new role, new password, deactivation).

    Args:
        con: the store's writer connection.
        name: the user's name.
        role: viewer, reviewer, manager or admin.
        password_hash: the argon2 hash; None keeps the current one.
        active: False locks the user out (and their tokens).
        at: when (timezone-aware).
        by: who made the change (``cli`` from the command line).
        must_change: True: ``password_hash`` is of a one-time password (an admin's reset) that
            serves only to set a new one; False: the user's own; None keeps the current state.
    """
    con.execute(
        """INSERT INTO console_users (name, role, password_hash, active, changed_at, changed_by, must_change)
           SELECT $name, $role, coalesce($hash, (SELECT password_hash FROM dim_users WHERE name = $name)),
                  $active, $at, $by,
                  coalesce($must_change, (SELECT must_change FROM dim_users WHERE name = $name), false)""",
        {
            "name": name,
            "role": role,
            "hash": password_hash,
            "active": active,
            "at": at,
            "by": by,
            "must_change": must_change,
        },
    ).fetchall()


def put_profile(con: duckdb.DuckDBPyConnection, name: str, full_name: str, title: str, at: datetime, by: str) -> None:
    """Append a revision of a user's profile: the full name and title printed with their sign-offs
    (the earlier revisions stay; the latest is in force).

    Args:
        con: the store's writer connection.
        name: the user's name (a console user).
        full_name: their full name, e.g. ``Max Keller``.
        title: their job title, e.g. ``Compliance Manager``.
        at: when (timezone-aware).
        by: who made the change (``cli`` from the command line).

    Raises:
        ValueError: no such user, or an empty full name or title.
    """
    full_name, title = " ".join(full_name.split()), " ".join(title.split())
    if not full_name or not title:
        raise ValueError("a profile has a full name and a title, neither empty")
    if user(con, name) is None:
        raise ValueError(f"no console user {name!r}")
    con.execute("INSERT INTO user_profiles VALUES (?, ?, ?, ?, ?)", [name, full_name, title, at, by]).fetchall()


def profile(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any] | None:
    """The user's profile in force (``full_name``, ``title``, ``changed_at``, ``changed_by``), or
    None when none was recorded (or the store predates profiles)."""
    try:
        cur = con.execute(
            "SELECT full_name, title, changed_at, changed_by FROM dim_user_profiles WHERE name = ?", [name]
        )
    except duckdb.CatalogException:  # a store opened read-only that no writer of this version opened yet
        return None
    rows = cur.fetchall()
    return dict(zip([d[0] for d in cur.description], rows[0], strict=True)) if rows else None


def profile_history(con: duckdb.DuckDBPyConnection, name: str) -> list[dict[str, Any]]:
    """Every revision of the user's profile, oldest first."""
    cur = con.execute(
        "SELECT full_name, title, changed_at, changed_by FROM user_profiles WHERE name = ? ORDER BY changed_at",
        [name],
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def put_token(
    con: duckdb.DuckDBPyConnection, token_hash: str, user_name: str, active: bool, at: datetime, by: str
) -> None:
    """Append a token revision (a new token, or its revocation with ``active=False``).

    Args:
        con: the store's writer connection.
        token_hash: the token's SHA-256 (hex).
        user_name: the user the token acts as.
        active: True for a new token, False for its revocation.
        at: when (timezone-aware).
        by: who wrote the row: for a new token its issuer (the user, for themselves), for a
            revocation who revoked it.
    """
    con.execute(
        "INSERT INTO api_tokens (token_hash, user_name, active, changed_at, changed_by) VALUES (?, ?, ?, ?, ?)",
        [token_hash, user_name, active, at, by],
    ).fetchall()


def token_user(con: duckdb.DuckDBPyConnection, token_hash: str) -> dict[str, Any] | None:
    """The active user an active token belongs to, or None (also for a user whose password is a
    one-time password not yet changed).

    Returns:
        ``name``, ``role`` and ``issued_by``: who made the token (:func:`token_issuer`; None when
        no record says).
    """
    rows = con.execute(
        """SELECT u.name, u.role FROM dim_api_tokens t JOIN dim_users u ON u.name = t.user_name
           WHERE t.token_hash = ? AND t.active AND u.active AND NOT coalesce(u.must_change, false)""",
        [token_hash],
    ).fetchall()
    if not rows:
        return None
    return {"name": rows[0][0], "role": rows[0][1], "issued_by": token_issuer(con, token_hash)}


def token_issuer(con: duckdb.DuckDBPyConnection, token_hash: str) -> str | None:
    """Who made a token: its first row's ``changed_by``; for a token made before that was stored,
    the user of its ``token_issued`` access-log entry (an admin's name, or ``cli``); None if
    neither says."""
    rows = con.execute(
        "SELECT changed_by FROM api_tokens WHERE token_hash = ? ORDER BY changed_at, rowid LIMIT 1", [token_hash]
    ).fetchall()
    if rows and rows[0][0] is not None:
        return str(rows[0][0])
    logged = con.execute(
        """SELECT user_name FROM access_log WHERE kind = 'token_issued' AND outcome = 'ok'
           AND starts_with(detail, ?) ORDER BY seq LIMIT 1""",
        [f"token {token_hash[:12]} of "],
    ).fetchall()
    return str(logged[0][0]) if logged else None


def tokens_of(con: duckdb.DuckDBPyConnection, user_name: str) -> list[str]:
    """The hashes of the user's active tokens."""
    rows = con.execute(
        "SELECT token_hash FROM dim_api_tokens WHERE user_name = ? AND active ORDER BY token_hash", [user_name]
    ).fetchall()
    return [str(r[0]) for r in rows]


def tokens(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every active API token (token_hash, user_name, issued_at), by user and issue time.

    The hash identifies a token on the admin page (it grants nothing: a token is checked by
    hashing it); the token itself is never stored.
    """
    cur = con.execute(
        """SELECT d.token_hash, d.user_name, min(t.changed_at) AS issued_at
           FROM dim_api_tokens d JOIN api_tokens t USING (token_hash)
           WHERE d.active GROUP BY ALL ORDER BY d.user_name, issued_at"""
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def token_issued_at(con: duckdb.DuckDBPyConnection, token_hash: str) -> datetime | None:
    """When a token was issued (its first row), or None for a token never issued."""
    rows = con.execute("SELECT min(changed_at) FROM api_tokens WHERE token_hash = ?", [token_hash]).fetchall()
    return rows[0][0] if rows else None
