"""The console's sign-off of period reports and the property's name: a manager (or an admin)
signs the latest final revision of a period's report (``POST
/reports/scheduled/{label}/{revision}/sign``, a statement and the CSRF token); an admin names the
casino property (``/admin/property``), each name a new record in the store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from dealtrail.console.deps import Console, Cursor, PageUser
from dealtrail.reporting.pdfsign import PdfNotMadeError, load_identity, signed_pdf_maker
from projections.display.timefmt import zone_name
from projections.records import property as stored_property
from projections.records import users
from projections.records.signing import SigningError, load_key
from projections.records.signoff import SIGNER_ROLE, SignOffError, logged_detail, record_sha256, sign
from projections.records.users import role_at_least


def router(console: Console) -> APIRouter:
    """The sign-off and property routes (none in the API's document)."""
    routes = APIRouter()
    config, render, check_csrf = console.config, console.render, console.check_csrf

    @routes.post("/reports/scheduled/{label}/{revision}/sign", include_in_schema=False)
    def sign_revision(
        request: Request,
        label: str,
        revision: str,
        user: PageUser,
        statement: Annotated[str, Form(max_length=4000)],
        csrf: Annotated[str, Form()],
        con: Cursor,
        stale_ok: Annotated[str | None, Form(max_length=10)] = None,
    ) -> Response:
        from dealtrail.console.reports_pages import _LABEL, _inside
        from projections.records.report_revisions import REVISION

        check_csrf(request, csrf)
        if not role_at_least(user.role, SIGNER_ROLE):
            raise HTTPException(403, "a report is signed by a manager or an admin")
        folder = config.reports_dir
        ok = folder is not None and _LABEL.match(label) and REVISION.match(revision)
        report = _inside(folder, label, revision, "report.html") if ok and folder is not None else None
        if report is None:
            raise HTTPException(404)
        from dealtrail.reporting.schedule import stale_since

        stale = stale_since(con, report.parent.parent, config.clock())  # the period's latest revision (older: refused)
        if stale and stale_ok != "yes":  # a stale revision is signed knowingly, or not at all
            reason = (
                f"Revision {revision} of {label} is not current ({stale}): write a new revision, or tick"
                " the confirmation to sign it knowing that it is stale."
            )
            console.access.record("report_signed", user.name, "refused", f"{label}/{revision}: stale, not confirmed")
            return render(request, "signoff_refused.html.j2", user, status_code=409, reason=reason)
        try:
            key = load_key(config.signing_key) if config.signing_key is not None else None
            maker = _pdf_maker(console, report.parent, key)
            sign(
                report.parent,
                user.name,
                user.role,
                statement,
                config.clock(),
                maker,
                signer=key,
                signed_stale=stale,
                profile=users.profile(con, user.name),
                zone=zone_name(config.tz),
                signed_in_with=user.signed_in_with.model_dump(),
            )
        except (SignOffError, SigningError, PdfNotMadeError) as exc:
            if isinstance(exc, PdfNotMadeError):
                exc = SignOffError(f"not signed: the signed PDF could not be made: {exc}")
            reason = _relative(str(exc), folder)  # the reports folder's place on disk is nobody's business
            console.access.record("report_signed", user.name, "refused", f"{label}/{revision}: {reason}")
            return render(request, "signoff_refused.html.j2", user, status_code=409, reason=reason)
        digest = record_sha256(report.parent)  # the record itself, anchored in the access log's chain
        console.access.record("report_signed", user.name, "ok", logged_detail(report.parent, digest or "none"))
        return RedirectResponse(f"/reports#{label}", status_code=303)

    @routes.post("/reports/scheduled/{label}/revise", include_in_schema=False)
    def revise_period(
        request: Request, label: str, user: PageUser, csrf: Annotated[str, Form()], con: Cursor
    ) -> Response:
        """Write a new revision of a period's report as of now, from this process (which holds
        the store): a manager's answer to a stale revision."""
        from dealtrail.console.reports_pages import _LABEL
        from dealtrail.reporting.schedule import write_revision
        from projections.store.archive import ArchiveError

        check_csrf(request, csrf)
        if not role_at_least(user.role, SIGNER_ROLE):
            raise HTTPException(403, "a new revision is written by a manager or an admin")
        folder = config.reports_dir
        if folder is None or not _LABEL.match(label) or not (folder / label / "manifest.json").is_file():
            raise HTTPException(404)
        try:
            # each revision's manifest is signed with the property's key (none set: it says unsigned)
            key = load_key(config.signing_key) if config.signing_key is not None else None
            made = write_revision(
                con,
                folder / label,
                config.clock(),
                property_name=console.property_name(),
                review_due=config.review_due,
                console_url=None,
                grace=config.report_grace,
                max_listed=config.report_max_listed,
                archive=config.archive,
                signer=key,
                control=config.control.report_args,
            )
        except SigningError as exc:
            raise HTTPException(503, f"the report revision cannot be signed: {exc}") from None
        except ArchiveError as exc:
            raise HTTPException(503, str(exc)) from None
        except FileExistsError:
            raise HTTPException(409, "another writer wrote a revision of this period meanwhile; reload") from None
        detail = f"{label}/{made.name}" if made is not None else f"{label}: nothing changed"
        console.access.record("report_revised", user.name, "ok", detail)
        return RedirectResponse(f"/reports?revised={'yes' if made else 'same'}#{label}", status_code=303)

    @routes.get("/admin/property", include_in_schema=False)
    def property_page(request: Request, user: PageUser, con: Cursor) -> HTMLResponse:
        if not user.is_admin:
            raise HTTPException(403, "admins only")
        return render(request, "property.html.j2", user, names=stored_property.history(con), error=None, typed="")

    @routes.post("/admin/property", include_in_schema=False)
    def property_set(
        request: Request,
        user: PageUser,
        con: Cursor,
        name: Annotated[str, Form(max_length=1000)],
        csrf: Annotated[str, Form()],
    ) -> Response:
        check_csrf(request, csrf)
        if not user.is_admin:
            raise HTTPException(403, "admins only")
        try:
            with console.write_lock:
                stored_property.record(console.store.con, name, config.clock(), user.name)
        except ValueError as exc:
            console.access.record("property_named", user.name, "refused", str(exc))
            names = stored_property.history(con)
            return render(request, "property.html.j2", user, 422, names=names, error=str(exc), typed=name)
        console.access.record("property_named", user.name, "ok", name)
        return RedirectResponse("/admin/property", status_code=303)

    return routes


def _pdf_maker(
    console: Console, folder: Path, key: Ed25519PrivateKey | None
) -> Callable[[dict[str, Any]], bytes] | None:
    """The maker of the revision's signed PDF when the property's key is set (None: no PDF), with
    the casino's own certificate when one is configured.

    Raises:
        SigningError: the configured certificate or its key file cannot be used.
    """
    if key is None:
        return None
    name = console.property_name() or stored_property.NOT_NAMED
    own = console.config.pdf_certificate  # the casino's own certificate (a bad file: SigningError, refused)
    identity = load_identity(*own) if own is not None else None
    return signed_pdf_maker(folder, key, name, console.config.chromium, identity)


def _relative(text: str, root: Path | None) -> str:
    """``text`` with every absolute path under ``root`` (as given and resolved) written relative to it."""
    if root is None:
        return text
    for base in sorted({str(root), str(root.resolve())}, key=len, reverse=True):
        text = text.replace(base.rstrip("/") + "/", "")
    return text
