"""Consumer lag with the broker away (issue 49, item 2): ``dealtrail status`` says so in one line
and exits 1; the metrics endpoint still answers, with ``dealtrail_consumer_group_lag_up 0``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once closed


def test_status_without_a_broker_is_one_line_and_exit_1() -> None:
    port = _closed_port()
    env = {**os.environ, "DEALTRAIL_KAFKA_BOOTSTRAP": f"127.0.0.1:{port}", "DEALTRAIL_KAFKA__CONNECT_TIMEOUT": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot read the consumer groups at 127.0.0.1:{port}")
    assert "Traceback" not in proc.stderr and not proc.stdout


SCRAPE = """
import sys
from prometheus_client import CollectorRegistry, generate_latest
from dealtrail.settings import Settings
from streams.metrics import LagCollector

settings = Settings(kafka={"connect_timeout": 1}).with_bootstrap(sys.argv[1])
registry = CollectorRegistry()
registry.register(LagCollector(settings.kafka, [("g", ["t"])]))
sys.stdout.write(generate_latest(registry).decode())
"""


def test_a_scrape_without_a_broker_reports_lag_up_0_and_no_lag() -> None:
    # in a process of its own: kafka-python leaves the socket of a bootstrap that failed in its
    # constructor to the garbage collector, a ResourceWarning pytest would pin on a later test
    proc = subprocess.run(
        [sys.executable, "-c", SCRAPE, f"127.0.0.1:{_closed_port()}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "dealtrail_consumer_group_lag_up 0.0" in proc.stdout
    assert "dealtrail_consumer_group_lag{" not in proc.stdout
