"""A broker address where nothing listens: every Kafka command stops with one error line, soon."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "dealtrail.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc, time.monotonic() - started


@pytest.mark.parametrize(
    ("args", "how"),
    [
        (["project", "--db", "p.duckdb", "--once"], "env"),
        (["replay", "--source", "kafka", "--table", "T1"], "flag"),
        (["replay", "--source", "kafka", "--table", "T1"], "env"),
        (["verify", "--source", "kafka", "--table", "T1"], "flag"),
        (["verify", "--source", "kafka", "--table", "T1"], "long env"),
    ],
)
def test_an_unreachable_broker_is_one_error_line_naming_the_address(args: list[str], how: str, tmp_path: Path) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEALTRAIL_")}
    env.update({"DEALTRAIL_KAFKA__CONNECT_TIMEOUT": "2", "COLUMNS": "60"})
    if how == "flag":
        args = [*args, "--bootstrap", address]
        env["DEALTRAIL_KAFKA_BOOTSTRAP"] = "127.0.0.1:9092"  # the flag wins over the environment
    elif how == "env":
        env["DEALTRAIL_KAFKA_BOOTSTRAP"] = address
    else:
        env["DEALTRAIL_KAFKA__BOOTSTRAP"] = address
    proc, took = _run(args, env, tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: cannot reach Kafka at " + address + " within 2 s"), lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert took < 60, f"took {took:.0f} s"
    assert not (tmp_path / "p.duckdb").exists(), "project left the empty store it made behind"


def _get(url: str) -> tuple[int, dict[str, object]]:
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_projector_without_once_waits_for_kafka_says_so_once_and_stops_on_sigterm(tmp_path: Path) -> None:
    """A first start against a broker that never answers: the projector (and the console it
    serves) stays up, says once that it waits, answers /healthz 200 and /readyz 503, and a
    SIGTERM ends it at once with exit 0."""
    import signal

    port = _closed_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEALTRAIL_")}
    env.update({"DEALTRAIL_KAFKA_BOOTSTRAP": f"127.0.0.1:{_closed_port()}", "DEALTRAIL_KAFKA__CONNECT_TIMEOUT": "1"})
    log = tmp_path / "project.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dealtrail.cli", "project", "--db", "p.duckdb", "--serve", f"127.0.0.1:{port}"],
            env=env,
            cwd=tmp_path,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                alive = _get(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        assert alive == (200, {"alive": True})
        time.sleep(8)  # several attempts to reach the cluster
        status, body = _get(f"http://127.0.0.1:{port}/readyz")
        assert (status, body["kafka"], body["ready"]) == (503, "disconnected", False)
        assert proc.poll() is None, log.read_text()
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
        assert time.monotonic() - started < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert text.count("waiting for Kafka at") == 1, text
    assert "Traceback" not in text
    assert "stopped: projected 0 records" in text
