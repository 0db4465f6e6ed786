"""Loading the staff roster from a CSV file (``dealtrail staff import staff.csv``).

The file has a header row naming its columns, in any order and case: ``staff_id``, ``name`` and
``role`` (``dealer`` or ``supervisor``) are required, ``active`` (yes/no, true/false, 1/0; blank:
yes) is optional, other columns are refused. A file saved by Excel reads as it is: a UTF-8 byte
order mark, CRLF line ends, quoted fields (with commas or quotes inside), ``;`` as the separator
(Excel's choice in locales whose decimal mark is a comma), or Windows-1252 text (Excel's "CSV
(Comma delimited)") are all taken. Blank lines are skipped.

Every row is checked before anything is stored; each bad row gets one line naming its line number
and what is wrong, and none is ever dropped without a word: by default nothing is stored while a
row is bad; with ``partial`` the good rows are stored and the bad ones listed. A row equal to the
roster in force records nothing, so importing the same file twice adds no revision.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from ulid import ULID

from schemas.staff import StaffMemberRecorded

REQUIRED = ("staff_id", "name", "role")
OPTIONAL = ("active",)
YES = {"", "yes", "y", "true", "1", "active"}
NO = {"no", "n", "false", "0", "inactive"}


class RosterFileError(ValueError):
    """The file cannot be read as a roster at all (no header, a missing column, not text)."""


@dataclass
class ImportPlan:
    """What an import would record: ``events`` (one per new or changed entry), ``unchanged``
    (rows equal to the roster in force) and ``errors`` (one line per bad row)."""

    events: list[StaffMemberRecorded] = field(default_factory=list)
    unchanged: int = 0
    errors: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """How many events of each kind (added, changed, deactivated, reactivated)."""
        out: dict[str, int] = {}
        for e in self.events:
            out[e.change] = out.get(e.change, 0) + 1
        return out


def _text(data: bytes) -> str:
    """The file's text: UTF-8 (a byte order mark dropped), else Windows-1252 (Excel's ANSI CSV)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            return data.decode("cp1252")
        except UnicodeDecodeError:
            raise RosterFileError("the file is neither UTF-8 nor Windows-1252 text: save it as CSV UTF-8") from None


def _error(exc: ValidationError) -> str:
    """A validation error as one short phrase: which field, what is wrong."""
    parts = []
    for e in exc.errors():
        where = ".".join(str(x) for x in e["loc"]) or "row"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)


def plan_import(
    data: bytes,
    current: Mapping[str, Mapping[str, Any]],
    source: str,
    recorded_by: str,
    recorded_at: datetime,
) -> ImportPlan:
    """Check a roster CSV file against the roster in force and list the events it records.

    Args:
        data: the file's bytes.
        current: the roster in force keyed by ID (``projections.records.staff.current``).
        source: where the rows come from, stored with each event (``import:<file name>``).
        recorded_by: who imports (``cli``, or the console user).
        recorded_at: the instant stamped on every event of this import (timezone-aware).

    Returns:
        The plan; its ``errors`` name each bad row by its line in the file.

    Raises:
        RosterFileError: the file has no header, lacks a required column, names an unknown
            one, or is not text.
    """
    from projections.records.staff import revision

    text = _text(data)
    first = text.split("\n", 1)[0]
    delimiter = ";" if first.count(";") > first.count(",") else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        raise RosterFileError("the file is empty: it needs a header row staff_id,name,role[,active]") from None
    except csv.Error as exc:
        raise RosterFileError(f"line 1: not CSV: {exc}") from None
    cols = [h.strip().lower().replace(" ", "_") for h in header]
    missing = [c for c in REQUIRED if c not in cols]
    unknown = [h for h, c in zip(header, cols, strict=True) if c not in REQUIRED + OPTIONAL]
    if missing or unknown or len(set(cols)) != len(cols):
        said = []
        if missing:
            said.append(f"missing column {', '.join(missing)}")
        if unknown:
            said.append(f"unknown column {', '.join(repr(u) for u in unknown)}")
        if len(set(cols)) != len(cols):
            said.append("a column named twice")
        raise RosterFileError(
            f"line 1: the header must name staff_id, name, role and optionally active ({'; '.join(said)})"
        )
    plan = ImportPlan()
    seen: dict[str, int] = {}
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            plan.errors.append(f"line {reader.line_num}: not CSV: {exc}")
            continue
        line = reader.line_num
        if not any(c.strip() for c in cells):
            continue  # a blank line (Excel writes some at the end)
        if len(cells) != len(cols):
            plan.errors.append(f"line {line}: {len(cells)} fields, the header has {len(cols)}")
            continue
        row = {c: v.strip() for c, v in zip(cols, cells, strict=True)}
        staff_id, role, active_text = row["staff_id"], row["role"].lower(), row.get("active", "").lower()
        if active_text not in YES | NO:
            plan.errors.append(f"line {line}: active must be yes or no, not {row.get('active', '')!r}")
            continue
        if staff_id in seen:
            plan.errors.append(f"line {line}: staff_id {staff_id!r} is already on line {seen[staff_id]}")
            continue
        seen[staff_id] = line
        try:
            event = revision(
                current.get(staff_id),
                change_id=str(ULID()),
                staff_id=staff_id,
                name=row["name"],
                role=role,
                active=active_text in YES,
                recorded_by=recorded_by,
                recorded_at=recorded_at,
                source=source,
            )
        except ValidationError as exc:
            plan.errors.append(f"line {line}: {_error(exc)}")
            continue
        if event is None:
            plan.unchanged += 1
        else:
            plan.events.append(event)
    return plan
