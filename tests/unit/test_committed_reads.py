"""Every consumer dealtrail runs reads committed records only, through one shared configuration
(``streams.kafka.consumer_config``; the worker's aiokafka consumer through ``read_committed``).
No broker: the code is read, and the clients are built without connecting."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest

from dealtrail.settings import Settings
from streams.kafka import ISOLATION_LEVEL, client_config, consumer_config, read_committed

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("streams", "dealtrail", "projections", "schemas", "bench", "tools", "ops")
CONSUMERS = {"KafkaConsumer", "AIOKafkaConsumer", "Consumer", "DeserializingConsumer"}
EXEMPT = {
    # a standalone check of a new broker (its own Faust app and clients, run before dealtrail is
    # installed); it imports nothing of dealtrail and is not part of the audit trail
    "ops/kafka/smoke.py",
}


def _consumer_calls(path: Path) -> list[tuple[int, bool]]:
    """(line, built with ``**consumer_config(...)``) of every consumer constructed in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[int, bool]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name not in CONSUMERS:
            continue
        shared = any(
            k.arg is None
            and isinstance(k.value, ast.Call)
            and isinstance(k.value.func, ast.Name)
            and k.value.func.id == "consumer_config"
            for k in node.keywords
        )
        out.append((node.lineno, shared))
    return out


def test_every_consumer_in_the_code_is_built_with_the_shared_committed_reads_configuration() -> None:
    found: list[str] = []
    without: list[str] = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in EXEMPT:
                continue
            for line, shared in _consumer_calls(path):
                found.append(f"{rel}:{line}")
                if not shared:
                    without.append(f"{rel}:{line}")
    assert not without, f"consumers built without **consumer_config(...) (they would read aborted records): {without}"
    # the projector, the replay, the re-reads, the probe, the publisher's and the roster's readers
    assert len(found) >= 6, found


def test_the_scan_sees_a_consumer_built_otherwise(tmp_path: Path) -> None:
    code = tmp_path / "x.py"
    code.write_text(
        "from kafka import KafkaConsumer\n"
        "a = KafkaConsumer(bootstrap_servers='x')\n"
        "b = kafka.KafkaConsumer(**consumer_config(k, 'c'), enable_auto_commit=False)\n"
    )
    assert _consumer_calls(code) == [(2, False), (3, True)]


def test_the_shared_configuration_is_the_client_settings_reading_committed_records_only() -> None:
    kafka = Settings().kafka
    cfg = consumer_config(kafka, "dealtrail-x", one_shot=True)
    assert ISOLATION_LEVEL == "read_committed"
    assert cfg == {**client_config(kafka, "dealtrail-x", one_shot=True), "isolation_level": "read_committed"}
    from kafka import KafkaConsumer

    assert "isolation_level" in KafkaConsumer.DEFAULT_CONFIG  # kafka-python takes the keyword


def test_the_workers_consumer_reads_committed_records_only_where_faust_would_not(tmp_path: Path) -> None:
    # faust-streaming 0.15.3 asks for read_committed only under processing_guarantee
    # exactly_once, which dealtrail does not use (its rebalance bugs): the worker sets it itself
    from streams.worker import create_app

    async def levels() -> tuple[str, str]:
        app = create_app(Settings(namespace="nsiso", worker={"datadir": tmp_path}))
        thread = app.consumer._thread
        try:
            ours = thread._create_worker_consumer(app.transport)
            faust_own = super(type(thread), thread)._create_worker_consumer(app.transport)
            got = ours._isolation_level, faust_own._isolation_level
            await ours.stop()
            await faust_own.stop()
        finally:
            thread.thread_loop.close()
        return got

    assert asyncio.run(levels()) == ("read_committed", "read_uncommitted")


def test_aiokafka_hands_the_isolation_level_and_fetch_wait_set_before_start_to_its_fetcher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # streams.worker sets the worker consumer's _isolation_level (read_committed) and
    # _fetch_max_wait_ms after Faust built it: aiokafka 0.14 reads both when start() makes the
    # Fetcher. If an upgrade reads them in __init__ instead, this fails (docs/development.md).
    import aiokafka
    from aiokafka.consumer import consumer as consumer_module

    handed: dict[str, Any] = {}

    class Fetcher:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            handed.update(kwargs)

        async def close(self) -> None:
            return None

    class Coordinator:  # no group, no broker: nothing to close
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            return None

        async def close(self) -> None:
            return None

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    async def run() -> None:
        monkeypatch.setattr(consumer_module, "Fetcher", Fetcher)
        monkeypatch.setattr(consumer_module, "NoGroupCoordinator", Coordinator)
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")
        monkeypatch.setattr(consumer._client, "bootstrap", nothing)
        monkeypatch.setattr(consumer, "_wait_topics", nothing)
        consumer._fetch_max_wait_ms = 123
        read_committed(consumer)
        await consumer.start()
        with pytest.raises(RuntimeError, match="started"):
            read_committed(consumer)  # too late: the fetcher has its level
        await consumer.stop()

    asyncio.run(run())
    assert handed["isolation_level"] == "read_committed"
    assert handed["fetch_max_wait_ms"] == 123


def test_a_guarded_record_batch_gives_a_control_batchs_marker_to_next() -> None:
    # aiokafka reads a transaction marker with next(batch) when it reads committed records only;
    # the worker's guard against unreadable batches wraps every batch (it crashed the worker
    # with "'_GuardedBatch' object is not an iterator" at the first commit marker)
    from streams.batches import _GuardedBatch

    marker = object()
    guarded = _GuardedBatch(iter([marker]), owner=None)
    assert next(guarded) is marker
    with pytest.raises(StopIteration):
        next(guarded)
