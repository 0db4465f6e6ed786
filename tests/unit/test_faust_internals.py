"""The private parts of faust-streaming (0.15.3) that the worker relies on, one test each: a Faust
upgrade that changes one of them fails here, by name, before a worker misbehaves on a broker.
docs/development.md ("Faust internals dealtrail relies on") lists them with what uses them.
No broker: the app is built, never started."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dealtrail.settings import Settings

UPGRADE = "faust-streaming changed {}: streams/worker.py relies on it (docs/development.md, Faust internals)"


def _app(tmp_path: Path, namespace: str) -> Any:
    from streams.worker import create_app

    return create_app(Settings(namespace=namespace, worker={"datadir": tmp_path}))


def _close(app: Any) -> None:
    app.consumer._thread.thread_loop.close()  # the consumer thread's own loop (never started)


@pytest.mark.parametrize("name", ["_settings_default", "_settings_auth", "_settings_extra"])
def test_faust_producer_settings_are_methods_giving_aiokafka_producer_keywords(tmp_path: Path, name: str) -> None:
    # the states' producer (streams.worker TwoLaneProducer.on_start) is built from exactly these
    # three, as Faust's _new_producer builds its own
    async def run() -> Mapping[str, Any]:
        app = _app(tmp_path, f"nsint{name.strip('_')[-4:]}")
        try:
            method = getattr(app.producer, name, None)
            assert callable(method), UPGRADE.format(f"Producer.{name} (gone)")
            got = method()
        finally:
            _close(app)
        assert isinstance(got, Mapping), UPGRADE.format(f"Producer.{name} (no longer a mapping)")
        return got

    got = asyncio.run(run())
    import aiokafka

    accepted = set(inspect.signature(aiokafka.AIOKafkaProducer.__init__).parameters)
    assert set(got) <= accepted, UPGRADE.format(f"Producer.{name} (keywords aiokafka does not take)")
    if name == "_settings_default":
        wanted = {"bootstrap_servers", "client_id", "acks", "compression_type", "max_batch_size", "linger_ms"}
        assert wanted <= set(got), UPGRADE.format("Producer._settings_default (keys missing)")
        assert got["acks"] == -1 and got["max_batch_size"] == 512 * 1024


def test_faust_producer_builds_its_own_aiokafka_producer_from_the_three_settings_and_producer_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[dict[str, Any]] = []

    class Recorder:
        def __init__(self, **config: Any) -> None:
            made.append(config)

    async def run() -> tuple[dict[str, Any], Any]:
        app = _app(tmp_path, "nsinttype")
        try:
            producer = app.producer
            kind = type(producer)._producer_type
            assert isinstance(kind, property), UPGRADE.format("Producer._producer_type (no longer a property)")
            own_type = producer._producer_type
            monkeypatch.setattr(type(producer), "_producer_type", property(lambda self: Recorder))
            producer._new_producer()
            ours = {**producer._settings_default(), **producer._settings_auth(), **producer._settings_extra()}
        finally:
            _close(app)
        return ours, own_type

    import aiokafka

    ours, own_type = asyncio.run(run())
    assert own_type is aiokafka.AIOKafkaProducer, UPGRADE.format("Producer._producer_type")
    assert made == [{**ours, "transactional_id": None}], UPGRADE.format("Producer._new_producer's settings")


def test_faust_commit_flushes_the_apps_producer_before_it_commits_the_offsets(tmp_path: Path) -> None:
    # the worker's flush waits for both of its producers and fails after a state lost for good
    # (streams.worker TwoLaneProducer.flush): Faust's commit must call it first, and not commit
    # when it raises, or offsets of events whose state is not written would be committed
    from faust.types import TP

    from streams.worker import create_app

    order: list[str] = []
    tp = TP("nsintcommit.dealing-events.v1", 0)

    async def run(fail: bool) -> Any:
        app = create_app(Settings(namespace="nsintcommit", worker={"datadir": tmp_path / str(fail)}))
        consumer = app.consumer
        try:

            async def flush() -> None:
                order.append("flush")
                if fail:
                    raise RuntimeError("a state could not be written")

            async def commit(offsets: Mapping[Any, int]) -> bool:
                order.append(f"commit {dict(offsets)[tp]}")
                return True

            app.producer.flush = flush
            consumer._commit = commit
            consumer.assignment = lambda: {tp}
            assert callable(getattr(consumer, "_commit_offsets", None)), UPGRADE.format("Consumer._commit_offsets")
            await consumer._commit_offsets({tp: 5})
            return consumer._committed_offset[tp]
        finally:
            _close(app)

    assert asyncio.run(run(False)) == 5, UPGRADE.format("Consumer._committed_offset (not kept after a commit)")
    assert order == ["flush", "commit 5"], UPGRADE.format("Consumer._commit_offsets (no flush before the commit)")
    order.clear()
    with pytest.raises(RuntimeError):
        asyncio.run(run(True))
    assert order == ["flush"], UPGRADE.format("Consumer._commit_offsets (commits after a failed flush)")


def test_faust_app_waits_for_acknowledgements_in_consumer_wait_empty(tmp_path: Path) -> None:
    # streams.worker WorkerApp overrides it to write the states (and acknowledge) first
    import faust

    method = getattr(faust.App, "_consumer_wait_empty", None)
    assert method is not None and inspect.iscoroutinefunction(method), UPGRADE.format("App._consumer_wait_empty")
    assert list(inspect.signature(method).parameters) == ["self", "consumer", "logger"], UPGRADE.format(
        "App._consumer_wait_empty's arguments"
    )
    source = inspect.getsource(faust.App)
    assert "await self._consumer_wait_empty(" in source, UPGRADE.format("App (no longer calls _consumer_wait_empty)")


def test_faust_worker_consumer_is_made_by_create_worker_consumer_of_a_thread_the_consumer_makes() -> None:
    # streams.worker FetchThread / FetchConsumer: the fetch wait and the isolation level are set
    # on the aiokafka consumer _create_worker_consumer returns
    from faust.transport.drivers import aiokafka as driver

    assert callable(getattr(driver.AIOKafkaConsumerThread, "_create_worker_consumer", None)), UPGRADE.format(
        "AIOKafkaConsumerThread._create_worker_consumer"
    )
    assert callable(getattr(driver.Consumer, "_new_consumer_thread", None)), UPGRADE.format(
        "Consumer._new_consumer_thread"
    )
