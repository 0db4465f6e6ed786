"""A property's daily export: its gaming days as immutable, signed Parquet in a folder or a bucket.

Layout under the export location (:mod:`dealtrail.reporting.objectstore`), Hive-style so that
DuckDB, Spark or Trino read it by partition::

    property=<id>/gaming_day=<YYYY-MM-DD>/revision=<NNNN>/
        findings.parquet      every finding detected that day, with its review state as of the export
        rounds.parquet        rounds dealt and voided, per table
        figures.parquet       the day's figures, long form: (figure, key, value)
        dead_letters.parquet  lines refused that day, by reason
        summary.json          every figure of the day's period report (the same ``build_summary``)
        manifest.json         what the revision covers and the SHA-256 of each file above
        manifest.json.sig     Ed25519 signature of manifest.json's bytes, by the property's key

The files are written by DuckDB (``COPY ... TO ... (FORMAT PARQUET)``) from the same queries as
the property's period report (:func:`projections.reports.report.period_rows`), for the gaming
day (a calendar day in the casino's zone: 23, 24 or 25 hours). The figures of several days add
up to the figures of the period they make (a finding, round or dead letter belongs to one day).

A revision is never written over: exporting a day again writes the next revision beside the
earlier ones (readers take the latest revision whose signature verifies). The signature is the
scheme of the evidence packages and signed reports (:mod:`projections.records.signing`): a
detached signature over the manifest's exact bytes, checked with
``openssl pkeyutl -verify -pubin -inkey KEY.pem -rawin -in manifest.json -sigfile manifest.json.sig``.
``manifest.json.sig`` is written last: a revision without it is incomplete and fails verification.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from dealtrail.reporting.objectstore import Location, LocationError
from dealtrail.reporting.schedule import Period, Schedule, trail_span
from projections.display.timefmt import iso_utc
from projections.records import property as stored_property
from projections.records.signing import SIGNATURE_SUFFIX, key_id, public_pem, sign
from projections.reports.report import period_rows
from streams.engine.catalog import RULEBOOK_REVISION

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from projections.models.reviews import ReviewDue

FORMAT = "dealtrail-export/1"
"""The ``format`` of a manifest this module writes (readers refuse another)."""
MANIFEST = "manifest.json"
SIGNATURE = MANIFEST + SIGNATURE_SUFFIX
TABLES = ("findings", "rounds", "figures", "dead_letters")
"""The Parquet files of a revision (``<name>.parquet``)."""
PROPERTY_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
"""A property's ID in the layout (``DEALTRAIL_EXPORT__PROPERTY_ID``): lower-case letters, digits, hyphens."""
FIGURES_SCHEMA = pa.schema([("figure", pa.string()), ("key", pa.string()), ("value", pa.int64())])
DEAD_LETTERS_SCHEMA = pa.schema([("reason", pa.string()), ("in_period", pa.int64()), ("undated", pa.int64())])


class ExportError(ValueError):
    """An export that cannot be written: no key, a bad property ID, a revision there already."""


@dataclass(frozen=True)
class Exported:
    """One revision written: its gaming day, number and folder (as DuckDB names it), and the
    day's rounds and incidents (for the command's line)."""

    gaming_day: str
    revision: int
    folder: str
    rounds: int
    incidents: int


def gaming_days(zone: str) -> Schedule:
    """The gaming days of a casino in ``zone`` (IANA): calendar days of its wall clock."""
    return Schedule("day", zone)


def day_period(day: str, zone: str) -> Period:
    """The gaming day ``day`` (``YYYY-MM-DD``) in ``zone`` as a period of UTC instants.

    Raises:
        ExportError: ``day`` is not a date.
    """
    try:
        date = datetime.strptime(day, "%Y-%m-%d")
    except ValueError:
        raise ExportError(f"a gaming day is a date (YYYY-MM-DD), not {day!r}") from None
    schedule = gaming_days(zone)
    start = date.replace(tzinfo=schedule.zone)
    return next(schedule.periods(start, start + timedelta(days=2)))


def figure_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The additive figures of a day's ``summary.json`` in long form (``figure``, ``key``, ``value``).

    Each figure is a count over the day that adds up over days to the period's figure: rounds
    (total, voided, by table), incidents (total, records, by severity, status, rule and table),
    events, remedies owed (by outcome), late reviews and dead letters by reason. A rate (per
    1,000 rounds) is not a row: it is the sum of incidents over the sum of rounds.
    """
    rows: list[tuple[str, str, int]] = []
    rounds, findings = summary["rounds"], summary["findings"]
    rows += [("rounds", "", rounds["total"]), ("rounds_voided", "", rounds["voided"])]
    rows += [("rounds_by_table", t, n) for t, n in rounds["by_table"].items()]
    rows += [("incidents", "", findings["total"]), ("finding_records", "", findings["records"])]
    for name in ("by_severity", "by_status", "by_rule", "by_table"):
        rows += [(f"incidents_{name}", k, n) for k, n in findings[name].items()]
    rows.append(("events", "", summary["period"]["events"]))
    for outcome in ("owed", "done_on_time", "done_late", "open", "overdue"):
        rows.append(("remedies", outcome, summary["remedies"][outcome] or 0))
    late = summary["reviews"].get("late")
    if late is not None:
        rows.append(("reviews_late", "", late))
    for reason, counts in summary["data_quality"]["dead_letters_by_reason"].items():
        rows.append(("dead_letters", reason, counts["in_period"]))
    return [{"figure": f, "key": k, "value": int(v)} for f, k, v in rows]


def _copy(con: duckdb.DuckDBPyConnection, table: pa.Table, path: Path) -> None:
    """``COPY`` the Arrow ``table`` to ``path`` as Parquet (owner-only before and after)."""
    from projections.store.private import make_private, open_private

    open_private(path, binary=True).close()
    con.register("export_rows", table)
    try:
        con.execute(f"COPY export_rows TO '{path}' (FORMAT PARQUET)")
    finally:
        con.unregister("export_rows")
    make_private(path)


def next_revision(location: Location, property_id: str, gaming_day: str) -> int:
    """The number the next revision of ``gaming_day`` takes (1 for the first)."""
    day = location.path(f"property={property_id}", f"gaming_day={gaming_day}")
    numbers = [int(m.group(1)) for n in location.folders(day) if (m := re.fullmatch(r"revision=(\d{4,})", n))]
    return max(numbers, default=0) + 1


def export_day(
    con: duckdb.DuckDBPyConnection,
    location: Location,
    property_id: str,
    period: Period,
    zone: str,
    key: Ed25519PrivateKey,
    exported_at: datetime,
    review_due: ReviewDue | None = None,
    property_name: str | None = None,
    archive: Path | None = None,
) -> Exported:
    """Write a new revision of one gaming day's export (see the module docstring).

    Args:
        con: a read-only connection to the property's store.
        location: where the exports go.
        property_id: the property's ID in the layout (:data:`PROPERTY_ID`).
        period: the gaming day (:func:`day_period` or :meth:`Schedule.periods`).
        zone: the casino's zone (IANA), recorded in the manifest.
        key: the property's signing key.
        exported_at: the export's time: reviews made later are not counted, lateness is judged then.
        review_due: the review due times (None: lateness is not judged).
        property_name: the property's name (``DEALTRAIL_PROPERTY``; the store's recorded name wins).
        archive: the archive folder of the store's archived months (None: the store's manifest names it).

    Returns:
        The revision written.

    Raises:
        ExportError: a property ID outside :data:`PROPERTY_ID`, or the revision taken meanwhile.
        LocationError: a file of the revision there already.
    """
    if not PROPERTY_ID.fullmatch(property_id):
        raise ExportError(
            f"the property ID {property_id!r} must be 1 to 63 lower-case letters, digits or hyphens "
            "(DEALTRAIL_EXPORT__PROPERTY_ID)"
        )
    gaming_day = period.start.astimezone(gaming_days(zone).zone).strftime("%Y-%m-%d")
    summary, findings, rounds = period_rows(con, period.start, period.end, review_due, exported_at, archive)
    dead = [
        {"reason": reason, "in_period": c["in_period"], "undated": c["undated"]}
        for reason, c in summary["data_quality"]["dead_letters_by_reason"].items()
    ]
    tables = {
        "findings": findings,
        "rounds": rounds,
        "figures": pa.Table.from_pylist(figure_rows(summary), FIGURES_SCHEMA),
        "dead_letters": pa.Table.from_pylist(dead, DEAD_LETTERS_SCHEMA),
    }
    with tempfile.TemporaryDirectory(prefix="dealtrail-export-") as tmp:
        staging = Path(tmp)
        writer = duckdb.connect()
        try:
            writer.execute("SET TimeZone = 'UTC'")
            for name, table in tables.items():
                _copy(writer, table, staging / f"{name}.parquet")
        finally:
            writer.close()
        contents = {f"{name}.parquet": (staging / f"{name}.parquet").read_bytes() for name in TABLES}
    contents["summary.json"] = (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode()
    revision = next_revision(location, property_id, gaming_day)
    folder = location.path(f"property={property_id}", f"gaming_day={gaming_day}", f"revision={revision:04d}")
    if not location.claim(folder):
        raise ExportError(f"revision {revision} of {gaming_day} was written meanwhile: export the day again")
    pem = public_pem(key)
    manifest = {
        "format": FORMAT,
        "property_id": property_id,
        "property_name": stored_property.resolve(con, property_name),
        "gaming_day": gaming_day,
        "zone": zone,
        "period": {"start": iso_utc(period.start), "end": iso_utc(period.end)},
        "revision": revision,
        "exported_at": iso_utc(exported_at),
        "as_of": iso_utc(exported_at),
        "rulebook_revision": RULEBOOK_REVISION,
        "key_id": key_id(pem),
        "files": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)} for name, data in contents.items()
        },
    }
    body = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    for name, data in contents.items():
        location.write_new(f"{folder}/{name}", data)
    location.write_new(f"{folder}/{MANIFEST}", body)
    location.write_new(f"{folder}/{SIGNATURE}", sign(key, body))  # last: the revision is whole
    return Exported(
        gaming_day, revision, location.duckdb_path(folder), summary["rounds"]["total"], summary["findings"]["total"]
    )


def due_days(
    con: duckdb.DuckDBPyConnection, location: Location, property_id: str, zone: str, now: datetime
) -> list[Period]:
    """The closed gaming days of the store's trail (up to ``now``) that have no export yet."""
    span = trail_span(con)
    if span is None:
        return []
    out = []
    for period in gaming_days(zone).periods(span[0], now):
        day = period.start.astimezone(gaming_days(zone).zone).strftime("%Y-%m-%d")
        if next_revision(location, property_id, day) == 1:
            out.append(period)
    return out


__all__ = [
    "FORMAT",
    "MANIFEST",
    "SIGNATURE",
    "ExportError",
    "Exported",
    "LocationError",
    "day_period",
    "due_days",
    "export_day",
    "figure_rows",
    "gaming_days",
    "next_revision",
]
