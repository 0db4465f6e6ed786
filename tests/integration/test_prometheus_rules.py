"""The alert rules and the dashboard in ops/ (issue 49, item 3), checked by Prometheus's own
``promtool``: the rules parse and pass their unit tests (``promtool test rules``); every metric
the rules and the Grafana dashboard query is one dealtrail exposes; an exposition of every metric
passes ``promtool check metrics`` (Prometheus's naming conventions)."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from streams.lag import GroupLag, Member, PartitionLag
from streams.metrics import (
    CONSOLE_REQUESTS,
    CONSOLE_SECONDS,
    DEAD_LETTERS,
    EVENTS_JUDGED,
    FINDINGS,
    FORWARD_PENDING,
    FORWARD_SENT,
    REORDER_HELD,
    ROUND_LATENCY,
    ROUNDS,
    STORE_RECORDS,
    STORE_WRITE,
    LagCollector,
    MetricsServer,
    StoreCollector,
)
from tests.prom import check_metrics, tool

OPS = Path(__file__).resolve().parents[2] / "ops"
BUILTIN = {"up"}  # series Prometheus makes itself
FUNCTIONS_AND_WORDS = {"sum", "by", "rate", "increase", "delta", "histogram_quantile", "predict_linear", "absent",
                       "and", "le", "max"}  # fmt: skip


class _Reader:
    """A lag reader with one group of two partitions (one never committed)."""

    def read(self, groups: list[str], topics: list[str]) -> list[GroupLag]:
        parts = (PartitionLag("g", "t", 0, 5, 0, 9), PartitionLag("g", "t", 1, None, 2, 4))
        return [GroupLag("g", "Stable", (Member("c", "127.0.0.1", (("t", 0), ("t", 1))),), parts)]

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def every_metric(tmp_path_factory: pytest.TempPathFactory) -> CollectorRegistry:
    """A registry with every dealtrail metric, each with a sample."""
    from dealtrail.settings import Settings

    tmp_path = tmp_path_factory.mktemp("metrics")
    registry = CollectorRegistry()
    for metric in (CONSOLE_REQUESTS, CONSOLE_SECONDS, DEAD_LETTERS, EVENTS_JUDGED, FINDINGS, FORWARD_PENDING,
                   FORWARD_SENT, REORDER_HELD, ROUND_LATENCY, ROUNDS, STORE_RECORDS, STORE_WRITE):  # fmt: skip
        registry.register(metric)
    DEAD_LETTERS.labels("invalid_json").inc()
    CONSOLE_REQUESTS.labels("GET", "/findings/{finding_id}", "2xx").inc()
    CONSOLE_SECONDS.observe(0.05)
    FINDINGS.labels("TCP-679a.9-d-stub-count-due", "major").inc()
    FORWARD_PENDING.labels("relp").set(3)
    FORWARD_SENT.labels("relp").inc()
    STORE_RECORDS.labels("dealtrail.findings.v1").inc()
    ROUND_LATENCY.observe(0.2)
    STORE_WRITE.observe(0.01)
    (tmp_path / "s.duckdb").write_bytes(b"x" * 10)
    registry.register(StoreCollector(tmp_path / "s.duckdb"))
    lag = LagCollector(Settings().kafka, [("g", ["t"])])
    lag._reader = _Reader()  # type: ignore[assignment]
    registry.register(lag)
    return registry


def _exposed(registry: CollectorRegistry) -> set[str]:
    return {s.name for family in registry.collect() for s in family.samples}


def test_the_alert_rules_parse_and_pass_their_promtool_unit_tests() -> None:
    promtool = tool("promtool")
    check = subprocess.run([promtool, "check", "rules", "alerts.yml"], check=False, cwd=OPS / "prometheus",
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 8 rules found" in check.stdout
    tested = subprocess.run([promtool, "test", "rules", "alerts.test.yml"], check=False, cwd=OPS / "prometheus",
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_the_example_scrape_configuration_is_valid_for_prometheus() -> None:
    check = subprocess.run([tool("promtool"), "check", "config", "prometheus.yml"], check=False, cwd=OPS / "prometheus",
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def _names(expr: str) -> set[str]:
    stripped = re.sub(r'\{[^}]*\}|"[^"]*"|\[[^\]]*\]', " ", expr)  # label matchers, strings, ranges
    stripped = re.sub(r"\b(by|without)\s*\([^)]*\)", " ", stripped)  # grouping labels
    return {n for n in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", stripped) if n not in FUNCTIONS_AND_WORDS}


def test_the_dashboard_and_the_rules_query_only_metrics_dealtrail_exposes(every_metric: CollectorRegistry) -> None:
    import yaml

    registry = every_metric
    exposed = _exposed(registry) | BUILTIN
    dashboard = json.loads((OPS / "grafana" / "dealtrail.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    rules = yaml.safe_load((OPS / "prometheus" / "alerts.yml").read_text(encoding="utf-8"))
    exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert len(exprs) > 20
    for expr in exprs:
        unknown = _names(expr) - exposed
        assert not unknown, f"{expr!r} queries {unknown}, which dealtrail does not expose"
    # the opposite direction: the dashboard shows each metric family
    shown = {n for e in exprs for n in _names(e)}
    families = {f.name for f in registry.collect()}
    missing = {f for f in families if not any(n.startswith(f) for n in shown)}
    assert not missing, f"the dashboard and rules never show {missing}"


def test_the_metrics_endpoint_passes_promtool_check_metrics(every_metric: CollectorRegistry) -> None:
    server = MetricsServer("127.0.0.1", 0, registry=every_metric)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as resp:
            body = resp.read()
    finally:
        server.stop()
    verdict = check_metrics(body)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    text = body.decode()
    assert 'dealtrail_consumer_group_lag{group="g",partition="0",topic="t"} 4.0' in text
    assert (
        'dealtrail_consumer_group_lag{group="g",partition="1",topic="t"} 2.0' in text
    )  # never committed: from the start
    assert re.search(
        r'^dealtrail_findings_total\{rule="TCP-679a.9-d-stub-count-due",severity="major"\} [1-9]', text, re.M
    )
    assert "dealtrail_store_size_bytes 10.0" in text


def test_a_port_in_use_is_an_os_error_and_leaves_no_collector_registered(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    first = MetricsServer("127.0.0.1", 0, registry=registry)
    try:
        store = StoreCollector(tmp_path / "s.duckdb")
        with pytest.raises(OSError):
            MetricsServer("127.0.0.1", first.port, [store], registry=registry)
        registry.register(store)  # not left registered by the failed server
    finally:
        first.stop()
