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
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from projections.store.private import make_private_dirs, write_private_text

REVISION = re.compile(r"^rev-([0-9]{4,9})$")
"""The name of a revision's folder."""
MANIFEST = "manifest.json"
LEGACY = "."
"""The folder (relative to the period's) of a report written before revisions: the period's own."""


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
    "status_reason", "as_of", "digest", "coverage", "superseded_by": n | None}``; a revision
    folder without a readable report (an interrupted write never renamed into place is not one)
    is left out.
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


def add_revision(period: Path, write: Callable[[Path, int], bool], info: dict[str, Any]) -> Path | None:
    """Write the next revision of the period: ``write(folder, number)`` fills a temporary
    folder and says whether to keep it; a kept one is renamed to ``rev-NNNN`` and the manifest
    rewritten, another removed.

    Args:
        period: the period's folder (made owner-only if missing).
        write: writes the report's files into the folder it is given, as revision ``number``,
            and returns True to keep them (False: they say nothing new).
        info: the period's label, start, end and zone for the manifest.

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
        if final.exists():
            raise FileExistsError(f"{final} was written meanwhile by another writer")
        os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_manifest(period, info)
    return final
