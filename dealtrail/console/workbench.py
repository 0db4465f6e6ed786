"""The finding page's video clips, video references in reviews, and the evidence package download.

- The clips of a finding's evidence window, one link per camera of its table
  (:class:`dealtrail.investigate.video.VideoLinks`, from ``DEALTRAIL_VIDEO__*``), drawn by the partial
  ``_finding_video.html.j2`` through the template function ``video_clips``.
- ``POST /findings/{id}/video-references``: one video reference (camera, clip ID, URL, note) and
  an optional note, recorded as evidence (``FindingEvidenceAttached``, to the store or to the
  reviews topic in the streaming deployment): it changes no review status, cause, assignee or
  approval (issue 47, item 1); a decision goes through the review form.
- ``GET /findings/{id}/evidence.zip``: the finding's evidence package
  (:func:`dealtrail.investigate.evidence.build_package`), for any logged-in user; each download is logged
  (user, finding, the zip's SHA-256) on the ``dealtrail.console.evidence`` logger, which writes
  to standard error.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from dealtrail.console.api_models import ReviewRequest
from dealtrail.console.deps import Console, Cursor, PageUser, invalid
from dealtrail.investigate.video import Clip

log = logging.getLogger("dealtrail.console.evidence")

REFERENCE_ACTIONS = ("attach",)
"""What the video reference form records: evidence only (a decision goes through the review form).
A form from an older page that still names a decision (``ref_action=acknowledge`` ...) is refused
with 422 rather than recorded as something its user did not choose."""


def router(console: Console) -> APIRouter:
    """The routes of this module over ``console`` (and the ``video_clips`` template function)."""
    routes = APIRouter()
    video = console.config.video
    if not log.handlers:  # the downloads go to standard error (compose: docker compose logs projector)
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)

    def video_clips(table_id: str, evidence: list[dict[str, Any]]) -> dict[str, Any]:
        """What the finding page shows of video: the cameras, the window and the clips."""
        times = [e["occurred_at"] for e in evidence if isinstance(e.get("occurred_at"), datetime)]
        cameras = video.cameras.get(table_id, ())
        clips: list[Clip] = video.clips(table_id, min(times), max(times)) if times else []
        return {
            "cameras": cameras,
            "clips": clips,
            "template": video.url_template is not None,
            "zone": video.zone,
            "before": video.margin_before.total_seconds(),
            "after": video.margin_after.total_seconds(),
        }

    console.env.globals["video_clips"] = video_clips

    @routes.post("/findings/{finding_id}/video-references", include_in_schema=False)
    def video_reference_form(
        request: Request,
        finding_id: str,
        user: PageUser,
        con: Cursor,
        csrf: Annotated[str, Form()],
        camera: Annotated[str, Form(max_length=128)],
        ref_action: Annotated[str, Form()] = "attach",
        clip_id: Annotated[str, Form(max_length=200)] = "",
        url: Annotated[str, Form(max_length=2000)] = "",
        reference_note: Annotated[str, Form(max_length=4000)] = "",
        ref_review_note: Annotated[str, Form(max_length=4000)] = "",
    ) -> Response:
        with console.review_refusals(user, ref_action, f"finding {finding_id}"):  # each refusal logged
            console.check_csrf(request, csrf)
            if not user.can_review:
                raise HTTPException(403, "a viewer cannot review findings")
            if ref_action not in REFERENCE_ACTIONS:
                raise invalid(
                    ("body", "ref_action"),
                    "a video reference is recorded as evidence only: record a decision with the review form",
                )
            try:
                body = ReviewRequest.model_validate(
                    {
                        "action": "attach",
                        "note": ref_review_note,
                        "references": [{"camera": camera, "clip_id": clip_id, "url": url, "note": reference_note}],
                    }
                )
            except ValidationError as exc:  # refused as the API refuses them
                raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
            console.record_review(con, finding_id, user, body)
        return RedirectResponse(f"/findings/{finding_id}?done=attach#video", status_code=303)

    @routes.get("/findings/{finding_id}/evidence.zip", include_in_schema=False)
    def evidence_zip(finding_id: str, user: PageUser, con: Cursor) -> Response:
        from dealtrail.investigate.evidence import EvidenceError, build_package
        from projections.records.signing import SigningError, load_key

        console.finding(con, finding_id)  # 404 for an unknown finding
        try:
            key = load_key(console.config.signing_key) if console.config.signing_key is not None else None
            package = build_package(
                con,
                finding_id,
                console.config.plausibility,
                console.config.clock(),
                signer=key,
                property_name=console.property_name(),
                made_by=user.name,
            )
        except (EvidenceError, SigningError) as exc:
            raise HTTPException(409, f"no evidence package can be made: {exc}") from None
        data = package.zip_bytes(f"evidence-{finding_id}")
        log.info(
            "evidence package downloaded: user=%s finding=%s sha256=%s",
            user.name,
            finding_id,
            hashlib.sha256(data).hexdigest(),
        )
        return Response(
            data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="evidence-{finding_id}.zip"'},
        )

    return routes
