"""The JSON API under ``/api/v1``: the findings, one finding, a review of a finding, the floor,
and the API's OpenAPI document (served to an authenticated client only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse

from dealtrail.console.api_models import (
    ApiTime,
    ErrorMessage,
    FindingDetail,
    FindingsPage,
    Floor,
    ReviewRequest,
    StoredReview,
)
from dealtrail.console.deps import ApiUser, Console, Cursor, StateRefusal, known_query
from dealtrail.console.filters import filters_from
from projections.display.timefmt import FROM_HELP, TO_HELP
from projections.models import incidents, reviews

MAX_OFFSET = 2**53
"""The largest ``offset`` the API takes (far beyond any store; a bigger one is a 422, never an
overflow of the store's 64-bit integers)."""

_REFUSALS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorMessage, "description": "No token, or a revoked one (`Authorization: Bearer TOKEN`)."},
}
_BODY_REFUSALS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorMessage, "description": "The body cannot be read as JSON text (e.g. not UTF-8)."},
}
_FINDING_ID = "$response.body#/findings/0/finding_id"
_LIST_LINKS = {
    "GetFirstFinding": {"operationId": "get_finding", "parameters": {"finding_id": _FINDING_ID}},
    "ReviewFirstFinding": {"operationId": "review_finding", "parameters": {"finding_id": _FINDING_ID}},
}
_FINDING_LINKS = {
    "ReviewFinding": {"operationId": "review_finding", "parameters": {"finding_id": "$response.body#/finding_id"}},
}
_REVIEW_LINKS = {
    "GetReviewedFinding": {"operationId": "get_finding", "parameters": {"finding_id": "$response.body#/finding_id"}},
}
"""OpenAPI links: from the findings list to its first finding, and between a finding and its
reviews (clients and Schemathesis's stateful runs follow them)."""


def router(console: Console) -> APIRouter:
    """The routes under ``/api/v1``: the operations of the OpenAPI document and the document."""
    routes = APIRouter()
    config = console.config

    @routes.get("/api/v1/openapi.json", include_in_schema=False)
    def openapi_doc(request: Request, user: ApiUser) -> JSONResponse:
        app: FastAPI = request.app
        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        doc.setdefault("components", {})["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description": "dealtrail users token NAME"}
        }
        doc["security"] = [{"bearer": []}]
        return JSONResponse(doc)

    @routes.get(
        "/api/v1/findings",
        tags=["findings"],
        operation_id="list_findings",
        response_model=None,  # the answer's shape is documented in responses (see _Open)
        dependencies=[Depends(known_query)],
        responses={
            **_REFUSALS,
            200: {"model": FindingsPage, "description": "The findings, newest first.", "links": _LIST_LINKS},
        },
    )
    def api_findings(
        user: ApiUser,
        con: Cursor,
        status: str | None = None,
        table: str | None = None,
        rule: str | None = None,
        severity: str | None = None,
        from_: Annotated[ApiTime | None, Query(alias="from", description=FROM_HELP)] = None,
        to: Annotated[ApiTime | None, Query(description=TO_HELP)] = None,
        review_status: str | None = None,
        game: str | None = None,
        dealer: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> JSONResponse:
        """Finding records detected in [from, to) with their status, review status, due time and
        last reviewer; ``total`` counts the records, consequences included (a consequence names its
        cause in ``cause_finding_id``; ``incident`` is false), ``counts`` the incidents among them
        (the figures of the report and the floor: incidents, open, late reviews, ...)."""
        flt = filters_from(from_, to, game, table, dealer, rule, severity, status, review_status, config.tz)
        now = config.clock()
        rows, counted = incidents.page(con, flt, config.review_due, now, limit=limit, offset=offset)
        total = counted.records
        # already JSON-ready (times as text): answered as it is, without FastAPI's generic
        # encoder, which took 65 to 100 ms of a 1,000-row page
        return JSONResponse(
            {
                "total": total,
                "offset": offset,
                "counts": _counts_json(counted),
                "findings": reviews.review_rows_json(rows),
            }
        )

    @routes.get(
        "/api/v1/findings/{finding_id}",
        tags=["findings"],
        operation_id="get_finding",
        response_model=None,  # the answer's shape is documented in responses (see _Open)
        dependencies=[Depends(known_query)],
        responses={
            **_REFUSALS,
            404: {"model": ErrorMessage, "description": "No such finding."},
            200: {"model": FindingDetail, "description": "The finding and its reviews.", "links": _FINDING_LINKS},
        },
    )
    def api_finding(finding_id: str, user: ApiUser, con: Cursor) -> dict[str, Any]:
        """One finding with its review history."""
        f = console.finding(con, finding_id)
        out = reviews.review_rows_json([f])[0]
        history = reviews.review_rows_json(reviews.history(con, finding_id))
        out["reviews"] = [{"user": r["user_name"], **r} for r in history]  # user_name: deprecated alias
        console.record_finding_read("finding_viewed", user, f, f" via the API with {user.credential}")
        return out

    @routes.post(
        "/api/v1/findings/{finding_id}/reviews",
        status_code=201,
        tags=["reviews"],
        operation_id="review_finding",
        response_model=None,  # the answer's shape is documented in responses (see _Open)
        dependencies=[Depends(known_query)],
        responses={
            **_REFUSALS,
            **_BODY_REFUSALS,
            403: {
                "model": ErrorMessage,
                "description": "A viewer's token (viewers do not review); an approval or rejection by a "
                "reviewer, by the manager who proposed the disposition, or with a token its user did not "
                "make or the proposer made (four eyes are two people).",
            },
            404: {"model": ErrorMessage, "description": "No such finding."},
            409: {
                "model": ErrorMessage,
                "description": "Refused for what the store holds: approve or reject with no proposed disposition "
                "pending; an assignee who is not an active user who can review; a disposition without the "
                "corrective action or the note the finding's severity needs (the settings name them).",
            },
            503: {"model": ErrorMessage, "description": "The review was not recorded (the broker did not take it)."},
            201: {"model": StoredReview, "description": "The stored review event.", "links": _REVIEW_LINKS},
        },
    )
    def api_review(finding_id: str, body: ReviewRequest, user: ApiUser, con: Cursor) -> dict[str, Any]:
        """Record a review (reviewer, manager or admin token): 201 with the stored review event.

        ``dispose`` with ``NOT_A_VIOLATION`` on a voiding or integrity finding is recorded as a
        proposal (``FindingDispositionProposed``, review status ``pending_approval``, still open);
        ``approve`` or ``reject`` (with a note) is a manager's decision on it, refused (403) to
        its proposer, to a reviewer, and with a token its user did not make (or the proposer made)."""
        with console.review_refusals(user, body.action, f"finding {finding_id}"):
            if not user.can_review:
                raise HTTPException(403, "a viewer cannot review findings")
            try:
                event = console.record_review(con, finding_id, user, body)
            except StateRefusal as exc:  # valid as the document says, refused for what the store holds
                raise HTTPException(409, exc.reason) from None
        return dict(event.model_dump(mode="json"))

    @routes.get(
        "/api/v1/floor",
        tags=["floor"],
        operation_id="get_floor",
        response_model=None,  # the answer's shape is documented in responses (see _Open)
        dependencies=[Depends(known_query)],
        responses={**_REFUSALS, 200: {"model": Floor, "description": "Every table."}},
    )
    def api_floor(user: ApiUser, con: Cursor) -> dict[str, Any]:
        """Every table: game, dealer, rounds, device state, its incidents not yet disposed by severity
        (``open_<severity>``), overdue remedies and late reviews; ``totals``: the incident figures of
        the whole store, as the report and the findings list count them."""
        ctx = console.floor_context(con)
        return {"tables": reviews.review_rows_json(ctx["tables"]), "totals": _counts_json(ctx["totals"])}

    return routes


def _counts_json(c: incidents.Counts) -> dict[str, Any]:
    """Incident figures, JSON-ready (times in UTC, ISO 8601)."""
    return reviews.review_rows_json([c.as_dict()])[0]
