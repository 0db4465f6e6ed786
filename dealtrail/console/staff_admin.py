"""The staff roster's admin page (``/admin/staff``): add a dealer or supervisor, change a name or
role, deactivate or reactivate, for admins only, each change a roster event
(``StaffMemberRecorded``) with who made it and when. Nothing is overwritten: the page shows the
roster in force (the latest revision per ID) and the latest changes.

Under ``dealtrail serve`` the console is the store's writer and stores the event under the write
lock; in the streaming deployment (``dealtrail project --serve``) the event is published to the
staff topic (``app.state.staff_sink``), from which the projector stores it, as reviews travel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Literal

import duckdb
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError
from ulid import ULID

from dealtrail.console.deps import Console, Cursor, PageUser, User
from projections.records import staff
from schemas.staff import StaffMemberRecorded

StaffSink = Callable[[Sequence[StaffMemberRecorded]], None]
"""Where roster events go instead of the store (the streaming deployment's staff topic); it
raises when the broker did not take them."""


def router(console: Console) -> APIRouter:
    """The routes of ``/admin/staff`` (none in the API's document)."""
    routes = APIRouter()
    config, render, check_csrf = console.config, console.render, console.check_csrf

    def view(
        request: Request,
        user: User,
        con: duckdb.DuckDBPyConnection,
        status_code: int = 200,
        message: str | None = None,
        error: str | None = None,
        typed: dict[str, str] | None = None,
    ) -> HTMLResponse:
        return render(
            request,
            "staff.html.j2",
            user,
            status_code,
            roster=staff.roster(con),
            changes=staff.history(con, limit=50),
            message=message,
            error=error,
            typed=typed or {"staff_id": "", "name": "", "role": "dealer"},
            queued=getattr(request.app.state, "staff_sink", None) is not None,
        )

    def admin_only(user: User) -> None:
        if not user.is_admin:
            raise HTTPException(403, "only an admin manages the staff roster")

    @routes.get("/admin/staff", include_in_schema=False)
    def staff_page(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        admin_only(user)
        return view(request, user, con)

    @routes.post("/admin/staff", include_in_schema=False)
    def staff_change(
        request: Request,
        user: PageUser,
        con: Cursor,
        csrf: Annotated[str, Form()],
        op: Annotated[Literal["save", "deactivate", "reactivate"], Form()],
        staff_id: Annotated[str, Form(max_length=128)],
        name: Annotated[str, Form(max_length=200)] = "",
        role: Annotated[str, Form(max_length=20)] = "",
    ) -> HTMLResponse:
        check_csrf(request, csrf)
        admin_only(user)
        typed = {"staff_id": staff_id, "name": name, "role": role or "dealer"}
        now = staff.current(con).get(staff_id.strip())
        if op != "save" and now is None:
            return view(request, user, con, 422, error=f"no staff member {staff_id!r} on the roster", typed=typed)
        # save: add, or change the name or role (the state stays as it is); else set the state
        active = (now is None or bool(now["active"])) if op == "save" else op == "reactivate"
        try:
            event = staff.revision(
                now,
                change_id=str(ULID()),
                staff_id=staff_id.strip(),
                name=name if op == "save" else str(now["name"]) if now else "",
                role=role if op == "save" else str(now["role"]) if now else "",
                active=active,
                recorded_by=user.name,
                recorded_at=config.clock(),
                source="console",
            )
        except ValidationError as exc:
            said = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
            return view(request, user, con, 422, error=said, typed=typed)
        if event is None:
            return view(request, user, con, message=f"{staff_id} is unchanged")
        sink: StaffSink | None = getattr(request.app.state, "staff_sink", None)
        if sink is not None:
            try:
                sink([event])
            except Exception as exc:  # the broker did not take it: say so, nothing recorded
                return view(
                    request, user, con, 503, error=f"the change was not recorded, try again: {exc}", typed=typed
                )
            done = f"{event.staff_id}: {event.change} (sent to the staff topic: shown once the projector stored it)"
            return view(request, user, con, message=done)
        with console.write_lock:
            staff.append(console.store.con, [event])
        return view(
            request, user, con, message=f"{staff.label(event.staff_id, {event.staff_id: event.name})}: {event.change}"
        )

    return routes
