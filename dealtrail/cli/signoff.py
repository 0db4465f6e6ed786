"""The command line: sign a period report's revision (``sign-report``) and check a sign-off
(``verify-signoff``)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from dealtrail.cli.common import _DB, _fail, _read_store, app, console, load
from dealtrail.settings import Settings
from schemas.access import Outcome

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from dealtrail.console.guard import LoginGuard
    from dealtrail.reporting.pdfsign import PdfIdentity
    from projections.records.signoff import Anchor


def _revision_folder(folder: Path) -> Path:
    """``folder`` itself when it is a revision (``rev-NNNN``); for a period's folder its latest
    revision."""
    from projections.records.report_revisions import LEGACY, REVISION, latest

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
        Path | None,
        typer.Option(
            help="DuckDB file holding the users and the access log (opened for writing: stop the console first).",
            show_default=_DB,
        ),
    ] = None,
    pdf: Annotated[
        bool,
        typer.Option(
            "--pdf",
            help="Also print the report to <revision>/report-signed.pdf, signed inside the PDF with the property's "
            "key (DEALTRAIL_SIGNING__KEY_FILE); signoff.json lists it.",
        ),
    ] = False,
) -> None:
    """Sign a final period report's revision as a console manager or admin: their password (and
    one-time code, when they have one) is asked for (no echo; read line by line from stdin when it
    is not a terminal) and checked against the store, a locked, deactivated or unknown user is
    refused, and the sign-off record (who, when, the
    statement, the SHA-256 of each file) is written once beside the revision and recorded in the
    store's access log (``report_signed``, with the SHA-256 of the record). While a console or a
    projector holds the store, sign in the console instead."""
    import time

    from dealtrail.console.auth import verify_password
    from dealtrail.console.totp import code_ok
    from projections.records import access_log, users
    from projections.records.signoff import (
        SIGNER_ROLE,
        SignOffError,
        logged_detail,
        record_sha256,
        sign,
        signed_shown,
        signer_label,
    )
    from projections.records.users import role_at_least
    from projections.store.store import Store

    settings = load()
    db = db or settings.db
    target = _revision_folder(folder)
    key = _signing_key(settings) if pdf or settings.signing.key_file is not None else None
    identity = _pdf_identity(settings) if pdf else None  # the casino's own certificate, if configured
    store = _open_for_signing(db, settings)
    assert isinstance(store, Store)
    with store:
        ref = f"{target.parent.name}/{target.name}"

        def refuse(message: str, kind: str = "report_signed", outcome: Outcome = "refused") -> typer.Exit:
            _log(store, kind, user, outcome, f"{ref}: {message}" if kind == "report_signed" else message)
            return _fail(message, code=1)

        found = users.user(store.con, user)
        if found is None:
            raise refuse(f"no console user {user!r} in {db}")
        if not found["active"]:
            raise refuse(f"console user {user!r} is deactivated: a deactivated user signs nothing")
        guard = _guard(store, settings)
        now = datetime.now(UTC)
        refusal = guard.check(user, _CLIENT, now)
        if refusal is not None:
            outcome: Outcome = "locked" if refusal.locked else "throttled"
            raise refuse(f"{user!r} may not sign in now: {refusal.message}", "login_failed", outcome)
        if not role_at_least(str(found["role"]), SIGNER_ROLE):
            raise refuse(f"a report is signed by a manager or an admin; {user!r} is a {found['role']}")
        if found["must_change"]:  # an admin's reset: the one-time password signs nothing
            raise refuse(
                f"{user!r} holds a one-time password from a reset: sign in to the console and set your own first"
            )
        if not verify_password(found["password_hash"], _secret(f"password of {user}")):
            locked = guard.failed(user, _CLIENT, now)  # counted as the console counts a failed sign-in
            _log(store, "login_failed", user, "refused", "sign-report: wrong password")
            if locked:
                _log(store, "login_locked", user, "locked", "failed sign-ins in a row (sign-report)")
            raise refuse(f"wrong password for {user!r}: not signed")
        from dealtrail.cli.console import totp_key

        try:
            secret = access_log.totp_secret(store.con, str(found["name"]), totp_key(settings, db))
        except access_log.TotpKeyError as exc:
            raise refuse(f"the one-time code of {user!r} cannot be checked: {exc}") from None
        if secret is None and found["role"] in guard.policy.totp_roles:
            raise refuse(f"{user!r} must sign in with a one-time code: enrol one in the console first")
        if secret is not None and not code_ok(secret, _secret(f"one-time code of {user}"), time.time()):
            locked = guard.failed(user, _CLIENT, now)
            _log(store, "login_failed", user, "refused", "sign-report: wrong or missing one-time code")
            if locked:
                _log(store, "login_locked", user, "locked", "failed sign-ins in a row (sign-report)")
            raise refuse(f"wrong or missing one-time code for {user!r}: not signed")
        from dealtrail.reporting.pdfsign import PdfNotMadeError, signed_pdf_maker

        maker = None
        if key is not None and pdf:
            from projections.records import property as stored_property

            name = stored_property.resolve(store.con, settings.property_name) or "property not named"
            maker = signed_pdf_maker(target, key, name, settings.reports.chromium, identity)
        try:
            record = sign(
                target,
                str(found["name"]),
                str(found["role"]),
                statement,
                datetime.now(UTC),
                maker,
                signer=key,
                profile=users.profile(store.con, str(found["name"])),
                zone=settings.timezone,
                signed_in_with={"method": "local"},
            )
        except SignOffError as exc:
            raise refuse(str(exc)) from None
        except PdfNotMadeError as exc:
            raise refuse(f"not signed: the signed PDF could not be made: {exc}") from None
        digest = record_sha256(target)
        assert digest is not None
        _log(store, "report_signed", str(found["name"]), "ok", logged_detail(target, digest))
    console.print(
        f"signed {escape(str(target))} as {escape(signer_label(record))} at {escape(signed_shown(record))}: "
        f"{len(record['files'])} files hashed; recorded in the access log of {escape(str(db))} "
        f"(signoff.json sha256:{digest[:16]}...)",
        soft_wrap=True,
    )
    if pdf:
        console.print(f"printed and signed: {escape(str(target / 'report-signed.pdf'))}", soft_wrap=True)


def _open_for_signing(db: Path, settings: Settings) -> object:
    """The store opened for writing (its access log takes the sign-off), or one clear line: no
    store there, or a console or projector holds it (sign in the console then, so that the
    sign-off is recorded)."""
    from projections.store.store import NotAStoreError, Store

    if not db.is_file():
        raise _fail(f"no dealtrail database at {db}", code=1)
    try:
        return Store(db, settings.duckdb_memory_limit)
    except NotAStoreError as exc:
        raise _fail(str(exc), code=1) from None
    except Exception as exc:  # duckdb raises its own IOException when another process holds the file
        if "lock" not in str(exc).lower():
            raise
        raise _fail(
            f"{db} is held by a running console or projector: sign the report on the console's Reports page "
            "(a sign-off is only made where the access log records it)",
            code=1,
        ) from None


def _secret(prompt: str) -> str:
    """The signer's password (or one-time code): asked for without echo on a terminal, else the
    next line of stdin."""
    if sys.stdin.isatty():
        import getpass

        return getpass.getpass(f"{prompt}: ")
    return sys.stdin.readline().rstrip("\r\n")


def _guard(store: object, settings: Settings) -> LoginGuard:
    """The console's sign-in guard as the access log leaves it now (``LoginGuard.replay``)."""
    from dealtrail.cli.console import security_policy
    from dealtrail.console.guard import LoginGuard

    guard = LoginGuard(security_policy(settings))
    guard.replay(store.con, datetime.now(UTC))  # type: ignore[attr-defined]
    return guard


_CLIENT = "cli"
"""The client of the access-log entries ``sign-report`` makes."""


def _log(store: object, kind: str, user: str, outcome: Outcome, detail: str) -> None:
    """Append one entry to the store's access log (client ``cli``), as the console's recorder does."""
    from ulid import ULID

    from projections.records import access_log
    from schemas.access import AccessEntry, clean_name

    entry = AccessEntry(
        entry_id=str(ULID()),
        at=datetime.now(UTC),
        user=clean_name(user),
        client=_CLIENT,
        kind=kind,
        outcome=outcome,
        detail=clean_name(detail, 500),
    )
    access_log.append(store.con, [entry])  # type: ignore[attr-defined]


def _pdf_identity(settings: Settings) -> PdfIdentity | None:
    """The casino's own certificate and key for the signed PDF (``DEALTRAIL_SIGNING__PDF_CERT_FILE``
    and ``..._PDF_KEY_FILE``), or None (the self-issued certificate); one line and exit 1 when the
    files cannot be used."""
    from dealtrail.reporting.pdfsign import load_identity
    from projections.records.signing import SigningError

    cert, key = settings.signing.pdf_cert_file, settings.signing.pdf_key_file
    if cert is None or key is None:
        return None
    try:
        return load_identity(cert, key)
    except SigningError as exc:
        raise _fail(f"signing the PDF with the configured certificate: {exc}", code=1) from None


def _signing_key(settings: Settings) -> Ed25519PrivateKey:
    """The property's key, or one clear line (exit 1) before anything is signed."""
    from projections.records.signing import SigningError, load_key

    try:
        return load_key(settings.signing.key_file)
    except SigningError as exc:
        raise _fail(f"signing with the property's key (--pdf needs it): {exc}", code=1) from None


@app.command("verify-signoff")
def verify_signoff(
    folder: Annotated[
        Path, typer.Argument(help="A revision folder (<period>/rev-NNNN), or a period folder: its latest revision.")
    ],
    db: Annotated[
        Path | None,
        typer.Option(
            help="Also check signoff.json against the report_signed entry of this store's access log, and "
            "the log's hash chain (opened read-only), and signoff.json's signature with the keys it records."
        ),
    ] = None,
    public_key: Annotated[
        Path | None,
        typer.Option(help="Check signoff.json's signature with this registered public key (PEM)."),
    ] = None,
) -> None:
    """Check a report revision's sign-off: recompute the SHA-256 of each of its files and name
    every file changed, missing or added since signing (exit 1), or say it is not signed (exit 1).
    With ``--db``, also check that ``signoff.json`` is the one the store's access log recorded at
    signing (its SHA-256) and that the log's chain is intact (exit 1 otherwise); without it, the
    sign-off record itself is not checked."""
    from projections.records.signoff import SignOffError, signed_shown, signer_label, verify

    target = _revision_folder(folder)
    try:
        check = verify(target)
    except SignOffError as exc:
        raise _fail(str(exc), code=1) from None
    if check.record is None:
        raise _fail(f"{target} is not signed", code=1)
    r = check.record
    who = f"signed by {signer_label(r)} at {signed_shown(r)}"  # in the zone the record names, else UTC, labelled
    if not check.intact:
        for line in check.problems():
            console.print(f"  {escape(line)}", soft_wrap=True)
        raise _fail(f"{target}: NOT as signed ({who})", code=1)
    said = _signature(target, db, public_key)
    if said is not None:
        console.print(escape(said), soft_wrap=True)
    if db is None:
        console.print(f"{escape(str(target))}: {len(r['files'])} files as signed; {escape(who)}", soft_wrap=True)
        console.print(
            "checked the report files against the sign-off record; the record itself is anchored only by the "
            "access log: pass --db",
            soft_wrap=True,
        )
        return
    anchor = _anchor(target, db)
    if not anchor.ok:
        for line in anchor.problems():
            console.print(f"  {escape(line)}", soft_wrap=True)
        raise _fail(f"{target}: the sign-off record is NOT the one recorded in the access log of {db}", code=1)
    console.print(
        f"{escape(str(target))}: {len(r['files'])} files as signed; {escape(who)}; signoff.json as recorded in "
        f"the access log of {escape(str(db))} at entry {anchor.seq} (chain intact)",
        soft_wrap=True,
    )


def _signature(target: Path, db: Path | None, public_key: Path | None) -> str | None:
    """The line about ``signoff.json``'s signature, checked with ``public_key`` or the keys the
    store at ``db`` records (None: neither given), and, with ``db``, that it was made
    (``signed_at``) within its key's validity period there; one clear line and exit 1 when it fails."""
    from projections.records import signing_keys
    from projections.records.signing import SigningError, key_id
    from projections.records.signoff import SignOffError, check_signature, read

    keys: dict[str, bytes] = {}
    recorded: list[dict[str, Any]] | None = None
    try:
        if public_key is not None:
            pem = public_key.read_bytes()
            keys[key_id(pem)] = pem
        if db is not None:
            con = _read_store(db, code=1)  # one line for a store missing, held or unreadable
            try:
                recorded = signing_keys.history(con)
            finally:
                con.close()
            keys |= {k["key_id"]: k["public_key_pem"].encode() for k in recorded}
    except (OSError, SigningError) as exc:
        raise _fail(f"cannot read the public key: {exc}", code=1) from None
    if public_key is None and db is None:
        return None
    try:
        said = check_signature(target, keys)
        record = read(target) or {}
    except SignOffError as exc:
        raise _fail(f"{target}: NOT as signed: {exc}", code=1) from None
    kid = record.get("signing_key")
    if kid is None:
        return said
    if recorded is None:
        return said + " (the key's validity period was not checked: pass --db)"
    try:
        at = datetime.fromisoformat(str(record.get("signed_at")))
        if at.tzinfo is None:
            raise ValueError("no offset")
    except ValueError:
        raise _fail(f"{target}: signoff.json's signed_at {record.get('signed_at')!r} is no time", code=1) from None
    problem = signing_keys.validity_problem(recorded, str(kid), at)
    if problem is not None:
        raise _fail(f"{target}: NOT as signed: the sign-off was {problem}", code=1)
    return said + f", within its validity period in {db}"


def _anchor(target: Path, db: Path) -> Anchor:
    """:func:`projections.records.signoff.check_anchor` over the store at ``db`` opened read-only."""
    from projections.records.signoff import check_anchor

    con = _read_store(db, code=1)
    try:
        return check_anchor(con, target)
    finally:
        con.close()
