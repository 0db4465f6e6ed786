"""An exact copy is never a new fact through Kafka either (issue 32): a file published twice,
with or without its hashes and with or without the publisher's chain, gives the worker and the
projector exactly the findings and events of the file published once."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from dealtrail.ingest.audit import audit_file
from projections.store.store import Store
from tests.helpers import write_unchained
from tests.kafka.conftest import Cluster, consume_all, findings_of, project_all

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize(
    ("hashed", "chain", "restart"),
    [(True, True, False), (False, True, False), (True, False, False), (False, False, True)],
    ids=["hashed", "unhashed", "hashed-no-chain", "unhashed-no-chain-new-worker"],
)
def test_a_file_published_twice_streams_as_the_file_once(
    cluster: Cluster, shift: tuple[Path, Path], tmp_path: Path, hashed: bool, chain: bool, restart: bool
) -> None:
    """Without the publisher's chain (``--no-chain``, or a producer that is not ours) every copy
    reaches the worker; with ``restart`` the copies reach a worker that did not judge the
    originals (it reads the tables back from the topic)."""
    events = shift[0] if hashed else write_unchained(shift[0], tmp_path / "unhashed.jsonl")
    once = tmp_path / "once.duckdb"
    with Store(once) as store:
        audit_file(events, store, workers=1, chain=chain)
    flags = () if chain else ("--no-chain",)
    cluster.cli("publish", str(events), *flags)
    if restart:
        consume_all(cluster, tmp_path / "worker.log")
    cluster.cli("publish", str(events), *flags)  # the same file again, every copy far behind its table's head
    consume_all(cluster, tmp_path / "worker.log")
    db = tmp_path / "stream.duckdb"
    project_all(cluster, db)
    stream, expected = findings_of(db), findings_of(once)
    con = duckdb.connect(str(db), read_only=True)
    try:
        extra = con.execute(
            "SELECT rule_id, message FROM findings WHERE finding_id IN (SELECT unnest($ids))",
            {"ids": sorted({f for f, _, _ in stream - expected})[:5]},
        ).fetchall()
        rows, ids = con.execute("SELECT count(*), count(DISTINCT event_id) FROM events").fetchone() or (0, 0)
    finally:
        con.close()
    assert stream == expected, f"missing {len(expected - stream)}, extra {len(stream - expected)}: {extra}"
    assert rows == ids == len(events.read_bytes().splitlines()) - _copies_in(events)


def _copies_in(events: Path) -> int:
    seen: set[bytes] = set()
    copies = 0
    for line in events.read_bytes().splitlines():
        copies += line in seen
        seen.add(line)
    return copies
