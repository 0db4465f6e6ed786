"""A manager's sign-off of a period report's revision: a record written once beside the revision.

A revision folder (``<reports>/<period>/rev-NNNN/``, see :mod:`projections.records.report_revisions`) is
signed by writing ``signoff.json`` into it: who signed (name and role), when (UTC), the statement
they signed, the report's digest and status, and the SHA-256 of every file of the revision as it
was at signing. The record is written once (owner-only, put in place with a hard link, which
fails when one is there already) and never replaced: a second signature of the same revision is
refused, and a later revision of the period (a late event, a review, a re-audit) has no record
of its own until it is signed again. Verifying a sign-off recomputes each hash and names every
file changed, missing or added since signing.

No hash inside the folder covers ``signoff.json`` itself: its anchor is the store's hash-chained
access log. Whoever signs records a ``report_signed`` entry whose detail carries the SHA-256 of
the ``signoff.json`` written (:func:`logged_detail`); :func:`check_anchor` compares the file with
that entry and checks the log's chain, so an edited record is found.

The report's HTML carries a sign-off block between two markers (:data:`BLOCK_START`,
:data:`BLOCK_END`) that says "not signed"; whoever shows the revision (the console) puts the
block of its record there (:func:`with_block`), so the signed ``report.html`` itself stays
byte for byte what its hash says.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from projections.display.timefmt import parsed, show, zone
from projections.records.report_revisions import REVISION, file_hashes, history
from projections.records.signing import key_id, public_pem
from projections.records.signing import sign as sign_bytes
from projections.records.signing import verify as verify_bytes
from projections.records.users import role_at_least

if TYPE_CHECKING:
    import duckdb
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SIGNOFF = "signoff.json"
"""The sign-off record's file name in a revision folder."""
SIGNED_PDF = "report-signed.pdf"
"""The printed report with its sign-off block, signed inside the PDF with the property's key
(:mod:`dealtrail.reporting.pdfsign`), made while signing: the record lists it with the other files."""
SIGNOFF_SIGNATURE = "signoff.json.sig"
"""The detached Ed25519 signature of ``signoff.json`` by the property's key (not covered by the
record, as the record itself is not)."""
NOT_HASHED = frozenset({SIGNOFF, SIGNOFF_SIGNATURE})
"""Files of a revision folder the record does not cover: itself (and its signature)."""
NOT_HASHED_V1 = frozenset({SIGNOFF, SIGNED_PDF})
"""What a record of schema version 1 (dealtrail 0.2.0) did not cover: itself and the PDF printed
after it."""
SCHEMA_VERSION = 2
"""The sign-off record's schema: 2 lists the signed PDF among its files (1 did not)."""
BLOCK_START = "<!-- dealtrail:signoff -->"
BLOCK_END = "<!-- /dealtrail:signoff -->"
SIGNER_ROLE = "manager"
"""The least role that signs a report (and every role above it)."""
MAX_STATEMENT = 2000
"""The longest statement accepted (characters)."""


class SignOffError(ValueError):
    """A revision that cannot be signed (not a revision, not final, superseded, signed already)
    or a bad signer or statement; the message says which."""


def read(folder: Path) -> dict[str, Any] | None:
    """The sign-off record of the revision in ``folder``, or None when it is not signed.

    Raises:
        SignOffError: a record is there but cannot be read as one.
    """
    path = folder / SIGNOFF
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SignOffError(f"{path} is not a readable sign-off record: {exc}") from None
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        raise SignOffError(f"{path} is not a sign-off record (no files)")
    return record


def sign(
    folder: Path,
    user: str,
    role: str,
    statement: str,
    at: datetime,
    pdf: Callable[[dict[str, Any]], bytes] | None = None,
    signer: Ed25519PrivateKey | None = None,
    signed_stale: str | None = None,
    profile: Mapping[str, Any] | None = None,
    zone: str | None = None,
    signed_in_with: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Sign the report revision in ``folder``: write its ``signoff.json`` once.

    Args:
        folder: a revision folder (``rev-NNNN``) of a period's reports.
        user: who signs (a console user's name, or the name given to ``dealtrail sign-report``).
        role: their role; a manager or above signs (:func:`role_at_least`).
        statement: what they state by signing (1 to :data:`MAX_STATEMENT` characters).
        at: when (timezone-aware; stored in UTC).
        pdf: makes the signed PDF (:data:`SIGNED_PDF`) from the record (who, when, the
            statement; no files yet): written once into the folder before the record, which then
            lists it with its SHA-256. None: no PDF.
        signer: the property's key: the record names it (``signing_key``, its ID) and
            ``signoff.json.sig`` beside it is its detached Ed25519 signature of ``signoff.json``
            (:func:`check_signature`). None: the record is not signed.
        signed_stale: the signer confirmed signing a revision that is no longer current, and
            why it is not (``"1 review(s) since its as-of"``): recorded as ``signed_stale``
            (absent: it was current, or nobody asked).
        profile: the signer's profile in force (``full_name``, ``title``:
            :func:`projections.records.users.profile`), recorded as ``signer_name`` and
            ``signer_title`` (absent: none recorded; the block names the user and role only).
        zone: the casino's zone (an IANA name, ``DEALTRAIL_TIMEZONE``), recorded as ``zone``:
            the block shows the time of signing in it (absent: in UTC, labelled).
        signed_in_with: how the signer signed in (``method``: ``local`` or ``directory``, with
            ``issuer`` and ``subject`` for a directory: :class:`schemas.reviews.SignIn`),
            recorded as ``signed_in_with`` (absent: not recorded, a record from before).

    Returns:
        The record written.

    Raises:
        SignOffError: ``folder`` is no revision with a report, the revision is not final or is
            superseded by a later one, the role is below manager, the statement is empty or too
            long, or the revision is signed already (the first record stays).
    """
    statement = statement.strip()
    if not role_at_least(role, SIGNER_ROLE):
        raise SignOffError(f"a report is signed by a manager or an admin; {user!r} is a {role}")
    if not statement or len(statement) > MAX_STATEMENT:
        raise SignOffError(f"the statement must hold 1 to {MAX_STATEMENT} characters")
    if at.tzinfo is None:
        raise SignOffError("the time of signing must carry its offset")
    revision = _revision(folder)
    if revision["status"] != "final":
        raise SignOffError(
            f"{folder} is {revision['status'] or 'not judged final'}: only a final report is signed "
            "(its period may still change)"
        )
    if revision["superseded_by"] is not None:
        raise SignOffError(f"{folder} is superseded by revision {revision['superseded_by']}: sign the latest revision")
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    record: dict[str, Any] = {
        "kind": "ReportSignedOff",
        "schema_version": SCHEMA_VERSION,
        "period": folder.parent.name,
        "revision": revision["revision"],
        "status": revision["status"],
        "report_digest": summary.get("report", {}).get("digest"),
        "signed_by": user,
        "role": role,
        "signed_at": at.astimezone(UTC).isoformat(),
        "statement": statement,
    }
    if signed_stale:
        record["signed_stale"] = signed_stale
    if profile is not None:
        record["signer_name"], record["signer_title"] = str(profile["full_name"]), str(profile["title"])
    if zone is not None:
        record["zone"] = zone
    if signed_in_with is not None:
        record["signed_in_with"] = {k: str(v) for k, v in signed_in_with.items() if v}
    if (folder / SIGNOFF).exists():
        raise SignOffError(f"{folder} is signed already; a sign-off is never replaced")
    if pdf is not None:
        _write_once(folder / SIGNED_PDF, pdf(dict(record)))
    record["files"] = file_hashes(folder, NOT_HASHED)
    if signer is not None:
        record["signing_key"] = key_id(public_pem(signer))
    text = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
    if signer is not None:  # the signature first: a record that names a key is never there without it
        _write_once(folder / SIGNOFF_SIGNATURE, sign_bytes(signer, text))
    _write_once(folder / SIGNOFF, text)
    return record


def check_signature(folder: Path, public_keys: dict[str, bytes]) -> str:
    """Check the detached signature of the revision's ``signoff.json``.

    Args:
        folder: a signed revision folder.
        public_keys: key ID -> public key (PEM) the property registered (``dealtrail keys show``;
            :func:`projections.records.signing_keys.history`).

    Returns:
        One line: which key signed it, or that the record is not signed (0.2.0 or no key set).

    Raises:
        SignOffError: the record names a key but the signature is missing or does not verify,
            or the key is not among ``public_keys``.
    """
    record = read(folder)
    if record is None:
        raise SignOffError(f"{folder} is not signed")
    kid = record.get("signing_key")
    sig = folder / SIGNOFF_SIGNATURE
    if kid is None:
        if sig.exists():
            raise SignOffError(f"{SIGNOFF_SIGNATURE} is there but {SIGNOFF} names no key (altered)")
        return f"{SIGNOFF} carries no signature of the property's key (signed without one)"
    if str(kid) not in public_keys:
        raise SignOffError(f"{SIGNOFF} names signing key {kid}, which is not a registered key")
    if not sig.exists():
        raise SignOffError(f"{SIGNOFF} names signing key {kid} but {SIGNOFF_SIGNATURE} is missing")
    if not verify_bytes(public_keys[str(kid)], (folder / SIGNOFF).read_bytes(), sig.read_bytes()):
        raise SignOffError(f"{SIGNOFF_SIGNATURE} is not key {kid}'s signature of {SIGNOFF} (altered)")
    return f"{SIGNOFF} signed by the property's key {kid}"


def _revision(folder: Path) -> dict[str, Any]:
    """The :func:`projections.records.report_revisions.history` entry of the revision in ``folder``."""
    if not REVISION.match(folder.name) or not folder.is_dir():
        raise SignOffError(f"{folder} is not a report revision folder (rev-NNNN of a period's folder)")
    for r in history(folder.parent):
        if r["folder"] == folder.name:
            return r
    raise SignOffError(f"{folder} holds no readable report (report.html and summary.json)")


def _write_once(path: Path, text: bytes) -> None:
    """Write ``text`` to ``path`` (mode 0600) only if no file is there: written to a temporary
    file first and hard-linked into place, which fails when ``path`` exists (on a file system
    without hard links, created with ``O_EXCL`` instead)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise SignOffError(f"{path.parent} is signed already; a sign-off is never replaced") from None
        except OSError:  # a file system without hard links: create it exclusively instead
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                raise SignOffError(f"{path.parent} is signed already; a sign-off is never replaced") from None
            with os.fdopen(fd, "wb") as f:
                f.write(text)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class Verification:
    """What :func:`verify` found.

    Attributes:
        record: the sign-off record (None: the revision is not signed).
        changed: files whose SHA-256 differs from the record's.
        missing: files of the record no longer there.
        added: files there now that the record does not cover.
        misplaced: why the folder is not the revision the record names (a signed revision
            copied under another period or revision folder); None: it is.
    """

    record: dict[str, Any] | None
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    misplaced: str | None = None

    @property
    def intact(self) -> bool:
        """Signed, every file as it was signed (nothing changed, missing or added), in the folder
        of the period and revision the sign-off names."""
        return self.record is not None and not (self.changed or self.missing or self.added or self.misplaced)

    def problems(self) -> list[str]:
        """One line per file changed, missing or added since signing, and one for a folder that
        is not the revision the sign-off names."""
        return (
            ([self.misplaced] if self.misplaced else [])
            + [f"{n} changed since signing" for n in self.changed]
            + [f"{n} missing since signing" for n in self.missing]
            + [f"{n} added since signing (not covered by the sign-off)" for n in self.added]
        )


def _misplaced(folder: Path, record: dict[str, Any]) -> str | None:
    """Why ``folder`` is not the revision ``record`` signed (its period folder's name, its
    ``rev-NNNN``), or None; a record that names no period (an older record) is not judged."""
    from projections.records.report_revisions import revision_folder  # it imports this module lazily too

    period, revision = record.get("period"), record.get("revision")
    if period is not None and str(period) != folder.parent.name:
        return f"the sign-off is of period {period}, but this revision lies under {folder.parent.name} (copied)"
    if isinstance(revision, int) and folder.name != revision_folder(revision):
        return f"the sign-off is of revision {revision}, but this folder is {folder.name} (copied)"
    return None


def verify(folder: Path) -> Verification:
    """Recompute the SHA-256 of every file of the revision in ``folder`` against its sign-off.

    Raises:
        SignOffError: the record cannot be read.
    """
    record = read(folder)
    if record is None:
        return Verification(None)
    signed: dict[str, str] = record["files"]
    now = file_hashes(folder, NOT_HASHED_V1 if record.get("schema_version") == 1 else NOT_HASHED)
    return Verification(
        record,
        changed=sorted(n for n in signed if n in now and now[n] != signed[n]),
        missing=sorted(n for n in signed if n not in now),
        added=sorted(n for n in now if n not in signed),
        misplaced=_misplaced(folder, record),
    )


def block_html(folder: Path | None, unanchored: list[str] | None = None) -> str:
    """The sign-off block of a report (HTML, every value escaped): who signed, when, the
    statement and whether the files are as signed; or "not signed" (``folder`` None: a report
    that is no period revision, which is never signed). ``unanchored``: why the record is not
    the one the access log recorded (:meth:`Anchor.problems`), shown as a warning; None: not
    checked (no store at hand)."""
    if folder is None:
        body = (
            "<p><strong>Not signed.</strong> A report of a scheduled period is signed by a manager once it is "
            "final (console Reports page, or <code>dealtrail sign-report</code>); this report was made on "
            "request.</p>"
        )
        return _section(body, "unsigned")
    try:
        check = verify(folder)
    except SignOffError as exc:
        return _section(f"<p><strong>Sign-off unreadable:</strong> {html.escape(str(exc))}</p>", "broken")
    r = check.record
    if r is None:
        body = "<p><strong>Not signed.</strong> No manager has signed this revision of the report.</p>"
        return _section(body, "unsigned")
    rows = _rows(r)
    e = html.escape
    if check.intact:
        state = f"Verified: the {len(r['files'])} files of this revision are as they were signed (SHA-256)."
    else:
        state = "<strong>NOT AS SIGNED:</strong> " + e("; ".join(check.problems())) + "."
    if unanchored:
        state += " <strong>SIGN-OFF NOT AS RECORDED:</strong> " + e("; ".join(unanchored)) + "."
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    body = f'<table class="meta">{table}</table><p class="note">{state}</p>'
    return _section(body, "signed" if check.intact and not unanchored else "broken")


def _rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The block's rows of a sign-off record (escaped HTML)."""
    e = html.escape
    return [
        ("Signed by", e(signer_label(r))),
        ("When", e(signed_shown(r))),
        ("Statement", e(str(r.get("statement")))),
        *((("Signed knowing it was stale", e(str(r["signed_stale"]))),) if r.get("signed_stale") else ()),
        (
            "Revision",
            f"{e(str(r.get('revision')))}, {e(str(r.get('status')))}; report digest "
            f"<code>{e(str(r.get('report_digest') or '')[:16])}</code>",
        ),
    ]


def signing_block(record: dict[str, Any]) -> str:
    """The sign-off block printed into the signed PDF while signing (``record`` as
    :func:`sign` hands it to its ``pdf`` maker: who, when, the statement; no files yet)."""
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in _rows(record))
    state = (
        f"Signed. This PDF carries the signature of the property's key (check it with pdfsig); "
        f"{SIGNOFF} beside it lists the SHA-256 of every file of this revision, this PDF included."
    )
    return _section(f'<table class="meta">{table}</table><p class="note">{state}</p>', "signed")


def _section(body: str, state: str) -> str:
    return f'<section id="signoff" class="signoff signoff-{state}"><h2>Sign-off</h2>{body}</section>'


def signer_label(r: Mapping[str, Any]) -> str:
    """Who signed, as a regulator reads it: ``Max Keller, Compliance Manager (console user max,
    manager, signed in with a local account)``; a record without a profile: ``max (manager, ...)``;
    a record from before sign-ins were recorded: ``max (manager)``."""
    who, role = str(r.get("signed_by")), str(r.get("role"))
    how = r.get("signed_in_with")
    signed_in = ""
    if isinstance(how, Mapping) and how.get("method") == "directory":
        signed_in = f", signed in through the directory {how.get('issuer')} as subject {how.get('subject')}"
    elif isinstance(how, Mapping) and how.get("method"):
        signed_in = ", signed in with a local account"
    if r.get("signer_name"):
        title = f", {r['signer_title']}" if r.get("signer_title") else ""
        return f"{r['signer_name']}{title} (console user {who}, {role}{signed_in})"
    return f"{who} ({role}{signed_in})"


def signed_shown(r: Mapping[str, Any], tz: tzinfo | None = None) -> str:
    """When the record was signed, for people: in ``tz``, else in the zone the record names
    (``zone``), else UTC, to the second with its offset and the zone's name
    (:func:`projections.display.timefmt.show`); the stored text when it is no time."""
    at = parsed(r.get("signed_at"))
    if at is None:
        return str(r.get("signed_at"))
    if tz is None:
        try:
            tz = zone(str(r["zone"])) if r.get("zone") else UTC
        except ValueError:
            tz = UTC
    return show(at, tz)


def with_block(report_html: str, block: str) -> str:
    """``report_html`` with its sign-off block (between :data:`BLOCK_START` and
    :data:`BLOCK_END`) replaced by ``block``; unchanged when the report has no block (written
    before sign-offs existed)."""
    start = report_html.find(BLOCK_START)
    end = report_html.find(BLOCK_END, start + 1)
    if start < 0 or end < 0:
        return report_html
    return report_html[: start + len(BLOCK_START)] + block + report_html[end:]


# -- the sign-off's anchor in the access log ------------------------------------------------------

LOGGED_KIND = "report_signed"
"""The access-log kind of a sign-off (the console's button and ``dealtrail sign-report``)."""
_LOGGED = re.compile(r"^(?P<ref>\S+) signoff\.json sha256:(?P<sha>[0-9a-f]{64})$")


def record_sha256(folder: Path) -> str | None:
    """The SHA-256 (hex) of the revision's ``signoff.json`` as it is on disk, or None when it has none."""
    try:
        return hashlib.sha256((folder / SIGNOFF).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def logged_detail(folder: Path, sha256: str) -> str:
    """The detail of the ``report_signed`` access-log entry of a sign-off:
    ``<period>/<rev-NNNN> signoff.json sha256:<hex>`` (the revision, and the SHA-256 of the
    ``signoff.json`` written), so the record is anchored in the access log's hash chain."""
    return f"{folder.parent.name}/{folder.name} signoff.json sha256:{sha256}"


@dataclass(frozen=True)
class Anchor:
    """What :func:`check_anchor` found.

    Attributes:
        sha256: the SHA-256 of the revision's ``signoff.json`` now (None: not signed).
        seq: the access-log entry (``seq``) of the revision's first ``report_signed`` ok entry, or None.
        recorded: the SHA-256 that entry records (None: none, or an entry that records none).
        chain_break: the access log's first break (``(seq, entry_id, problem)``), None when the
            chain is intact or was not checked.
    """

    sha256: str | None
    seq: int | None
    recorded: str | None
    chain_break: tuple[int, str, str] | None = None

    @property
    def ok(self) -> bool:
        """The record is the one the access log recorded, and the log's chain is intact (as checked)."""
        return self.sha256 is not None and self.recorded == self.sha256 and self.chain_break is None

    def problems(self) -> list[str]:
        """One line per reason the record is not anchored (empty when :attr:`ok`)."""
        out = []
        if self.sha256 is None:
            out.append("the revision has no signoff.json")
        elif self.seq is None:
            out.append(
                "the access log records no sign-off of this revision (signoff.json was not written by a sign-off)"
            )
        elif self.recorded is None:
            out.append(f"the access log's entry {self.seq} records no SHA-256 of signoff.json: it cannot be checked")
        elif self.recorded != self.sha256:
            out.append(f"signoff.json differs from the sign-off recorded in the access log at entry {self.seq}")
        if self.chain_break is not None:
            seq, entry_id, problem = self.chain_break
            out.append(f"the access log's chain is broken at entry {seq} ({entry_id}): {problem}")
        return out


def check_anchor(con: duckdb.DuckDBPyConnection, folder: Path, chain: bool = True) -> Anchor:
    """Check the revision's ``signoff.json`` against its ``report_signed`` entry in the access log.

    The first ``ok`` entry for the revision is the sign-off (a record is written once); its
    recorded SHA-256 must be the file's now. ``signoff.json`` covers the report's files, and the
    access log's hash chain covers ``signoff.json``.

    Args:
        con: any connection of the store that holds the access log.
        folder: the revision folder (``<period>/rev-NNNN``).
        chain: also recompute the access log's whole chain (:func:`projections.records.access_log.check_chain`).

    Returns:
        What was found (:attr:`Anchor.ok`, :meth:`Anchor.problems`).
    """
    from projections.records import access_log

    sha = record_sha256(folder)
    seq: int | None = None
    recorded: str | None = None
    if access_log.has_log(con):
        ref = f"{folder.parent.name}/{folder.name}"
        rows = con.execute(
            """SELECT seq, detail FROM access_log WHERE kind = ? AND outcome = 'ok'
               AND (detail = ? OR starts_with(detail, ?)) ORDER BY seq LIMIT 1""",
            [LOGGED_KIND, ref, ref + " "],
        ).fetchall()
        if rows:
            seq = int(rows[0][0])
            m = _LOGGED.match(str(rows[0][1]))
            recorded = m.group("sha") if m and m.group("ref") == ref else None
    broken = access_log.check_chain(con).first_break if chain else None
    return Anchor(sha, seq, recorded, broken)
