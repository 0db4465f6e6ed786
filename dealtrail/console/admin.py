"""The admin page: users (add, role, password, deactivate, unlock) and API tokens (make, revoke),
for admins only. An admin makes API tokens only for himself (a token acts only as the user who
made it); a password reset ends the user's sessions and tokens. An admin never chooses another
person's password: a new user and a reset get a random one-time password, shown once, that
serves only to set a new password at the first sign-in (``/account/password``). Every change is written under the
store's write lock and recorded in the access log. A refused change shows the page again with the
reason beside its form and the typed name and role kept (never the password); no admin can
deactivate or demote himself or the last active admin."""

from __future__ import annotations

from typing import Annotated, Literal

import duckdb
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse

from dealtrail.console import auth
from dealtrail.console.deps import Console, Cursor, PageUser, User
from dealtrail.console.oidc import directory_person
from projections.records import users
from projections.records.users import role_at_least
from schemas.reviews import identity_key


def _last_admin_guard(con: duckdb.DuckDBPyConnection, actor: str, name: str, role: str, active: bool) -> None:
    """Refuse taking the admin role (demotion, deactivation) from oneself or the last active admin.

    Raises:
        auth.AccessError: the change would leave no active admin (:func:`auth.keep_an_admin`), or
            it is the admin's own.
    """
    current = users.user(con, name)
    if current is None or not (current["active"] and role_at_least(str(current["role"]), "admin")):
        return
    if active and role_at_least(role, "admin"):
        return
    if identity_key(name) == identity_key(actor):
        raise auth.AccessError("you cannot demote or deactivate yourself: ask another admin")
    auth.keep_an_admin(con, name, role, active)


def router(console: Console) -> APIRouter:
    """The routes of ``/admin/users`` (none in the API's document)."""
    routes = APIRouter()
    config, render, check_csrf = console.config, console.render, console.check_csrf
    store, write_lock = console.store, console.write_lock

    def admin_view(
        request: Request,
        user: User,
        con: duckdb.DuckDBPyConnection,
        status_code: int = 200,
        token: str | None = None,
        message: str | None = None,
        failed: dict[str, str] | None = None,
        one_time: dict[str, str] | None = None,
    ) -> HTMLResponse:
        """The admin page: every user and token, a new token shown once, the outcome of a change;
        ``failed`` (op, name, role, error) puts a refusal beside the form it came from."""
        twins = users.twins(con)
        return render(
            request,
            "admin.html.j2",
            user,
            status_code,
            users=users.users(con),
            tokens=users.tokens(con),
            roles=users.ROLES,
            token=token,
            one_time=one_time,
            message=None if failed else message,
            failed=failed or {},
            locked=console.guard.locked(config.clock()),
            twins=twins,
            twinned={n: [o for o in group if o != n] for group in twins for n in group},
        )

    @routes.get("/admin/users", include_in_schema=False)
    def admin_page(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        if not user.is_admin:
            raise HTTPException(403, "only an admin manages users")
        return admin_view(request, user, con)

    @routes.post("/admin/users", include_in_schema=False)
    def admin_change(
        request: Request,
        user: PageUser,
        con: Cursor,
        csrf: Annotated[str, Form()],
        op: Annotated[Literal["add", "role", "password", "deactivate", "token", "revoke", "unlock"], Form()],
        name: Annotated[str, Form(max_length=64)] = "",
        role: Annotated[str, Form()] = "viewer",
        password: Annotated[str, Form(max_length=1024)] = "",
        token_hash: Annotated[str, Form(max_length=64)] = "",
    ) -> HTMLResponse:
        check_csrf(request, csrf)
        if not user.is_admin:
            raise HTTPException(403, "only an admin manages users")
        token = None
        one_time: dict[str, str] | None = None  # a reset's one-time password, shown once
        now = config.clock()
        logged: tuple[str, str, str] | None = None  # kind, user, detail of the access entry
        try:
            if password:
                raise auth.AccessError(
                    "an admin does not choose another person's password: a reset gives a one-time password "
                    "that serves only to set a new one"
                )
            with write_lock:
                if op == "unlock":
                    was = console.guard.unlock(name)
                    logged = ("user_unlocked", user.name, name)
                    message = f"{name} unlocked" if was else f"{name} was not locked; its failure count is reset"
                elif op == "add":
                    _last_admin_guard(store.con, user.name, name, role, True)
                    new, secret, ended = auth.reset_password(store.con, name, role, now, user.name)
                    logged = ("user_added", user.name, f"{name} as {role}{ended}")
                    if not new:
                        logged = ("password_reset", user.name, f"{name}, role {role}{ended}")
                    one_time = {"name": name, "password": secret}
                    message = f"user {name} saved with role {role} and a one-time password"
                else:
                    current = users.user(store.con, name)
                    if current is None:
                        raise auth.AccessError(f"no user {name!r}")
                    if op == "role":
                        if role not in users.ROLES:
                            raise auth.AccessError(f"role must be one of {', '.join(users.ROLES)}")
                        _last_admin_guard(store.con, user.name, name, role, bool(current["active"]))
                        users.put_user(store.con, name, role, None, bool(current["active"]), now, user.name)
                        logged = ("role_changed", user.name, f"{name}: {current['role']} -> {role}")
                        message = f"{name} is now {role}"
                    elif op == "password":
                        if directory_person(store.con, name) is not None:
                            raise auth.AccessError(
                                f"{name} signs in through the directory: a password would be a second way in"
                            )
                        _, secret, ended = auth.reset_password(store.con, name, str(current["role"]), now, user.name)
                        logged = ("password_reset", user.name, name + ended)
                        one_time = {"name": name, "password": secret}
                        message = f"password of {name} reset to a one-time password"
                    elif op == "revoke":
                        held = [t for t in users.tokens(store.con) if t["token_hash"] == token_hash]
                        if not held or held[0]["user_name"] != name:
                            raise auth.AccessError(f"no active token {token_hash[:12]} of {name}")
                        users.put_token(store.con, token_hash, name, False, now, by=user.name)
                        logged = ("token_revoked", user.name, f"token {token_hash[:12]} of {name}")
                        message = f"token {token_hash[:12]} of {name} revoked: it no longer opens the API"
                    elif op == "deactivate":
                        if name == user.name:
                            raise auth.AccessError("you cannot deactivate yourself")
                        _last_admin_guard(store.con, user.name, name, str(current["role"]), False)
                        users.put_user(store.con, name, current["role"], None, False, now, user.name)
                        logged = ("user_deactivated", user.name, name)
                        message = f"{name} can no longer sign in or use a token"
                    else:
                        if identity_key(name) != identity_key(user.name):
                            raise auth.AccessError(
                                f"a token acts only as the user who made it: {name} makes their own "
                                "(signed in, or with dealtrail users token and their password)"
                            )
                        token = auth.new_token(store.con, user.name, now)
                        logged = ("token_issued", user.name, f"token {auth.token_hash(token)[:12]} of {name}")
                        message = f"API token for {name} (shown once, copy it now)"
        except auth.AccessError as exc:
            console.access.record(f"admin_{op}", user.name, "refused", f"{name}: {exc}")
            failed = {"op": op, "name": name, "role": role, "error": str(exc)}
            return admin_view(request, user, con, 422, message=str(exc), failed=failed)
        if logged is not None:
            console.access.record(logged[0], logged[1], "ok", logged[2])
        return admin_view(request, user, con, token=token, message=message, one_time=one_time)

    return routes
