"""Revisions of a period's report: each written beside the others, never over one.

A period's folder ``<reports>/<label>/`` holds one sub-folder per revision, ``rev-0001/``,
``rev-0002/`` ..., each a whole report (``report.html``, ``findings.csv``,
``findings.parquet``, ``summary.json``), and ``manifest.json``: the period and its revisions,
oldest first, each with its status (final or provisional), as-of time, digest and, for all
but the latest, ``superseded_by``. A revision is written into a hidden temporary folder and
renamed into place once complete, so a reader never sees half a report; the manifest is
derived from the revision folders (rebuilt after each revision, replaced atomically) and
never the only record of anything. A report written before revisions existed (its files
directly in the period's folder) is listed as revision 0 and left where it is.

Each revision is sealed before it is put in place (:func:`seal`): ``manifest-sha256.txt`` lists
the SHA-256 of each of its files (``sha256sum`` format, which ``sha256sum -c`` checks), and with
the property's signing key ``manifest-sha256.txt.sig`` is the key's detached Ed25519 signature of
that manifest and ``signing-key.pem`` its public key; without a key, ``UNSIGNED.txt`` says the
revision is not signed (and why), so an unsigned revision is never silently so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from projections.records.signing import key_id, public_pem, sign, verify
from projections.store.private import make_private_dirs, open_private, write_private_text

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

REVISION = re.compile(r"^rev-([0-9]{4,9})$")
"""The name of a revision's folder."""
MANIFEST = "manifest.json"
LEGACY = "."
"""The folder (relative to the period's) of a report written before revisions: the period's own."""
FILES_MANIFEST = "manifest-sha256.txt"
"""A revision's list of its files' SHA-256, one ``<hex>  <name>`` line each (``sha256sum`` format)."""
FILES_SIGNATURE = FILES_MANIFEST + ".sig"
"""The detached Ed25519 signature of :data:`FILES_MANIFEST` by the property's key (64 bytes)."""
PUBLIC_KEY = "signing-key.pem"
"""The public key the revision was signed with (compare its ID with the registered key's)."""
UNSIGNED = "UNSIGNED.txt"
"""Written instead of a signature when no signing key was set: the revision says it is unsigned."""
SEAL_FILES = frozenset({FILES_MANIFEST, FILES_SIGNATURE, PUBLIC_KEY, UNSIGNED})
"""The files :func:`seal` writes, which the manifest does not list."""


class RevisionSignatureError(ValueError):
    """A revision's seal does not hold: a file changed, missing or added since it was sealed, a
    signature that does not verify, or a key that is not registered; the message says which."""


def file_hashes(folder: Path, skip: frozenset[str] = SEAL_FILES) -> dict[str, str]:
    """The SHA-256 (hex) of every regular file directly in ``folder`` but those in ``skip`` (the
    seal's own files, :data:`SEAL_FILES`; a sign-off passes its own) and hidden files, by name,
    sorted. One definition for the seal and the sign-off."""
    out: dict[str, str] = {}
    for path in sorted(folder.iterdir()):
        if path.name in skip or path.name.startswith(".") or not path.is_file() or path.is_symlink():
            continue
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        out[path.name] = digest.hexdigest()
    return out


def _write_bytes(path: Path, data: bytes) -> None:
    with open_private(path, binary=True) as fh:
        fh.write(data)


def seal(folder: Path, signer: Ed25519PrivateKey | None) -> str | None:
    """Seal the report files in ``folder`` (a revision not yet in place): write
    :data:`FILES_MANIFEST` and, with ``signer``, its detached signature :data:`FILES_SIGNATURE`
    and :data:`PUBLIC_KEY`; without one, :data:`UNSIGNED`. Every file owner-only.

    Checkable without dealtrail: ``sha256sum -c manifest-sha256.txt`` and
    ``openssl pkeyutl -verify -rawin -pubin -inkey key.pem -sigfile manifest-sha256.txt.sig -in manifest-sha256.txt``.

    Args:
        folder: the revision's folder, with its report files written.
        signer: the property's signing key; None: the revision is marked unsigned.

    Returns:
        The signing key's ID, or None when unsigned.
    """
    manifest = "".join(f"{sha}  {name}\n" for name, sha in file_hashes(folder).items()).encode()
    _write_bytes(folder / FILES_MANIFEST, manifest)
    if signer is None:
        write_private_text(
            folder / UNSIGNED,
            "This report revision is NOT signed: no signing key was set (DEALTRAIL_SIGNING__KEY_FILE) when it "
            f"was written. {FILES_MANIFEST} lists the SHA-256 of each of its files.\n",
        )
        return None
    pem = public_pem(signer)
    _write_bytes(folder / FILES_SIGNATURE, sign(signer, manifest))
    _write_bytes(folder / PUBLIC_KEY, pem)
    return key_id(pem)


def signature_of(folder: Path) -> tuple[bool | None, str | None]:
    """Whether the revision in ``folder`` says it is signed: ``(True, key ID)``, ``(False, None)``
    (sealed unsigned), or ``(None, None)`` (written before revisions were sealed)."""
    pem = folder / PUBLIC_KEY
    if (folder / FILES_SIGNATURE).is_file() and pem.is_file():
        try:
            return True, key_id(pem.read_bytes())
        except ValueError:
            return True, None
    if (folder / UNSIGNED).is_file():
        return False, None
    return None, None


def check_seal(folder: Path, public_keys: dict[str, bytes]) -> str:
    """Check a revision's seal: every file as :data:`FILES_MANIFEST` lists it (nothing changed,
    missing or added, the sign-off's files aside) and the manifest's signature.

    Args:
        folder: a revision folder.
        public_keys: key ID -> public key (PEM) registered for the property; the signature must
            be by one of them (the key the revision carries is not trusted by itself).

    Returns:
        One line: the key that signed the revision, or that it is sealed unsigned.

    Raises:
        RevisionSignatureError: the seal does not hold (one clear sentence).
    """
    from projections.records.signoff import SIGNED_PDF, SIGNOFF, SIGNOFF_SIGNATURE

    try:
        manifest = (folder / FILES_MANIFEST).read_bytes()
    except FileNotFoundError:
        raise RevisionSignatureError(
            f"{folder} has no {FILES_MANIFEST} (written before revisions were sealed)"
        ) from None
    listed = {}
    for line in manifest.decode("utf-8", "replace").splitlines():
        sha, _, name = line.partition("  ")
        listed[name] = sha
    now = file_hashes(folder)
    for name in {SIGNOFF, SIGNOFF_SIGNATURE, SIGNED_PDF} - set(listed):
        now.pop(name, None)  # a sign-off made after the revision: its own record covers it
    changed = sorted(n for n in listed if n in now and now[n] != listed[n])
    missing = sorted(n for n in listed if n not in now)
    added = sorted(n for n in now if n not in listed)
    if changed or missing or added:
        raise RevisionSignatureError(
            f"{folder.name}: not as sealed: "
            + "; ".join(
                [f"{n} changed" for n in changed] + [f"{n} missing" for n in missing] + [f"{n} added" for n in added]
            )
        )
    signed, kid = signature_of(folder)
    if not signed:
        return f"{folder.name}: {len(listed)} files as sealed; NOT signed (no signing key was set when it was written)"
    if kid is None or kid not in public_keys:
        raise RevisionSignatureError(f"{folder.name} is signed by key {kid}, which is not a registered key")
    if not verify(public_keys[kid], manifest, (folder / FILES_SIGNATURE).read_bytes()):
        raise RevisionSignatureError(f"{FILES_SIGNATURE} is not key {kid}'s signature of {FILES_MANIFEST} (altered)")
    return f"{folder.name}: {len(listed)} files as sealed; {FILES_MANIFEST} signed by the property's key {kid}"


def revision_folder(number: int) -> str:
    """The folder name of revision ``number`` (``rev-0001``)."""
    return f"rev-{number:04d}"


def _meta(folder: Path) -> dict[str, Any] | None:
    """The ``report`` section of the ``summary.json`` in ``folder`` (``{}`` for a report written
    before it existed), or None when there is no readable report there."""
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (folder / "report.html").is_file() or not isinstance(summary, dict):
        return None
    meta = summary.get("report")
    return meta if isinstance(meta, dict) else {}


def history(period: Path) -> list[dict[str, Any]]:
    """The revisions of the period whose folder is ``period``, oldest first.

    Each is ``{"revision": n, "folder": "rev-000n" (or "." for a report written before
    revisions, numbered 0), "status": "final" | "provisional" | None (not recorded),
    "status_reason", "as_of", "digest", "coverage", "superseded_by": n | None, "signed": True |
    False | None (written before revisions were sealed), "signing_key": its ID | None}``; a
    revision folder without a readable report (an interrupted write never renamed into place is
    not one) is left out.
    """
    found: list[tuple[int, str, dict[str, Any]]] = []
    legacy = _meta(period)
    if legacy is not None:
        found.append((0, LEGACY, legacy))
    if period.is_dir():
        for sub in period.iterdir():
            m = REVISION.match(sub.name)
            if m and sub.is_dir():
                meta = _meta(sub)
                if meta is not None:
                    found.append((int(m.group(1)), sub.name, meta))
    found.sort(key=lambda item: item[0])
    out = []
    for i, (number, folder, meta) in enumerate(found):
        signed, kid = signature_of(period / folder) if folder != LEGACY else (None, None)
        out.append(
            {
                "revision": number,
                "folder": folder,
                "status": meta.get("status"),
                "status_reason": meta.get("status_reason"),
                "as_of": meta.get("as_of"),
                "digest": meta.get("digest"),
                "coverage": meta.get("coverage"),
                "superseded_by": found[i + 1][0] if i + 1 < len(found) else None,
                "signed": signed,
                "signing_key": kid,
            }
        )
    return out


def latest(period: Path) -> dict[str, Any] | None:
    """The latest revision of the period (see :func:`history`), or None when none is written."""
    revisions = history(period)
    return revisions[-1] if revisions else None


def write_manifest(period: Path, info: dict[str, Any]) -> Path:
    """Write ``manifest.json`` of the period (``info``: its label, start, end and zone, plus
    the revisions from :func:`history`, coverage left out), replacing the previous one
    atomically. Returns its path."""
    revisions = [{k: v for k, v in r.items() if k != "coverage"} for r in history(period)]
    body = {**info, "latest": revisions[-1]["revision"] if revisions else None, "revisions": revisions}
    path = period / MANIFEST
    tmp = period / f".{MANIFEST}.tmp"
    write_private_text(tmp, json.dumps(body, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def add_revision(
    period: Path,
    write: Callable[[Path, int], bool],
    info: dict[str, Any],
    signer: Ed25519PrivateKey | None = None,
) -> Path | None:
    """Write the next revision of the period: ``write(folder, number)`` fills a temporary
    folder and says whether to keep it; a kept one is sealed (:func:`seal`), renamed to
    ``rev-NNNN`` and the manifest rewritten, another removed.

    Args:
        period: the period's folder (made owner-only if missing).
        write: writes the report's files into the folder it is given, as revision ``number``,
            and returns True to keep them (False: they say nothing new).
        info: the period's label, start, end and zone for the manifest.
        signer: the property's signing key (``DEALTRAIL_SIGNING__KEY_FILE``, resolved): signs the
            revision's ``manifest-sha256.txt``; None: the revision is sealed unsigned and says so.

    Returns:
        The revision's folder, or None when ``write`` did not keep it.

    Raises:
        FileExistsError: another writer put that revision in place meanwhile (nothing of
            either is lost: this call's files are removed, the other's stay).
    """
    make_private_dirs(period)
    current = latest(period)
    number = (current["revision"] if current else 0) + 1
    final = period / revision_folder(number)
    tmp = period / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if not write(tmp, number):
            return None
        seal(tmp, signer)
        if final.exists():
            raise FileExistsError(f"{final} was written meanwhile by another writer")
        os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_manifest(period, info)
    return final
