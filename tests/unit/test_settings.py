"""One configuration path: the bootstrap servers resolve once, and every Kafka client reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from dealtrail.settings import Settings
from streams.kafka import client_config


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for key in list(os.environ):
        if key.startswith("DEALTRAIL_"):
            monkeypatch.delenv(key)
    return monkeypatch


def test_the_short_form_sets_the_address_every_client_reads(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DEALTRAIL_KAFKA_BOOTSTRAP", "broker-a:19092")
    settings = Settings()
    assert settings.kafka.bootstrap == "broker-a:19092"
    assert client_config(settings.kafka, "x")["bootstrap_servers"] == ["broker-a:19092"]


def test_the_long_form_is_used_when_the_short_form_is_unset(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DEALTRAIL_KAFKA__BOOTSTRAP", "broker-b:19092,broker-c:19092")
    assert client_config(Settings().kafka, "x")["bootstrap_servers"] == ["broker-b:19092", "broker-c:19092"]


def test_the_short_form_wins_over_the_long_form(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DEALTRAIL_KAFKA__BOOTSTRAP", "long:1")
    clean_env.setenv("DEALTRAIL_KAFKA_BOOTSTRAP", "short:2")
    assert Settings().kafka.bootstrap == "short:2"


def test_a_bootstrap_flag_wins_over_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DEALTRAIL_KAFKA_BOOTSTRAP", "env:1")
    settings = Settings().with_bootstrap("flag:3")
    assert settings.kafka.bootstrap == "flag:3"
    assert Settings().with_bootstrap(None).kafka.bootstrap == "env:1"


def test_without_any_setting_the_default_is_loopback(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings().kafka.bootstrap == "127.0.0.1:9092"


def test_the_worker_and_its_reread_use_the_resolved_address(clean_env: pytest.MonkeyPatch) -> None:
    from streams.worker import faust_settings

    clean_env.setenv("DEALTRAIL_KAFKA_BOOTSTRAP", "w1:19092,w2:19092")
    settings = Settings()
    assert faust_settings(settings)["broker"] == ["kafka://w1:19092", "kafka://w2:19092"]


def test_a_projector_serving_the_console_lists_its_own_scheduled_reports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dealtrail.cli.console import _console_config
    from dealtrail.console.app import ConsoleConfig

    monkeypatch.delenv("DEALTRAIL_CONSOLE__REPORTS_DIR", raising=False)
    own = tmp_path / "periods"
    config = _console_config(Settings(), tmp_path / "s.duckdb", reports=own)
    assert isinstance(config, ConsoleConfig) and config.reports_dir == own
    monkeypatch.setenv("DEALTRAIL_CONSOLE__REPORTS_DIR", str(tmp_path / "named"))
    config = _console_config(Settings(), tmp_path / "s.duckdb", reports=own)
    assert isinstance(config, ConsoleConfig) and config.reports_dir == tmp_path / "named"  # the setting wins
