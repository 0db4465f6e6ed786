"""A group of properties (issue 51): each property's store exports its gaming days as signed
Parquet to a shared folder and to an S3 bucket (moto's server on loopback, read through s3fs
registered with DuckDB); the group view verifies every revision and shows each property's
figures, equal to that property's own period report; an altered byte fails verification."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.reporting.exports import day_period, export_day
from dealtrail.reporting.group import SEVERITIES, group_chart, read_group, registered_keys, write_group_report
from dealtrail.reporting.objectstore import Location, open_location
from dealtrail.simulator.floor import FloorSpec, simulate
from projections.models.reviews import ReviewDue
from projections.records.signing import create_key, load_key, public_pem
from projections.reports.report import write_report
from projections.store.store import Store, connect_read_only
from schemas.codec import encode

DAYS = ("2026-11-01", "2026-11-02")
"""Each property deals from 23:15 on the first day, local time, into the second."""
NOW = datetime(2026, 11, 4, 12, 0, tzinfo=UTC)
DUE = ReviewDue(24, 24, 72)


@dataclass(frozen=True)
class Property:
    """One simulated property: its ID, zone, store and signing key."""

    property_id: str
    zone: str
    db: Path
    key_file: Path


PROPERTIES = (("north", "America/New_York", 11), ("river", "UTC", 12), ("harbor", "Asia/Kolkata", 13))
"""Three properties in three zones (one with a half-hour offset)."""


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> list[Property]:
    """Three small properties, each simulated (3 tables, 1.5 hours from 23:15 local) and audited into its own store."""
    from dealtrail.ingest.audit import audit_file

    out = []
    for property_id, zone, seed in PROPERTIES:
        folder = tmp_path_factory.mktemp(property_id)
        start = datetime(2026, 11, 1, 23, 15, tzinfo=ZoneInfo(zone))
        events = folder / "events.jsonl"
        floor = FloorSpec(tables=3, hours=1.5, seed=seed, error_rate=0.2, start=start.astimezone(UTC))
        events.write_bytes(b"".join(encode(e) + b"\n" for e in simulate(floor)))
        db = folder / "store.duckdb"
        with Store(db) as store:
            audit_file(events, store)
        key = folder / "signing.pem"
        create_key(key)
        out.append(Property(property_id, zone, db, key))
    return out


def _export(prop: Property, location: Location, day: str) -> None:
    con = connect_read_only(prop.db)
    try:
        export_day(
            con, location, prop.property_id, day_period(day, prop.zone), prop.zone, load_key(prop.key_file), NOW, DUE
        )
    finally:
        con.close()


@pytest.fixture(scope="module")
def keys(group: list[Property], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The group's folder of registered public keys."""
    folder = tmp_path_factory.mktemp("keys")
    for prop in group:
        (folder / f"{prop.property_id}.pem").write_bytes(public_pem(load_key(prop.key_file)))
    return folder


@pytest.fixture(scope="module")
def exported_folder(group: list[Property], tmp_path_factory: pytest.TempPathFactory) -> Location:
    """Every property's two gaming days exported to a shared folder."""
    location = open_location(str(tmp_path_factory.mktemp("shared") / "exports"))
    for prop in group:
        for day in DAYS:
            _export(prop, location, day)
    return location


@pytest.fixture(scope="module")
def exported_bucket(group: list[Property], s3_server: str) -> Location:
    """Every property's two gaming days exported to a bucket of the loopback S3 server."""
    import boto3

    boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1").create_bucket(Bucket="group-exports")
    location = open_location("s3://group-exports/pa", s3_server)
    for prop in group:
        for day in DAYS:
            _export(prop, location, day)
    return location


@pytest.fixture(scope="module")
def own_reports(group: list[Property], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each property's own period report over the two gaming days (``dealtrail report``'s
    :func:`write_report`), as of the exports' time: its ``summary.json``."""
    tmp = tmp_path_factory.mktemp("own")
    out = {}
    for prop in group:
        start, end = day_period(DAYS[0], prop.zone).start, day_period(DAYS[-1], prop.zone).end
        files = write_report(prop.db, tmp / prop.property_id, start, end, generated_at=NOW, as_of=NOW, review_due=DUE)
        out[prop.property_id] = json.loads(files.summary.read_text(encoding="utf-8"))
    return out


def _as_report(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "rounds": summary["rounds"],
        "voided": summary["rounds_voided"],
        "incidents": summary["incidents"],
        "per_1000": summary["per_1000_rounds"],
        "by_severity": {k: v for k, v in summary["by_severity"].items() if v},
        "by_rule": summary["by_rule"],
        "remedies_owed": summary["remedies_owed"],
        "remedies_late": summary["remedies_done_late"],
        "remedies_overdue": summary["remedies_overdue"],
        "reviews_late": summary["reviews_late"],
        "dead_letters": {k: v for k, v in summary["dead_letters"].items() if v},
        "events": summary["events"],
    }


def _report_figures(own: dict[str, Any]) -> dict[str, Any]:
    from projections.reports.report import per_1000

    findings = own["findings"]
    return {
        "rounds": own["rounds"]["total"],
        "voided": own["rounds"]["voided"],
        "incidents": findings["total"],
        "per_1000": per_1000(findings["total"], own["rounds"]["total"]),
        "by_severity": {k: v for k, v in findings["by_severity"].items() if v},
        "by_rule": findings["by_rule"],
        "remedies_owed": own["remedies"]["owed"],
        "remedies_late": own["remedies"]["done_late"],
        "remedies_overdue": own["remedies"]["overdue"],
        "reviews_late": own["reviews"]["late"],
        "dead_letters": {
            k: v["in_period"] for k, v in own["data_quality"]["dead_letters_by_reason"].items() if v["in_period"]
        },
        "events": own["period"]["events"],
    }


@pytest.mark.parametrize("where", ["folder", "bucket"])
def test_group_view_shows_each_property_with_its_own_period_reports_figures(
    where: str,
    group: list[Property],
    keys: Path,
    own_reports: dict[str, dict[str, Any]],
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    location: Location = request.getfixturevalue(f"exported_{where}")
    views = read_group(location, registered_keys(keys), DAYS[0], "2026-11-03", NOW)
    assert [v.property_id for v in views] == sorted(p.property_id for p in group)
    for prop, view in zip(sorted(group, key=lambda p: p.property_id), views, strict=True):
        assert view.ok, view.problems
        assert [d.gaming_day for d in view.days] == list(DAYS)
        mine = _as_report(view.summary())
        assert mine == _report_figures(own_reports[prop.property_id])
        assert mine["rounds"] > 0 and mine["incidents"] > 0
        assert view.last_day == DAYS[-1] and view.last_export == NOW
    files = write_group_report(views, tmp_path / "group", location.url, DAYS[0], DAYS[-1], NOW)
    page = files.html.read_text(encoding="utf-8")
    assert "FAILED" not in page and all(p.property_id in page for p in group)
    import duckdb

    parquet = duckdb.sql(f"SELECT property_id, status, rounds, by_rule FROM '{files.parquet}' ORDER BY 1").fetchall()
    summaries = [v.summary() for v in views]
    assert parquet == [(s["property_id"], "verified", s["rounds"], s["by_rule"]) for s in summaries]
    listed = json.loads(files.json.read_text())["properties"][0]
    assert listed["status"] == "verified" and listed["last_export_age_hours"] == 0.0
    assert [(r["gaming_day"], r["revision"], r["problem"]) for r in listed["revisions"]] == [(d, 1, None) for d in DAYS]
    # each property against the group by gaming day: its days add up to its report's figures, and the
    # centre line is the group's incidents over its rounds (the days of 100 rounds or more)
    for view in views:
        assert sorted(view.daily) == list(DAYS)
        assert sum(d["rounds"] for d in view.daily.values()) == view.summary()["rounds"]
        assert sum(sum(d[s] for s in SEVERITIES) for d in view.daily.values()) == view.summary()["incidents"]
    points = group_chart(views, "day")
    solid = [d for v in views for d in v.daily.values() if d["rounds"] >= 100]
    u_bar = 1000 * sum(sum(d[s] for s in SEVERITIES) for d in solid) / sum(d["rounds"] for d in solid)
    assert len(points) == len(views) * len(DAYS) and solid
    assert all(p["u_bar"] == pytest.approx(u_bar, abs=1e-9) for p in points)
    for pt in points:
        day = next(v for v in views if v.property_id == pt["subject_id"]).daily[pt["slot_start"].strftime("%Y-%m-%d")]
        assert pt["u"] == pytest.approx(1000 * sum(day[s] for s in SEVERITIES) / day["rounds"], abs=1e-9)
    from dataclasses import replace as replaced

    unknown = [replaced(v, zone="Mars/Olympus_Mons") for v in views]  # a zone this host lacks: no crash
    assert [p["slot_start_utc"].hour for p in group_chart(unknown, "day")] == [0] * len(points)
    weeks = group_chart(views, "week")  # Sunday 1 November ends a week, Monday the 2nd begins one
    assert [(p["subject_id"], p["slot_start"].strftime("%Y-%m-%d")) for p in weeks] == [
        (v.property_id, w) for v in views for w in ("2026-10-26", "2026-11-02")
    ]
    charts = re.findall(r'alt="Control chart of property (\w+) by gaming day: (\d+) days', page)
    assert charts == [(v.property_id, str(len(DAYS))) for v in views]
    document = json.loads(files.json.read_text())["control_chart"]
    assert document["slot"] == "day" and document["u_bar"] == pytest.approx(u_bar, abs=1e-6)
    assert sorted(document["signals"]) == [v.property_id for v in views]


def _alter_one_byte(location: Location, path: str) -> None:
    data = bytearray(location.read(path))
    data[len(data) // 2] ^= 0x01
    if location.scheme == "file":
        Path(path).chmod(0o600)
        Path(path).write_bytes(bytes(data))
    else:
        location.fs.pipe_file(path, bytes(data))


@pytest.mark.parametrize("where", ["folder", "bucket"])
def test_an_export_with_one_altered_byte_is_shown_as_failing_verification(
    where: str, group: list[Property], keys: Path, request: pytest.FixtureRequest, tmp_path: Path, s3_server: str
) -> None:
    source: Location = request.getfixturevalue(f"exported_{where}")
    if where == "folder":  # a copy, so the other tests read the exports as written
        copy = tmp_path / "exports"
        shutil.copytree(source.root, copy)
        location = open_location(str(copy))
    else:
        import boto3

        s3 = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
        s3.create_bucket(Bucket="altered")
        location = open_location("s3://altered/pa", s3_server)
        source.fs.copy(source.root, "altered/pa", recursive=True)
    _alter_one_byte(
        location, location.path("property=river", "gaming_day=2026-11-02", "revision=0001", "findings.parquet")
    )
    views = {v.property_id: v for v in read_group(location, registered_keys(keys), DAYS[0], "2026-11-03", NOW)}
    assert views["north"].ok and views["harbor"].ok
    river = views["river"]
    assert not river.ok and river.summary()["status"] == "FAILED"
    assert river.summary()["days_failed"] == ["2026-11-02"]
    assert any("findings.parquet does not match its SHA-256" in p for p in river.problems), river.problems
    # the command line says so and exits 4; the page names the property and the reason
    env = {"DEALTRAIL_GROUP__S3_ENDPOINT": s3_server} if where == "bucket" else {}
    run = CliRunner().invoke(
        app,
        [
            "group",
            "report",
            "--from",
            DAYS[0],
            "--to",
            DAYS[-1],
            "--out",
            str(tmp_path / "g"),
            "--source",
            location.url,
            "--keys",
            str(keys),
        ],
        env=env,
    )
    assert run.exit_code == 4, run.output
    assert "river: FAILED verification" in run.output
    page = next((tmp_path / "g").glob("rev-0001/group.html")).read_text(encoding="utf-8")
    assert "Properties failing verification (1)" in page and "does not match its SHA-256" in page
    if where == "folder":  # the printed report says the same, read back as a regulator's tool reads it
        printed = CliRunner().invoke(
            app,
            ["group", "report", "--from", DAYS[0], "--to", DAYS[-1], "--out", str(tmp_path / "g"), "--source",
             location.url, "--keys", str(keys), "--pdf"],
        )  # fmt: skip
        assert printed.exit_code == 4, printed.output
        pdf = tmp_path / "g" / "rev-0002" / "group.pdf"
        assert pdf.is_file() and (pdf.stat().st_mode & 0o777) == 0o600, printed.output
        text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True)
        said = " ".join(text.stdout.split())
        assert "river" in said and "does not match its SHA-256" in said and "north" in said, said[:2000]


def test_a_property_with_no_key_or_no_export_is_shown_failing_never_left_out(
    exported_folder: Location, keys: Path, tmp_path: Path
) -> None:
    registered = registered_keys(keys)
    registered["lakeside"] = registered.pop("harbor")  # harbor exports unregistered; lakeside never exported
    views = {v.property_id: v for v in read_group(exported_folder, registered, DAYS[0], "2026-11-03", NOW)}
    assert set(views) == {"north", "river", "harbor", "lakeside"}
    assert views["harbor"].problems == ["harbor exports, but no public key is registered for it"]
    assert views["lakeside"].problems == ["no export of lakeside found"]
    # a key that is not the property's: every day fails its signature
    registered["north"] = registered["river"]
    north = next(
        v for v in read_group(exported_folder, registered, DAYS[0], "2026-11-03", NOW) if v.property_id == "north"
    )
    assert len(north.problems) == 2 and all("signature does not verify" in p for p in north.problems)


def test_re_exporting_a_day_writes_a_new_revision_beside_the_old_one_owner_only_and_signed(
    group: list[Property], keys: Path, tmp_path: Path
) -> None:
    location = open_location(str(tmp_path / "exports"))
    prop = group[0]
    _export(prop, location, DAYS[0])
    first = Path(location.path(f"property={prop.property_id}", f"gaming_day={DAYS[0]}", "revision=0001"))
    before = {p.name: p.read_bytes() for p in first.iterdir()}
    _export(prop, location, DAYS[0])
    second = first.with_name("revision=0002")
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before  # never written over
    assert sorted(p.name for p in second.iterdir()) == sorted(before)
    assert json.loads((second / "manifest.json").read_text())["revision"] == 2
    for path in [location.root, *(str(p) for p in Path(location.root).rglob("*"))]:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode == (0o700 if Path(path).is_dir() else 0o600), (path, oct(mode))
    # an outsider checks the signature: openssl, with the registered public key
    pem = keys / f"{prop.property_id}.pem"
    run = subprocess.run(
        [
            "openssl",
            "pkeyutl",
            "-verify",
            "-pubin",
            "-inkey",
            str(pem),
            "-rawin",
            "-in",
            str(second / "manifest.json"),
            "-sigfile",
            str(second / "manifest.json.sig"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0 and "Signature Verified Successfully" in run.stdout, run.stdout + run.stderr
    # the group reads the latest revision
    view = read_group(location, registered_keys(keys), DAYS[0], DAYS[1], NOW)
    north = next(v for v in view if v.property_id == prop.property_id)
    assert [(d.gaming_day, d.revision) for d in north.days] == [(DAYS[0], 2)]


def test_dealtrail_export_exports_the_closed_gaming_days_once_then_a_day_again_as_a_new_revision(
    group: list[Property], tmp_path: Path
) -> None:
    prop = group[1]
    env = {
        "DEALTRAIL_EXPORT__PROPERTY_ID": prop.property_id,
        "DEALTRAIL_SIGNING__KEY_FILE": str(prop.key_file),
        "DEALTRAIL_DB": str(prop.db),
        "DEALTRAIL_TIMEZONE": prop.zone,
    }
    out = tmp_path / "exports"
    runner = CliRunner()
    first = runner.invoke(app, ["export", "--to", str(out), "--now", "2026-11-03T12:00:00+00:00"], env=env)
    assert first.exit_code == 0, first.output
    assert "exported 2026-11-01 revision 1" in first.output and "exported 2026-11-02 revision 1" in first.output
    again = runner.invoke(app, ["export", "--to", str(out), "--now", "2026-11-03T12:00:00+00:00"], env=env)
    assert again.exit_code == 0 and "no closed gaming day left to export" in again.output
    day = runner.invoke(app, ["export", "--to", str(out), "--day", "2026-11-02"], env=env)
    assert day.exit_code == 0 and "exported 2026-11-02 revision 2" in day.output, day.output
    unsigned = runner.invoke(
        app, ["export", "--to", str(out), "--day", "2026-11-02"], env={**env, "DEALTRAIL_SIGNING__KEY_FILE": ""}
    )
    assert unsigned.exit_code == 2 and "signed with the property's key" in unsigned.output


SPARK_FIGURES = """
WITH revisions AS (
    SELECT property, gaming_day, revision, figure, key, value,
           max(revision) OVER (PARTITION BY property, gaming_day) AS latest
    FROM figures
    WHERE gaming_day >= '{first}' AND gaming_day < '{end}'
)
SELECT property, figure, key, sum(value) AS value
FROM revisions WHERE revision = latest
GROUP BY property, figure, key
"""
"""The group's per-property figures in Spark SQL: the latest revision of each day, summed."""


def test_spark_reads_the_same_exports_and_gives_the_group_views_figures(
    spark: Any, group: list[Property], exported_folder: Location, keys: Path, tmp_path: Path
) -> None:
    """Spark (local mode) reads the export layout by its partitions (property, gaming_day,
    revision) and sums each property's latest revisions: the same figures as the group view,
    with a second revision of one day to pick over."""
    shutil.copytree(exported_folder.root, tmp_path / "exports")
    location = open_location(str(tmp_path / "exports"))
    _export(group[0], location, DAYS[1])  # a revision 2: Spark must take it, not add it
    views = read_group(location, registered_keys(keys), DAYS[0], "2026-11-03", NOW)
    assert all(v.ok for v in views)
    root = location.root
    frame = spark.read.option("basePath", root).parquet(f"{root}/property=*/gaming_day=*/revision=*/figures.parquet")
    frame.createOrReplaceTempView("figures")
    rows = spark.sql(SPARK_FIGURES.format(first=DAYS[0], end="2026-11-03")).collect()
    sparked: dict[str, dict[str, dict[str, int]]] = {}
    for r in rows:
        sparked.setdefault(r["property"], {}).setdefault(r["figure"], {})[r["key"]] = int(r["value"])
    assert set(sparked) == {v.property_id for v in views}
    for view in views:
        assert sparked[view.property_id] == view.figures
        assert sparked[view.property_id]["rounds"][""] == view.summary()["rounds"] > 0


def test_the_projector_exports_each_closed_gaming_day_once_at_its_looks(group: list[Property], tmp_path: Path) -> None:
    """``dealtrail project`` with ``DEALTRAIL_EXPORT__TO``: at each look for closed periods (no
    report schedule needed) the writer exports the closed gaming days not exported yet, from the
    trail's first up to the clock's (a day without a round is exported too: the property is alive)."""
    from dealtrail.ingest.projector import Exporter, ProjectSummary, _Reporting
    from projections.store.store import BatchCounts

    prop = group[2]
    db = tmp_path / "store.duckdb"
    shutil.copy(prop.db, db)
    location = open_location(str(tmp_path / "exports"))
    with Store(db) as store:
        summary = ProjectSummary(written=BatchCounts())
        looks = _Reporting(store, None, summary, None, None, lambda: NOW, None, DUE, None, None, 30.0)
        looks.exporter = Exporter(location, prop.property_id, prop.zone, load_key(prop.key_file))
        looks.look(wrote=False, caught_up=True)
        closed = [*DAYS, "2026-11-03"]  # 4 November 12:00 UTC is 17:30 in Kolkata: the 3rd has closed
        assert [f.rsplit("/", 2)[-2:] for f in summary.exports] == [
            [f"gaming_day={d}", "revision=0001"] for d in closed
        ]
        looks.look(wrote=False, caught_up=True)
        assert len(summary.exports) == 3  # each day once
    views = read_group(location, {prop.property_id: public_pem(load_key(prop.key_file))}, DAYS[0], "2026-11-03", NOW)
    assert [v.ok for v in views] == [True] and views[0].figure("rounds") > 0


def test_an_export_holds_each_findings_review_state_as_of_the_export(group: list[Property], tmp_path: Path) -> None:
    """A review made after an export is not in it; the next revision, exported after the review, has it."""
    import duckdb

    from projections.models.reviews import append_review
    from schemas.reviews import FindingAcknowledged

    prop = group[1]
    db = tmp_path / "store.duckdb"
    shutil.copy(prop.db, db)
    period = day_period(DAYS[0], prop.zone)
    with Store(db) as store:
        row = store.con.execute(
            "SELECT finding_id FROM fct_detections WHERE observed_at >= $1 AND observed_at < $2 ORDER BY 1 LIMIT 1",
            [period.start, period.end],
        ).fetchall()
        finding = str(row[0][0])
        review = FindingAcknowledged(
            review_id="R1", finding_id=finding, user="ann", reviewed_at=NOW + timedelta(hours=1)
        )
        append_review(store.con, review)
    location = open_location(str(tmp_path / "exports"))
    key = load_key(prop.key_file)
    con = connect_read_only(db)
    try:
        for at in (NOW, NOW + timedelta(hours=2)):
            export_day(con, location, prop.property_id, period, prop.zone, key, at, DUE)
    finally:
        con.close()
    day = location.path(f"property={prop.property_id}", f"gaming_day={DAYS[0]}")
    states = [
        duckdb.sql(
            f"SELECT review_status FROM '{day}/revision={n:04d}/findings.parquet' WHERE finding_id = $f",
            params={"f": finding},
        ).fetchall()
        for n in (1, 2)
    ]
    assert states[0] == [("unreviewed",)] and states[1] != states[0] and len(states[1]) == 1
