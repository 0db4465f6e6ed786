"""The command line: sign a period report's revision (``sign-report``) and check a sign-off
(``verify-signoff``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from dealtrail.cli.common import _DB, _busy, _fail, app, console, load


def _revision_folder(folder: Path) -> Path:
    """``folder`` itself when it is a revision (``rev-NNNN``); for a period's folder its latest
    revision."""
    from projections.period_reports import LEGACY, REVISION, latest

    if REVISION.match(folder.name):
        return folder
    last = latest(folder)
    if last is None or last["folder"] == LEGACY:
        raise _fail(f"{folder} is neither a report revision (rev-NNNN) nor a period folder with one")
    return folder / str(last["folder"])


@app.command("sign-report")
def sign_report(
    folder: Annotated[
        Path, typer.Argument(help="A revision folder (<period>/rev-NNNN), or a period folder: its latest revision.")
    ],
    user: Annotated[str, typer.Option(help="The console user who signs (a manager or an admin).")],
    statement: Annotated[str, typer.Option(help="What the signer states, e.g. 'Reviewed and approved'.")],
    db: Annotated[
        Path | None, typer.Option(help="DuckDB file holding the users (opened read-only).", show_default=_DB)
    ] = None,
    pdf: Annotated[
        bool, typer.Option("--pdf", help="Also print the signed report to <revision>/report-signed.pdf.")
    ] = False,
) -> None:
    """Sign a final period report's revision: write its sign-off record (who, when, the statement,
    the SHA-256 of each of its files) once, beside it."""
    import duckdb

    from projections import access
    from projections.signoff import SignOffError, sign
    from projections.store import connect_read_only

    settings = load()
    db = db or settings.db
    target = _revision_folder(folder)
    try:
        con = connect_read_only(db)
    except FileNotFoundError as exc:
        raise _fail(str(exc)) from None
    except duckdb.IOException as exc:
        raise _busy(db, exc) from None
    try:
        found = access.user(con, user)
    finally:
        con.close()
    if found is None or not found["active"]:
        raise _fail(f"no active console user {user!r} in {db}")
    try:
        record = sign(target, str(found["name"]), str(found["role"]), statement, datetime.now(UTC))
    except SignOffError as exc:
        raise _fail(str(exc), code=1) from None
    console.print(
        f"signed {escape(str(target))} as {escape(record['signed_by'])} ({record['role']}) at {record['signed_at']}: "
        f"{len(record['files'])} files hashed"
    )
    if pdf:
        _print_signed(target, settings.reports.chromium)


def _print_signed(folder: Path, chromium: str | None) -> None:
    """Print the revision's report with its sign-off block to ``report-signed.pdf``."""
    import tempfile

    from dealtrail.pdf import PdfError, print_pdf
    from projections.signoff import SIGNED_PDF, block_html, with_block

    html = with_block((folder / "report.html").read_text(encoding="utf-8"), block_html(folder))
    with tempfile.TemporaryDirectory(prefix="dealtrail-signed-") as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(html, encoding="utf-8")
        try:
            out = print_pdf(page, folder / SIGNED_PDF, chromium)
        except PdfError as exc:
            raise _fail(f"signed, but the PDF was not written: {exc}", code=1) from None
    console.print(f"printed: {escape(str(out))}")


@app.command("verify-signoff")
def verify_signoff(
    folder: Annotated[
        Path, typer.Argument(help="A revision folder (<period>/rev-NNNN), or a period folder: its latest revision.")
    ],
) -> None:
    """Check a report revision's sign-off: recompute the SHA-256 of each of its files and name
    every file changed, missing or added since signing (exit 1), or say it is not signed (exit 1)."""
    from projections.signoff import SignOffError, verify

    target = _revision_folder(folder)
    try:
        check = verify(target)
    except SignOffError as exc:
        raise _fail(str(exc), code=1) from None
    if check.record is None:
        raise _fail(f"{target} is not signed", code=1)
    r = check.record
    who = f"signed by {r.get('signed_by')} ({r.get('role')}) at {r.get('signed_at')}"
    if not check.intact:
        for line in check.problems():
            console.print(f"  {escape(line)}")
        raise _fail(f"{target}: NOT as signed ({who})", code=1)
    console.print(f"{escape(str(target))}: {len(r['files'])} files as signed; {escape(who)}")
