"""Transport metadata against the payload, and the worker's data folder (no broker, no Faust run)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any, ClassVar

import pytest

from dealtrail.settings import Settings, default_datadir
from schemas.codec import decode
from streams.engine import apply
from streams.judge import STORED, Applied, Stored
from streams.kafka import key_mismatch
from streams.worker import faust_settings, private_folder, worker_datadir
from tests.fuzz.test_hostile_input import CONFIG


def _event():  # type: ignore[no-untyped-def]
    return decode(json.dumps(CONFIG).encode())


def test_a_record_keyed_by_its_table_is_no_key_mismatch() -> None:
    event = _event()
    assert key_mismatch(event.table_id.encode(), event) is None


@pytest.mark.parametrize("key", [b"another-table", b"", None])
def test_a_record_keyed_otherwise_or_without_a_key_is_a_key_mismatch(key: bytes | None) -> None:
    event = _event()
    detail = key_mismatch(key, event)
    assert detail is not None and event.table_id in detail
    assert ("no key" in detail) == (key is None)


def test_a_stored_offset_is_compared_only_with_offsets_of_its_own_partition() -> None:
    state, _ = apply(None, _event())
    at = Applied(partition=2, offset=500, state=state)
    assert at.holds(2, 500) and at.holds(2, 3)
    assert not at.holds(2, 501)
    assert not at.holds(0, 3), "an offset of another partition is not a redelivery"
    assert not at.same_partition(1)


def test_an_entry_without_a_partition_is_taken_to_be_of_the_messages_partition() -> None:
    state, _ = apply(None, _event())
    old = Applied(partition=None, offset=10, state=state)
    assert old.holds(3, 10) and not old.holds(3, 11) and old.same_partition(3)


def test_a_changelog_entry_written_before_partitions_were_kept_still_loads() -> None:
    state, _ = apply(None, _event())
    new = json.loads(STORED.dump_json(Stored(7, state, (b"f",), (), 3)))
    assert new["partition"] == 3
    del new["partition"]  # the JSON an older worker wrote
    entry = STORED.validate_json(json.dumps(new))
    assert (entry.offset, entry.partition, entry.findings) == (7, None, (b"f",))
    assert STORED.validate_python(new).partition is None  # as a changelog recovery puts it back


def test_the_data_folder_setting_defaults_under_the_users_state_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/srv/state")
    assert default_datadir() == Path("/srv/state/dealtrail/faust")
    assert Settings().worker.datadir == Path("/srv/state/dealtrail/faust")
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", "/home/dealer")
    assert default_datadir() == Path("/home/dealer/.local/state/dealtrail/faust")
    monkeypatch.setenv("DEALTRAIL_WORKER__DATADIR", "/var/lib/dealtrail/faust")
    assert Settings().worker.datadir == Path("/var/lib/dealtrail/faust")


def test_the_workers_data_folder_is_owner_only_under_umask_000(tmp_path: Path) -> None:
    home = tmp_path / "state" / "faust"
    settings = Settings(namespace="nsx", worker={"datadir": home})
    old = os.umask(0)
    try:
        conf = faust_settings(settings)
    finally:
        os.umask(old)
    mine = worker_datadir(settings)
    assert conf["datadir"] == str(mine) and mine.parent == home
    assert mine.name == f"{settings.topics.app_id}-{os.getpid()}"
    for folder in (mine, home, home.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_a_private_folder_leaves_an_existing_parent_as_it_was(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    made = private_folder(tmp_path / "a" / "b")
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700


def test_the_short_form_given_as_a_keyword_resolves_like_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEALTRAIL_KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.setenv("DEALTRAIL_KAFKA__BOOTSTRAP", "long-form:9092")
    assert Settings(kafka_bootstrap="broker-x:19192").kafka.bootstrap == "broker-x:19192"
    assert Settings().kafka.bootstrap == "long-form:9092"


def test_the_publish_summary_names_copies_already_published_and_rejected_lines_apart() -> None:
    from collections import Counter

    from dealtrail.cli import publish_report
    from streams.publish import PublishSummary

    summary = PublishSummary(sent=3, rejected=Counter({"schema_error": 2, "malformed_json": 1}), copies=5)
    summary.already_published = 1_200
    lines = publish_report(summary, "ns.dealing-events.v1", "ns.dead-letter.v1")
    assert lines == [
        "published 3 events to ns.dealing-events.v1",
        "already on the topic, not sent again: 1,205 (5 exact copies of recent events; 1,200 already_published, "
        "older events found on the topic unchanged)",
        "rejected: 3 lines to ns.dead-letter.v1 (malformed_json 1, schema_error 2)",
    ]


def test_only_one_shot_clients_give_up_after_the_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    from streams.kafka import client_config

    monkeypatch.setenv("DEALTRAIL_KAFKA__CONNECT_TIMEOUT", "2.5")
    kafka = Settings().kafka
    assert client_config(kafka, "project", one_shot=True)["bootstrap_timeout_ms"] == 2500
    assert "bootstrap_timeout_ms" not in client_config(kafka, "publisher")  # rides out a broker restart


def test_the_assignment_line_names_the_events_topics_partitions_only() -> None:
    from faust.types import TP

    from streams.worker import partitions_line

    tps = {TP("ns.dealing-events.v1", 2), TP("ns.dealing-events.v1", 0), TP("ns-worker-table-states-changelog", 1)}
    assert partitions_line(tps, "ns.dealing-events.v1") == "ns.dealing-events.v1[0, 2]"
    assert partitions_line(set(), "ns.dealing-events.v1") == "no partition of ns.dealing-events.v1"


def test_the_workers_consumer_asks_the_broker_to_hold_a_fetch_at_most_fetch_max_wait(tmp_path: Path) -> None:
    # Faust's own consumer asks for 1.5 s: a fetch that names only quiet partitions (Faust's
    # leader topic) was held that long while the busy partitions' records waited (bench-stream
    # --stages); the worker's consumer takes the setting instead
    import asyncio

    from streams.worker import create_app

    async def fetch_waits() -> tuple[int, int]:
        settings = Settings(namespace="nsfetch", worker={"datadir": tmp_path, "fetch_max_wait": 0.2})
        app = create_app(settings)
        thread = app.consumer._thread
        try:
            ours = thread._create_worker_consumer(app.transport)
            faust_own = super(type(thread), thread)._create_worker_consumer(app.transport)
            waits = ours._fetch_max_wait_ms, faust_own._fetch_max_wait_ms
            await ours.stop()  # never started: nothing to close but the objects
            await faust_own.stop()
        finally:
            thread.thread_loop.close()  # the consumer thread's own loop (never started here)
        return waits

    ours, faust_own = asyncio.run(fetch_waits())
    assert (ours, faust_own) == (200, 1500)
    assert Settings().worker.fetch_max_wait == 0.05


class _FakeKafkaProducer:
    """Stands in for aiokafka's producer: records its settings, its sends and its flushes."""

    made: ClassVar[list[_FakeKafkaProducer]] = []

    def __init__(self, **config: Any) -> None:
        self.config = config
        self.events: list[tuple[str, ...]] = []
        self.deliveries: list[asyncio.Future[str]] = []
        _FakeKafkaProducer.made.append(self)

    async def start(self) -> None:
        self.events.append(("start",))

    async def stop(self) -> None:
        self.events.append(("stop",))

    async def flush(self) -> None:
        self.events.append(("flush",))

    async def send(
        self, topic: str, value: bytes, key: bytes | None = None, partition: int | None = None
    ) -> asyncio.Future[str]:
        if len(value) > 100:
            from aiokafka.errors import MessageSizeTooLargeError

            raise MessageSizeTooLargeError("too large")
        self.events.append(("send", topic, key or b"", value, str(partition)))
        delivery: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.deliveries.append(delivery)
        return delivery


def test_the_states_go_through_a_producer_of_their_own_that_every_flush_and_stop_waits_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slow append of a state write held every round record queued behind it (one produce
    # request at a time per broker and producer): the states have a producer of their own, with
    # the same settings, and Faust's flush before a commit waits for both
    from faust.exceptions import ProducerSendError

    from streams.worker import create_app

    async def run() -> tuple[Any, list[_FakeKafkaProducer]]:
        _FakeKafkaProducer.made.clear()
        settings = Settings(namespace="nslanes", worker={"datadir": tmp_path})
        app = create_app(settings)
        producer = app.producer
        monkeypatch.setattr(type(producer), "_producer_type", property(lambda self: _FakeKafkaProducer))
        with pytest.raises(ProducerSendError, match="not started"):
            await producer.send_state("t", b"k", b"v", 1)
        await producer.on_start()
        sent = await producer.send_state("nslanes-changelog", b"C691-01", b"{}", 3)
        with pytest.raises(ProducerSendError, match="too large"):
            await producer.send_state("nslanes-changelog", b"C691-01", b"x" * 101, 3)
        sent.set_result("delivered")
        await producer.flush()
        await producer.on_stop()
        return sent, list(_FakeKafkaProducer.made)

    sent, (own, states) = asyncio.run(run())
    assert sent.result() == "delivered"
    assert states.config["client_id"] == own.config["client_id"] + "-states"
    apart = ("client_id", "transactional_id")  # Faust's producer: transactional_id=None
    assert {k: v for k, v in states.config.items() if k not in apart} == {
        k: v for k, v in own.config.items() if k not in apart
    }, "the same bootstrap, acks, compression, batch size and credentials"
    assert own.config["acks"] == -1 and own.config["max_batch_size"] == 512 * 1024
    assert ("send", "nslanes-changelog", b"C691-01", b"{}", "3") in states.events
    assert not [e for e in own.events if e[0] == "send"], "no state through Faust's producer"
    assert ("flush",) in own.events and ("flush",) in states.events
    assert states.events[-1] == ("stop",) and own.events[-1] == ("stop",)


def test_a_state_the_producer_gives_up_on_stops_the_worker_and_fails_every_flush_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiokafka's flush returns even when a batch failed for good: without this check Faust's
    # commit, which flushes first, would commit the offsets of events whose state is lost
    from aiokafka.errors import KafkaTimeoutError
    from faust.exceptions import ProducerSendError

    from streams.worker import create_app

    stopped: list[str] = []

    async def run() -> None:
        settings = Settings(namespace="nslanes2", worker={"datadir": tmp_path})
        app = create_app(settings)
        app.on_judge_failed = lambda: stopped.append("stopped")
        producer = app.producer
        monkeypatch.setattr(type(producer), "_producer_type", property(lambda self: _FakeKafkaProducer))
        await producer.on_start()
        delivery = await producer.send_state("nslanes2-changelog", b"C691-01", b"{}", 3)
        delivery.set_exception(KafkaTimeoutError("expired after 1200 s"))
        with pytest.raises(ProducerSendError, match="expired"):
            await producer.flush()  # before the delivery's callback has run: it counts already
        await asyncio.sleep(0)
        assert stopped == ["stopped"], "the worker's stop hook (exit 1 under run_worker)"
        with pytest.raises(ProducerSendError, match="expired"):
            await producer.flush()
        await producer.on_stop()

    asyncio.run(run())
