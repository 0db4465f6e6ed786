"""Bulk review from the findings page: acknowledge or assign the findings ticked in its list.

One CSRF-protected form posts the ticked finding IDs; each finding gets its own review event
(``FindingAcknowledged`` or ``FindingAssigned``), recorded as a single review would be (the store,
or the reviews topic in the streaming deployment), so its history reads as if reviewed alone.
Everything is checked before the first event is recorded: an unknown finding, an assignee who
cannot review or a viewer's form records nothing.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from dealtrail.console.api_models import ReviewRequest
from dealtrail.console.deps import Console, Cursor, PageUser, invalid, query_string
from projections.records import users
from projections.records.users import REVIEWER_ROLES

MAX_BULK = 500
"""The most findings one bulk form may name (the findings page lists 50 a page)."""

_BACK = ("from", "to", "game", "table", "dealer", "rule", "severity", "status", "review", "kind", "mine", "sort",
         "order")  # fmt: skip
"""The findings page's query values a bulk form carries back to the list it came from."""


def router(console: Console) -> APIRouter:
    """The route ``POST /findings/bulk-reviews`` (not in the API's document)."""
    routes = APIRouter()

    @routes.post("/findings/bulk-reviews", include_in_schema=False)
    async def bulk_reviews(
        request: Request,
        user: PageUser,
        con: Cursor,
        csrf: Annotated[str, Form()],
        action: Annotated[Literal["acknowledge", "assign"], Form()],
        finding_id: Annotated[list[str], Form(max_length=MAX_BULK)],
        assignee: Annotated[str, Form(max_length=64)] = "",
    ) -> Response:
        """Acknowledge or assign each ticked finding: one review event per finding, then back to
        the list with how many were recorded.

        Raises:
            HTTPException: 403 for a viewer or a stale form; 404 for an unknown finding.
            RequestValidationError: 422 for no finding ticked, or an assignee who cannot review.
        """
        ids = list(dict.fromkeys(finding_id))  # each finding once, in the list's order
        shown = ", ".join(i[:40] for i in ids[:3]) + (", ..." if len(ids) > 3 else "")
        what = f"{len(ids)} finding{'s' if len(ids) != 1 else ''} ({shown})"
        with console.review_refusals(user, action, what):  # each refusal logged
            console.check_csrf(request, csrf)
            if not user.can_review:
                raise HTTPException(403, "a viewer cannot review findings")
            if not ids:
                raise invalid(("body", "finding_id"), "tick at least one finding")
            if action == "assign":
                target = users.user(con, assignee)
                if target is None or not target["active"] or target["role"] not in REVIEWER_ROLES:
                    raise invalid(("body", "assignee"), "assign needs an active user who can review (not a viewer)")
            for fid in ids:  # every finding known before anything is recorded
                console.finding(con, fid)
            body = ReviewRequest(action=action, assignee=assignee or None)
            for fid in ids:
                console.record_review(con, fid, user, body)
        form = await request.form()
        back = {k: str(form.get(f"back_{k}", "")) for k in _BACK}
        return RedirectResponse("/findings?" + query_string({**back, "done": f"{len(ids)} {action}"}), status_code=303)

    return routes
