"""The casino's time zone as one setting (issue 36): ``DEALTRAIL_TIMEZONE`` (an IANA name,
default UTC) feeds the one path every command's ``--tz`` takes, the console's times and CSV, and
the scheduled reports' shift boundaries and pages; stored instants stay UTC. America/New_York,
with the night of 2026-11-01 when the clocks fall back (a 25-hour day)."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.console import auth
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.console.deps import local
from dealtrail.reporting.schedule import Schedule
from dealtrail.settings import Settings, load
from projections.models.reviews import ReviewDue
from projections.store.store import Store

NY = "America/New_York"
FALL_BACK = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)  # midnight in New York, the night of the change
PASSWORD = "nina-night-pass"


@pytest.fixture
def eastern(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No DEALTRAIL_* variable of the shell, and DEALTRAIL_TIMEZONE=America/New_York."""
    for key in list(os.environ):
        if key.upper().startswith("DEALTRAIL_") and key != "DEALTRAIL_PYTHON":
            monkeypatch.delenv(key)
    monkeypatch.setenv("DEALTRAIL_TIMEZONE", NY)
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # the host's own zone never leaks into what is shown
    return monkeypatch


def test_the_timezone_setting_defaults_to_utc_and_refuses_a_name_that_is_not_an_iana_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DEALTRAIL_TIMEZONE", raising=False)
    assert load().timezone == "UTC" and load().zone is UTC
    monkeypatch.setenv("DEALTRAIL_TIMEZONE", "Mars/Olympus_Mons")
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus_Mons'"):
        load()


def test_dealtrail_timezone_feeds_the_cli_zone_path_and_the_console_and_a_tz_flag_wins(
    eastern: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dealtrail.cli.common import _zone_name
    from dealtrail.cli.console import _console_config

    settings = load()
    assert settings.timezone == NY and str(settings.zone) == NY
    assert _zone_name(None, settings) == NY
    assert _zone_name("Europe/Malta", settings) == "Europe/Malta"
    config = _console_config(settings, tmp_path / "s.duckdb")
    assert isinstance(config, ConsoleConfig) and str(config.tz) == NY
    bad = CliRunner().invoke(app, ["report", "--db", str(tmp_path / "none.duckdb"), "--tz", "Nowhere/Land"])
    assert bad.exit_code != 0 and "unknown time zone 'Nowhere/Land'" in bad.output and "Traceback" not in bad.output


def test_on_the_night_new_york_falls_back_the_settings_day_has_25_hours_and_times_tell_the_two_0130s_apart(
    eastern: pytest.MonkeyPatch,
) -> None:
    settings = load()
    days = list(
        Schedule("day", settings.timezone).periods(FALL_BACK - timedelta(days=1), FALL_BACK + timedelta(days=2))
    )
    lengths = {p.label: p.end - p.start for p in days}
    assert lengths[f"2026-11-01_{NY.replace('/', '-')}"] == timedelta(hours=25)
    assert lengths[f"2026-10-31_{NY.replace('/', '-')}"] == timedelta(hours=24)
    day = next(p for p in days if p.label.startswith("2026-11-01"))
    assert day.start == datetime(2026, 11, 1, 4, tzinfo=UTC) and day.end == datetime(2026, 11, 2, 5, tzinfo=UTC)
    shifts = list(Schedule("shift", settings.timezone).periods(day.start, day.end + timedelta(hours=8)))
    night = next(p for p in shifts if p.start == datetime(2026, 11, 1, 2, tzinfo=UTC))  # 22:00 EDT on 10-31
    assert night.end - night.start == timedelta(hours=9)  # to 06:00 EST: the hour repeated counts
    assert local(datetime(2026, 11, 1, 5, 30, tzinfo=UTC), settings.zone) == "2026-11-01 01:30:00-04:00"
    assert local(datetime(2026, 11, 1, 6, 30, tzinfo=UTC), settings.zone) == "2026-11-01 01:30:00-05:00"


def test_with_the_setting_schedule_cuts_shifts_on_eastern_hours_and_the_report_shows_eastern_times_with_the_offset(
    eastern: pytest.MonkeyPatch, audited_shift: Path, tmp_path: Path
) -> None:
    db, out = tmp_path / "s.duckdb", tmp_path / "periods"
    shutil.copy(audited_shift, db)
    # the small shift runs 18:00 to about 19:30 UTC on 2026-11-27: 13:00 to 14:30 EST
    run = CliRunner().invoke(
        app, ["schedule", "--every", "shift", "--db", str(db), "--out", str(out), "--now", "2026-11-28T04:00:00Z"]
    )
    assert run.exit_code == 0, run.output
    labels = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert labels == [
        "2026-11-27T0600-0500_America-New_York_shift",  # 06:00 to 14:00 EST (11:00 to 19:00 UTC)
        "2026-11-27T1400-0500_America-New_York_shift",  # 14:00 to 22:00 EST
    ]
    html = (out / labels[0] / "rev-0001" / "report.html").read_text(encoding="utf-8")
    assert "2026-11-27 06:00:00-05:00 America/New_York to 2026-11-27 14:00:00-05:00 America/New_York" in html
    assert "Times are shown in America/New_York" in html
    assert not re.search(r"2026-11-27 1[89]:\d\d:\d\d\+00:00 UTC", html.split("Executive summary", 1)[1])
    with Store(db) as store:  # stored instants stay UTC; the Reports page names the periods in Eastern time
        first = store.con.execute("SELECT min(occurred_at) FROM events").fetchall()[0][0]
        auth.add_user(store.con, "nina", "reviewer", PASSWORD, datetime(2026, 11, 1, tzinfo=UTC))
        config = ConsoleConfig(ReviewDue(24, 24, 72), "n" * 48, reports_dir=out, tz=load().zone)
        client = TestClient(create_app(store, config))
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
        assert csrf
        client.post("/login", data={"username": "nina", "password": PASSWORD, "csrf": csrf.group(1), "next": "/"})
        page = client.get("/reports").text
    assert first.utcoffset() == timedelta(0) and first.astimezone(UTC).hour == 18
    assert "2026-11-27 06:00-05:00 to 14:00-05:00 America/New_York" in page
    assert "as of 2026-11-27 23:00:00-05:00" in page  # --now 04:00 UTC


def test_the_console_shows_times_and_exports_its_csv_in_the_casinos_zone_labelled(
    eastern: pytest.MonkeyPatch, audited_shift: Path, tmp_path: Path
) -> None:
    from dealtrail.cli.console import _console_config

    db = tmp_path / "s.duckdb"
    shutil.copy(audited_shift, db)
    with Store(db) as store:
        auth.add_user(store.con, "nina", "reviewer", PASSWORD, datetime(2026, 11, 1, tzinfo=UTC))
        settings = load()
        resolved = _console_config(settings, db)
        assert isinstance(resolved, ConsoleConfig)
        config = ConsoleConfig(ReviewDue(24, 24, 72), "n" * 48, tz=resolved.tz)
        client = TestClient(create_app(store, config))
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
        assert csrf
        client.post("/login", data={"username": "nina", "password": PASSWORD, "csrf": csrf.group(1), "next": "/"})
        floor = client.get("/").text
        assert "Latest (America/New_York)" in floor and "times in America/New_York" in floor
        assert "11-27 14:" in floor and "11-27 19:" not in floor  # 19:xx UTC is 14:xx EST
        finding_id = store.con.execute("SELECT finding_id FROM dim_findings LIMIT 1").fetchall()[0][0]
        page = client.get(f"/findings/{finding_id}").text
        assert re.search(r"2026-11-27 1[34]:\d\d:\d\d-05:00", page) and "+00:00" not in page.split("<main", 1)[1]
        rows = list(csv.DictReader(io.StringIO(client.get("/findings.csv").text)))
    assert rows and all(re.fullmatch(r"2026-11-27T1[34]:\d\d:\d\d-05:00", r["detected_at"]) for r in rows)


def test_settings_reference_and_compose_name_the_timezone_setting() -> None:
    assert "timezone" in Settings.model_fields
    compose = (Path(__file__).parents[2] / "docker-compose.yml").read_text()
    assert "DEALTRAIL_TIMEZONE: ${DEALTRAIL_TIMEZONE:-UTC}" in compose


def test_a_notification_and_the_digest_zone_follow_the_casinos_zone(eastern: pytest.MonkeyPatch) -> None:
    from dealtrail.reporting.notify import message

    settings = load()
    assert settings.notify.digest_tz is None  # unset: the digest's day is the casino's
    finding = {
        "rule_id": "TCP-679a.9-d-stub-count-due",
        "severity": "integrity",
        "table_id": "TCP-01",
        "round_id": "R-1",
        "message": "stub not counted",
        "citation": "58 Pa. Code 679a.9(d)",
        "observed_at": datetime(2026, 11, 1, 6, 30, tzinfo=UTC),
        "finding_id": "f" * 32,
    }
    text = message(finding, None, None, settings.zone)
    assert "(2026-11-01 01:30:00-05:00 America/New_York)" in text


@pytest.fixture(scope="module")
def fall_back_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three tables dealing from 01:00 EDT (05:00 UTC) on 2026-11-01 for two hours, through the
    hour New York repeats, errors in 30 % of rounds, audited into a store (copy it to change it)."""
    from dealtrail.ingest.audit import audit_file
    from dealtrail.simulator.floor import FloorSpec, simulate
    from schemas.codec import encode

    folder = tmp_path_factory.mktemp("fall-back")
    events, db = folder / "events.jsonl", folder / "night.duckdb"
    spec = FloorSpec(tables=3, hours=2.0, seed=5, error_rate=0.3, start=FALL_BACK + timedelta(hours=1))
    events.write_bytes(b"".join(encode(e) + b"\n" for e in simulate(spec)))
    with Store(db) as store:
        audit_file(events, store)
    return db


def test_scheduled_findings_csv_writes_eastern_times_with_each_offset_of_the_fall_back_night_and_parquet_stays_utc(
    eastern: pytest.MonkeyPatch, fall_back_store: Path, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    db, out = tmp_path / "s.duckdb", tmp_path / "periods"
    shutil.copy(fall_back_store, db)
    run = CliRunner().invoke(
        app, ["schedule", "--every", "shift", "--db", str(db), "--out", str(out), "--now", "2026-11-02T00:00:00Z"]
    )
    assert run.exit_code == 0, run.output
    rev = out / "2026-10-31T2200-0400_America-New_York_shift" / "rev-0001"  # 22:00 EDT to 06:00 EST: 9 hours
    with (rev / "findings.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    times = [r["detected_at"] for r in rows]
    assert times and all(re.fullmatch(r"2026-11-01T0[1-3]:\d\d:\d\d-0[45]:00", t) for t in times), times[:3]
    assert any(t.startswith("2026-11-01T01:") and t.endswith("-04:00") for t in times)  # the first 01:xx
    assert any(t.startswith("2026-11-01T01:") and t.endswith("-05:00") for t in times)  # the repeated one
    parquet = pq.read_table(rev / "findings.parquet")
    kind = parquet.schema.field("detected_at").type
    assert pa.types.is_timestamp(kind) and kind.tz in ("UTC", "Etc/UTC", "+00:00")
    instants = {t.astimezone(UTC).isoformat(timespec="seconds") for t in parquet.column("detected_at").to_pylist()}
    assert instants == {datetime.fromisoformat(t).astimezone(UTC).isoformat() for t in times}


def test_report_and_the_console_export_write_a_time_with_one_definition_of_the_casinos_iso_8601(
    eastern: pytest.MonkeyPatch,
) -> None:
    from dealtrail.console.pages import _csv
    from projections.display.timefmt import iso_local
    from projections.reports.report import local_times

    zone = load().zone
    first, second = datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    assert (iso_local(first, zone), iso_local(second, zone)) == (
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:30:00-05:00",
    )
    import pyarrow as pa

    table = pa.table({"detected_at": pa.array([first, second, None], pa.timestamp("us", tz="UTC")), "n": [1, 2, 3]})
    local = local_times(table, zone)
    assert local.column("detected_at").to_pylist() == [iso_local(first, zone), iso_local(second, zone), None]
    assert local.column("n").to_pylist() == [1, 2, 3]
    exported = list(csv.DictReader(io.StringIO(_csv([{"detected_at": second}], {}, zone))))
    assert exported[0]["detected_at"] == iso_local(second, zone)


def test_a_filter_time_without_an_offset_is_eastern_wall_clock_the_first_0130_and_one_with_an_offset_keeps_it(
    eastern: pytest.MonkeyPatch, fall_back_store: Path, tmp_path: Path
) -> None:
    from dealtrail.console.filters import parse_time

    zone = load().zone
    assert parse_time("2026-11-01T01:30", "from", zone) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # fold=0
    assert parse_time("2026-11-01T01:30-05:00", "from", zone) == datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    assert parse_time("2026-11-01T01:30+00:00", "from", zone) == datetime(2026, 11, 1, 1, 30, tzinfo=UTC)
    assert parse_time("2026-11-01T01:30", "from") == datetime(2026, 11, 1, 1, 30, tzinfo=UTC)  # UTC by default
    db = tmp_path / "s.duckdb"
    shutil.copy(fall_back_store, db)
    with Store(db) as store:
        auth.add_user(store.con, "nina", "reviewer", PASSWORD, datetime(2026, 11, 1, tzinfo=UTC))
        config = ConsoleConfig(ReviewDue(24, 24, 72), "n" * 48, tz=zone)
        client = TestClient(create_app(store, config))
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
        assert csrf
        client.post("/login", data={"username": "nina", "password": PASSWORD, "csrf": csrf.group(1), "next": "/"})
        page = client.get("/findings").text
        assert "From (America/New_York)" in page and "From (UTC)" not in page
        assert "read in America/New_York; in the hour repeated when the clocks go back, as its first occurrence" in page
        assert "read in America/New_York" in client.get("/reports").text

        def exported(**params: str) -> list[str]:
            body = client.get("/findings.csv", params=params).text
            return [r["detected_at"] for r in csv.DictReader(io.StringIO(body))]

        first = exported(**{"from": "2026-11-01T01:00", "to": "2026-11-01T01:59:59"})
        second = exported(**{"from": "2026-11-01T01:00-05:00", "to": "2026-11-01T02:00"})
        assert first and all(t.startswith("2026-11-01T01:") and t.endswith("-04:00") for t in first)
        assert second and all(t.startswith("2026-11-01T01:") and t.endswith("-05:00") for t in second)
        bearer = {"Authorization": "Bearer " + auth.new_token(store.con, "nina", datetime.now(UTC))}
        window = {"from": "2026-11-01T01:00", "to": "2026-11-01T01:59:59"}
        api = client.get("/api/v1/findings", params=window, headers=bearer).json()
        assert api["total"] == len(first)
        doc = client.get("/api/v1/openapi.json", headers=bearer).json()
        described = [p.get("description", "") for p in doc["paths"]["/api/v1/findings"]["get"]["parameters"]]
        assert any("without an offset is read in the casino's zone (DEALTRAIL_TIMEZONE)" in d for d in described)
