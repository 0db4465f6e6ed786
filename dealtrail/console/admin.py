"""The admin page: users (add, role, password, deactivate) and their API tokens (make, revoke),
for admins only; every change is written under the store's write lock."""

from __future__ import annotations

from typing import Annotated, Literal

import duckdb
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse

from dealtrail.console import auth
from dealtrail.console.deps import Console, Cursor, PageUser, User
from projections import access, reviews


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
    ) -> HTMLResponse:
        """The admin page: every user and token, a new token shown once, the outcome of a change."""
        return render(
            request,
            "admin.html.j2",
            user,
            status_code,
            users=access.users(con),
            tokens=access.tokens(con),
            roles=reviews.ROLES,
            token=token,
            message=message,
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
        op: Annotated[Literal["add", "role", "password", "deactivate", "token", "revoke"], Form()],
        name: Annotated[str, Form(max_length=64)],
        role: Annotated[str, Form()] = "viewer",
        password: Annotated[str, Form(max_length=1024)] = "",
        token_hash: Annotated[str, Form(max_length=64)] = "",
    ) -> HTMLResponse:
        check_csrf(request, csrf)
        if not user.is_admin:
            raise HTTPException(403, "only an admin manages users")
        token = None
        now = config.clock()
        try:
            with write_lock:
                if op == "add":
                    auth.add_user(store.con, name, role, password, now, by=user.name)
                    message = f"user {name} saved with role {role}"
                else:
                    current = access.user(store.con, name)
                    if current is None:
                        raise auth.AccessError(f"no user {name!r}")
                    if op == "role":
                        if role not in reviews.ROLES:
                            raise auth.AccessError(f"role must be one of {', '.join(reviews.ROLES)}")
                        access.put_user(store.con, name, role, None, bool(current["active"]), now, user.name)
                        message = f"{name} is now {role}"
                    elif op == "password":
                        auth.add_user(store.con, name, current["role"], password, now, by=user.name)
                        message = f"password of {name} reset"
                    elif op == "revoke":
                        held = [t for t in access.tokens(store.con) if t["token_hash"] == token_hash]
                        if not held or held[0]["user_name"] != name:
                            raise auth.AccessError(f"no active token {token_hash[:12]} of {name}")
                        access.put_token(store.con, token_hash, name, False, now)
                        message = f"token {token_hash[:12]} of {name} revoked: it no longer opens the API"
                    elif op == "deactivate":
                        if name == user.name:
                            raise auth.AccessError("you cannot deactivate yourself")
                        access.put_user(store.con, name, current["role"], None, False, now, user.name)
                        message = f"{name} can no longer sign in or use a token"
                    else:
                        token = auth.new_token(store.con, name, now)
                        message = f"API token for {name} (shown once, copy it now)"
        except auth.AccessError as exc:
            return admin_view(request, user, con, 422, message=str(exc))
        return admin_view(request, user, con, token=token, message=message)

    return routes
