"""The console's request metrics (issue 49, item 1): counted by method, route template and status
class, never by path, so no finding ID, user or table reaches a label."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY, generate_latest

from dealtrail.console.app import ConsoleConfig, create_app
from projections.models.reviews import ReviewDue
from projections.store.store import Store


@pytest.fixture()
def store(audited_shift: Path, tmp_path: Path) -> Iterator[Store]:
    db = tmp_path / "console.duckdb"
    shutil.copy(audited_shift, db)
    s = Store(db)
    yield s
    s.close()


def _count(text: str, line_start: str) -> float:
    found = [line for line in text.splitlines() if line.startswith(line_start)]
    return float(found[0].rsplit(" ", 1)[1]) if found else 0.0


def test_requests_are_counted_by_route_template_and_status_class_without_ids(store: Store) -> None:
    finding = store.con.execute("SELECT finding_id FROM findings LIMIT 1").fetchall()[0][0]
    client = TestClient(create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "s" * 48)))
    before = generate_latest(REGISTRY).decode()
    assert client.get("/healthz").status_code == 200
    assert client.get(f"/findings/{finding}", follow_redirects=False).status_code == 303  # to the login page
    assert client.get("/no/such/page").status_code == 404
    after = generate_latest(REGISTRY).decode()
    for labels, added in (
        ('method="GET",route="/healthz",status="2xx"', 1),
        ('method="GET",route="/findings/{finding_id}",status="3xx"', 1),
        ('method="GET",route="unmatched",status="4xx"', 1),
    ):
        line = f"dealtrail_console_requests_total{{{labels}}} "
        assert _count(after, line) - _count(before, line) == added, labels
    assert finding not in after
    assert (
        _count(after, "dealtrail_console_request_seconds_count ")
        - _count(before, "dealtrail_console_request_seconds_count ")
        == 3
    )
