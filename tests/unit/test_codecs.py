"""Every codec Kafka defines is readable by both Kafka clients dealtrail runs, and dealtrail's
producers compress with the ``kafka.compression`` setting (no broker)."""

from __future__ import annotations

import os

import pytest

from dealtrail.settings import KafkaSettings, Settings
from streams.kafka import compression_type
from streams.worker import faust_settings

CODECS = ("gzip", "snappy", "lz4", "zstd")


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_has_the_library_of_every_codec(codec: str) -> None:
    from kafka import codec as kc

    assert getattr(kc, f"has_{codec}")(), f"kafka-python cannot read {codec}: its library is not installed"


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_has_the_library_of_every_codec(codec: str) -> None:
    from aiokafka import codec as ac

    assert getattr(ac, f"has_{codec}")(), f"the worker's consumer cannot read {codec}: cramjam is not installed"


@pytest.mark.parametrize("codec", CODECS)
def test_a_record_batch_compressed_with_each_codec_reads_back_with_kafka_python(codec: str) -> None:
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

    attr = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    builder = MemoryRecordsBuilder(magic=2, compression_type=attr, batch_size=1 << 20)
    values = [f'{{"seq": {i}}}'.encode() for i in range(50)]
    for i, value in enumerate(values):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"T-01", value=value, headers=[("h", b"v")])
    builder.close()
    records = MemoryRecords(builder.buffer())
    read = [r.value for batch in iter(records.next_batch, None) for r in batch]
    assert read == values


def test_the_publishers_compression_defaults_to_zstd_and_follows_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().kafka.compression == "zstd"
    assert compression_type(KafkaSettings()) == "zstd"
    assert compression_type(KafkaSettings(compression="none")) is None
    monkeypatch.setenv("DEALTRAIL_KAFKA__COMPRESSION", "lz4")
    assert compression_type(Settings().kafka) == "lz4"


def test_an_unknown_codec_is_refused_by_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    monkeypatch.setenv("DEALTRAIL_KAFKA__COMPRESSION", "brotli")
    with pytest.raises(ValidationError):
        Settings()


def test_the_worker_compresses_with_the_same_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("DEALTRAIL_WORKER__DATADIR", os.fspath(tmp_path))  # type: ignore[call-overload]
    monkeypatch.setenv("DEALTRAIL_KAFKA__COMPRESSION", "gzip")
    assert faust_settings(Settings())["producer_compression_type"] == "gzip"
    monkeypatch.setenv("DEALTRAIL_KAFKA__COMPRESSION", "none")
    assert faust_settings(Settings())["producer_compression_type"] is None


def test_the_publishers_producer_is_built_with_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka

    from streams.publish import Publisher
    from streams.topics import Topics

    made: dict[str, object] = {}

    class Producer:
        def __init__(self, **config: object) -> None:
            made.update(config)

    monkeypatch.setattr(kafka, "KafkaProducer", Producer)
    Publisher(KafkaSettings(compression="snappy"), Topics("t", 1, 1), chain=False)
    assert made["compression_type"] == "snappy"
