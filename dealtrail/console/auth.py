"""Console access: password and token hashing, and the user/token commands' work.

Passwords are hashed with argon2id (argon2-cffi's defaults); API tokens are 32 random bytes
(URL-safe base64) stored as their SHA-256. Neither a password nor a token is ever logged or
stored in clear; a token is shown once, when it is made.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

import duckdb
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from projections.records import users
from projections.records.users import ROLES

_HASHER = PasswordHasher()
_DUMMY = _HASHER.hash("dealtrail: equalises the time of a login for an unknown user")

MIN_PASSWORD = 10
"""The shortest password ``users add`` accepts (characters)."""


class AccessError(ValueError):
    """A user command cannot be carried out (unknown user, bad role, short password)."""


def hash_password(password: str) -> str:
    """The argon2id hash of ``password`` (a PHC string with its own salt)."""
    return _HASHER.hash(password)


def verify_password(stored_hash: str | None, password: str) -> bool:
    """True if ``password`` matches ``stored_hash``; an unknown user (None) costs the same time."""
    try:
        return _HASHER.verify(stored_hash or _DUMMY, password) and stored_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def token_hash(token: str) -> str:
    """The SHA-256 (hex) under which a token is stored."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def keep_an_admin(con: duckdb.DuckDBPyConnection, name: str, role: str, active: bool) -> None:
    """Refuse a change of user ``name`` to ``role`` and ``active`` that would leave the store
    without an active admin: the demotion or deactivation of the last active admin, whichever
    way it comes (console, ``dealtrail users add``). Admins are counted as people
    (:func:`schemas.reviews.identity_key`: twins ``boss`` and ``Boss`` of an old store are one).

    Raises:
        AccessError: ``name`` is the last active admin and the change takes that away.
    """
    from schemas.reviews import identity_key

    current = users.user(con, name)
    if current is None or not (current["active"] and current["role"] == "admin"):
        return
    if active and role == "admin":
        return
    others = {identity_key(u["name"]) for u in users.users(con) if u["active"] and u["role"] == "admin"}
    others.discard(identity_key(name))
    if not others:
        raise AccessError(f"{name} is the last active admin: make another admin first")


def add_user(
    con: duckdb.DuckDBPyConnection,
    name: str,
    role: str,
    password: str,
    at: datetime,
    by: str = "cli",
    one_time: bool = False,
) -> bool:
    """Create a user or set an existing user's role and password (a new revision either way).

    Args:
        con: the store's writer connection.
        name: the user's name (letters, digits, ``._@-``; 1 to 64 characters), unique in its
            :func:`schemas.reviews.identity_key` form (``Rita`` is refused beside ``rita``).
        role: viewer, reviewer, manager or admin.
        password: at least :data:`MIN_PASSWORD` characters (never stored, only its hash).
        at: when (timezone-aware).
        by: who (``cli``, or the admin's name).
        one_time: the password is a one-time password (someone other than the user knows it):
            it serves only to set a new one at the first sign-in (:func:`change_password`).

    Returns:
        True if the user is new, False if an existing user was changed.

    Raises:
        AccessError: bad name, role or password; a new name equal to an existing user's in
            :func:`schemas.reviews.identity_key` form; the demotion of the last active admin
            (:func:`keep_an_admin`); a user who signs in through the directory (no password).
    """
    from pydantic import TypeAdapter, ValidationError

    from schemas.reviews import UserName

    try:
        TypeAdapter(UserName).validate_python(name)
    except ValidationError:
        raise AccessError(f"a user name is 1 to 64 letters, digits or ._@- (got {name!r})") from None
    if role not in ROLES:
        raise AccessError(f"role must be one of {', '.join(ROLES)} (got {role!r})")
    if len(password) < MIN_PASSWORD:
        raise AccessError(f"the password must have at least {MIN_PASSWORD} characters")
    new = users.user(con, name) is None
    if not new:
        from dealtrail.console.oidc import directory_person

        if directory_person(con, name) is not None:
            raise AccessError(f"{name} signs in through the directory: a password would be a second way in")
    others = [n for n in users.same_person(con, name) if n != name]
    if new and others:
        raise AccessError(
            f"{name!r} is the same name as the user {others[0]!r} (names that differ only in case or "
            "character form are one person): change that user instead"
        )
    keep_an_admin(con, name, role, True)
    users.put_user(con, name, role, hash_password(password), True, at, by, must_change=one_time)
    return new


def one_time_password() -> str:
    """A new random one-time password (20 characters, about 120 bits), for an admin's reset."""
    return secrets.token_urlsafe(15)


def reset_password(
    con: duckdb.DuckDBPyConnection, name: str, role: str, at: datetime, by: str
) -> tuple[bool, str, str]:
    """An admin's reset (or new account): a random one-time password the admin hands over, which
    serves only to set a new password at the first sign-in; nothing else is done with it (no
    review, approval or sign-off: :func:`projections.records.users.user`'s ``must_change``).
    An admin never chooses another person's password, so no one can sign in as another with a
    password they know. For an existing user, the one-time code is removed and the API tokens
    revoked (:func:`password_reset_note`), and every session ends (a new revision of the user).

    Args:
        con: the store's writer connection.
        name: the user.
        role: the user's role (a new user's, or the role set with the reset).
        at: when (timezone-aware).
        by: the admin's name (or ``cli``).

    Returns:
        ``(new, password, note)``: whether the user is new, the one-time password (shown once,
        never stored in clear) and the words the access entry adds.

    Raises:
        AccessError: as :func:`add_user`.
    """
    password = one_time_password()
    new = add_user(con, name, role, password, at, by=by, one_time=True)
    note = "" if new else password_reset_note(con, name, at, by)
    return new, password, note + "; one-time password, to be changed at first sign-in"


def change_password(con: duckdb.DuckDBPyConnection, name: str, old: str, new: str, repeated: str, at: datetime) -> None:
    """A user sets their own password (after a reset's one-time password, or any time signed in).

    Args:
        con: the store's writer connection.
        name: the user (as stored).
        old: the password now (the one-time password after a reset).
        new: the new password (at least :data:`MIN_PASSWORD` characters, not the old one).
        repeated: ``new`` typed again.
        at: when (timezone-aware).

    Raises:
        AccessError: no active user, a wrong current password, a new password too short, not
            repeated alike or equal to the current one.
    """
    u = users.user(con, name)
    if not verify_password(u["password_hash"] if u and u["active"] else None, old) or u is None:
        raise AccessError("that is not your current password")
    if len(new) < MIN_PASSWORD:
        raise AccessError(f"the new password must have at least {MIN_PASSWORD} characters")
    if new != repeated:
        raise AccessError("the two new passwords differ")
    if new == old:
        raise AccessError("the new password must differ from the one you signed in with")
    users.put_user(con, name, str(u["role"]), hash_password(new), True, at, name, must_change=False)


def new_token(con: duckdb.DuckDBPyConnection, name: str, at: datetime) -> str:
    """Make an API token of an active user, for themselves: it acts only as ``name`` and is
    recorded as issued by ``name`` (the caller has made sure the user asked: a signed-in user on
    the console, or the user's password on the command line). Only its hash is stored.

    Returns:
        The token (shown to the user once; it cannot be recovered).

    Raises:
        AccessError: no active user of that name, or one holding a one-time password.
    """
    u = users.user(con, name)
    if u is None or not u["active"]:
        raise AccessError(f"no active user {name!r} (add one with: dealtrail users add {name} --role ROLE)")
    if u["must_change"]:
        raise AccessError(f"{name} holds a one-time password from a reset: sign in and set your own password first")
    token = "dt_" + secrets.token_urlsafe(32)
    users.put_token(con, token_hash(token), name, True, at, by=name)
    return token


def revoke_tokens(con: duckdb.DuckDBPyConnection, name: str, at: datetime, by: str) -> int:
    """Revoke every active token of ``name`` (a password reset ends the user's tokens as it ends
    the sessions); returns how many were revoked."""
    held = users.tokens_of(con, name)
    for digest in held:
        users.put_token(con, digest, name, False, at, by=by)
    return len(held)


def password_reset_note(con: duckdb.DuckDBPyConnection, name: str, at: datetime, by: str) -> str:
    """After a new password was set for an existing user: remove the one-time code (a lost phone)
    and revoke the user's API tokens; the words the access entry adds (empty if neither)."""
    from projections.records import access_log

    words = "; one-time code removed" if access_log.drop_totp(con, name, at) else ""
    revoked = revoke_tokens(con, name, at, by)
    if revoked:
        words += f"; {revoked} API token{'s' if revoked != 1 else ''} revoked"
    return words
