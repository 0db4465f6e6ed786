"""No command removes a store that holds anything; ``/healthz`` and ``/readyz`` answer without
login and without data (console over a file, console in the projector, the projector's own)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dealtrail.cli import app
from dealtrail.console.app import ConsoleConfig, create_app
from dealtrail.console.health import health_app
from dealtrail.ingest.projector import KafkaUnreachableError
from projections.models.reviews import ReviewDue
from projections.records import users
from projections.store.discard import remove_if_empty
from projections.store.store import Store
from streams.link import KafkaLink

AT = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)


def _with_user(store: Store) -> None:
    users.put_user(store.con, "ada", "admin", "hash", True, AT, "cli")


def test_an_empty_store_is_removed_with_its_log(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    Store(db).close()
    assert remove_if_empty(db)
    assert not db.exists()
    assert not db.with_name("s.duckdb.wal").exists()


@pytest.mark.parametrize("what", ["user", "dead letter", "offset"])
def test_a_store_holding_any_row_is_never_removed(tmp_path: Path, what: str) -> None:
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        if what == "user":
            _with_user(store)
        elif what == "dead letter":
            store.write_batch(
                (), dead_letters=[{"source": "x", "position": "1", "reason": "r", "detail": "", "raw": ""}]
            )
        else:
            store.write_batch((), offsets=[{"consumer": "g", "topic": "t", "partition": 0, "next_offset": 3}])
    assert not remove_if_empty(db)
    assert db.exists()


def test_a_file_that_is_not_a_store_is_never_removed(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    db.write_bytes(b"not a database")
    assert not remove_if_empty(db)
    assert db.read_bytes() == b"not a database"


def _failing_run(write: bool) -> Any:
    def run(settings: Any, store: Store, **kwargs: Any) -> None:
        if write:
            _with_user(store)  # a batch went in before the cluster went away
        raise KafkaUnreachableError(6.0)

    return run


@pytest.mark.parametrize("write", [True, False])
def test_project_keeps_the_store_it_made_once_it_holds_something(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: bool
) -> None:
    import dealtrail.ingest.projector

    monkeypatch.setattr(dealtrail.ingest.projector, "project", _failing_run(write))
    db = tmp_path / "p.duckdb"
    result = CliRunner().invoke(app, ["project", "--db", str(db), "--once"], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert "cannot reach Kafka" in result.output
    assert db.exists() is write, "a store holding a user must stay; an empty one this run made goes"


def test_project_never_removes_a_store_it_did_not_make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dealtrail.ingest.projector

    db = tmp_path / "p.duckdb"
    Store(db).close()  # empty, but made before this run
    monkeypatch.setattr(dealtrail.ingest.projector, "project", _failing_run(False))
    result = CliRunner().invoke(app, ["project", "--db", str(db), "--once"])
    assert result.exit_code == 2
    assert db.exists()


def _console(tmp_path: Path, readiness: Any = None) -> TestClient:
    store = Store(tmp_path / "c.duckdb")
    _with_user(store)
    console = create_app(store, ConsoleConfig(ReviewDue(24, 24, 72), "s" * 48, clock=lambda: AT))
    if readiness is not None:
        console.state.readiness = readiness
    return TestClient(console)


def test_the_console_over_a_file_is_alive_and_ready_without_login(tmp_path: Path) -> None:
    client = _console(tmp_path)
    alive, ready = client.get("/healthz"), client.get("/readyz")
    assert (alive.status_code, alive.json()) == (200, {"alive": True})
    assert (ready.status_code, ready.json()) == (200, {"ready": True, "kafka": "not used"})
    assert client.get("/api/v1/floor").status_code == 401, "the rest still needs a login"


def test_the_console_in_the_projector_is_ready_only_while_connected_and_caught_up(tmp_path: Path) -> None:
    link = KafkaLink("k:9092", lambda line: None)
    client = _console(tmp_path, lambda: link.status().as_json(60))
    away = client.get("/readyz")
    assert away.status_code == 503
    assert away.json()["kafka"] == "disconnected"
    link.up()
    link.lag(0, 0.0)
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "ready": True,
        "kafka": "connected",
        "lag_messages": 0,
        "lag_seconds": 0.0,
        "max_lag_seconds": 60,
        "down_seconds": None,
        "consumption_errors": 0,
        "last_consumption_error": None,
        "host_clock": None,  # no record timestamp compared yet (issue 46: the host clock against the broker's)
    }
    link.lag(90_000, 120.0)
    behind = client.get("/readyz")
    assert behind.status_code == 503
    assert behind.json()["lag_messages"] == 90_000
    assert "ada" not in behind.text
    assert client.get("/healthz").status_code == 200, "alive whatever Kafka does"


def test_the_projectors_own_server_has_the_two_endpoints_only() -> None:
    link = KafkaLink("k:9092", lambda line: None)
    client = TestClient(health_app(lambda: link.status().as_json(60)))
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 503
    assert client.get("/").status_code == 404


def test_the_health_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from dealtrail.settings import Settings

    monkeypatch.setenv("DEALTRAIL_HEALTH__PORT", "8081")
    monkeypatch.setenv("DEALTRAIL_HEALTH__MAX_LAG_SECONDS", "15")
    monkeypatch.setenv("DEALTRAIL_WORKER__ALIVE_FILE", "/tmp/w.alive")
    s = Settings()
    assert (s.health.port, s.health.max_lag_seconds, s.health.host) == (8081, 15.0, "127.0.0.1")
    assert s.worker.alive_file == Path("/tmp/w.alive")
