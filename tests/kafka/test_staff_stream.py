"""The staff roster in the streaming deployment, on the real broker: ``dealtrail staff import
--publish`` and the console's staff sink publish roster events to the staff topic, and the
projector stores them as it stores reviews (idempotently, a foreign record dead-lettered)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from tests.kafka.conftest import Cluster, project_all

pytestmark = pytest.mark.kafka


def test_a_roster_published_to_the_staff_topic_reaches_the_projectors_store(cluster: Cluster, tmp_path: Path) -> None:
    from kafka import KafkaProducer

    from dealtrail.cli.stream import _publish_staff
    from projections.records import staff

    roster = tmp_path / "staff.csv"
    roster.write_bytes(b'\xef\xbb\xbfstaff_id,name,role\r\nD-1,"Lee, Ann",dealer\r\nFLOOR-1,Sam Okafor,supervisor\r\n')
    assert "2 added" in cluster.cli("staff", "import", str(roster), "--publish").stdout
    # read back from the topic: the same file again records nothing
    assert "no change (2 unchanged)" in cluster.cli("staff", "import", str(roster), "--publish").stdout
    settings = cluster.settings()
    event = staff.revision(
        {"name": "Lee, Ann", "role": "dealer", "active": True},
        change_id="01JSTAFFSTREAM00000000000X",
        staff_id="D-1",
        name="Lee, Ann",
        role="dealer",
        active=False,
        recorded_by="ada",
        recorded_at=datetime.now(UTC),
        source="console",
    )
    assert event is not None
    _publish_staff(settings)([event])  # what the console's Staff page does under project --serve
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    producer.send(settings.topics.staff.name, key=b"D-2", value=b'{"type": "StaffMemberRecorded"}').get(timeout=30)
    producer.close()
    db = tmp_path / "s.duckdb"
    project_all(cluster, db)
    project_all(cluster, db)  # a second run from the stored offsets adds nothing
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert staff.names(con) == {"D-1": "Lee, Ann", "FLOOR-1": "Sam Okafor"}
        changes = sorted((h["staff_id"], h["change"], h["recorded_by"]) for h in staff.history(con))
        assert changes == [("D-1", "added", "cli"), ("D-1", "deactivated", "ada"), ("FLOOR-1", "added", "cli")]
        assert con.execute("SELECT count(*) FROM staff_changes").fetchone()[0] == 3  # type: ignore[index]
        dead = con.execute("SELECT reason FROM dead_letters WHERE source = ?", [settings.topics.staff.name]).fetchall()
        assert dead == [("unreadable_record",)]
    finally:
        con.close()
