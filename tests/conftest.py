"""Shared fixtures: small simulated shifts written to files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

from dealtrail.simulator.run import write_simulation

# Property tests check properties, not speed (that is the benchmarks'): no per-example deadline,
# which a busy CI machine (or a first example that imports a module) can overrun for nothing.
hypothesis_settings.register_profile("dealtrail", deadline=None)
hypothesis_settings.load_profile("dealtrail")


@pytest.fixture(scope="session")
def small_shift(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 6-table, 1.5-hour shift with errors injected in 15 % of rounds: (events, truth)."""
    folder = tmp_path_factory.mktemp("shift")
    events, truth = folder / "events.jsonl", folder / "truth.jsonl"
    write_simulation(events, tables=6, hours=1.5, seed=11, error_rate=0.15, duplicate_rate=0.002, truth_path=truth)
    return events, truth


@pytest.fixture(scope="session")
def audited_shift(small_shift: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small shift audited into a DuckDB store (read it; copy it before changing it)."""
    from dealtrail.ingest.audit import audit_file
    from projections.store.store import Store

    events, _ = small_shift
    db = tmp_path_factory.mktemp("audited") / "shift.duckdb"
    with Store(db) as store:
        audit_file(events, store)
    return db


@pytest.fixture(scope="session")
def long_file(small_shift: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small shift's lines eight times over: an audit of it runs long enough (seconds, two
    worker processes) to be killed or interrupted mid-way."""
    events, _ = small_shift
    path = tmp_path_factory.mktemp("long") / "long.jsonl"
    data = events.read_bytes()
    with path.open("wb") as fh:
        for _ in range(8):
            fh.write(data)
    return path


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """An S3-compatible server on loopback (moto's, on a free port, not the default 5000), started
    once per test session; its address. Credentials are moto's test ones, set in the environment
    (where s3fs and boto3 read them) for the session and restored after."""
    from moto.server import ThreadedMotoServer

    from tests.helpers import free_port

    saved = {k: os.environ.get(k) for k in S3_ENV}
    os.environ.update(S3_ENV)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
"""The credentials the loopback S3 server accepts (any; moto checks none)."""


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A Spark session in local mode (one core, one shuffle partition, no UI: light), started
    once per test session. Skipped without Java, unless ``DEALTRAIL_REQUIRE_SPARK=1`` (CI), where
    the test fails."""
    import shutil

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if os.environ.get("DEALTRAIL_REQUIRE_SPARK") == "1":
            pytest.fail("DEALTRAIL_REQUIRE_SPARK=1 but there is no Java for Spark (java on PATH or JAVA_HOME)")
        pytest.skip("no Java for Spark (DEALTRAIL_REQUIRE_SPARK=1 makes this a failure)")
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver on loopback, as its host name resolves
    session = (
        SparkSession.builder.master("local[1]")
        .appName("dealtrail-tests")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
