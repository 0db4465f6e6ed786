"""Prometheus's own tools for the tests: ``promtool`` and ``prometheus`` (Debian's package
``prometheus``). Missing, a test skips, or fails under ``DEALTRAIL_REQUIRE_PROMETHEUS=1`` (.ci/run)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest


def tool(name: str) -> str:
    """The path of ``promtool`` or ``prometheus`` (skip or fail when missing)."""
    found = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
    if found is None:
        if os.environ.get("DEALTRAIL_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(f"{name} is missing: .ci/run installs Debian's prometheus package")
        pytest.skip(f"{name} is missing (apt-get install prometheus)")
    return found


def check_metrics(text: bytes) -> subprocess.CompletedProcess[str]:
    """``promtool check metrics`` over an exposition (its verdict: returncode and output)."""
    return subprocess.run(
        [tool("promtool"), "check", "metrics"],
        check=False,
        input=text.decode(),
        capture_output=True,
        text=True,
        timeout=60,
    )


class Prometheus:
    """A real Prometheus server (Debian's ``prometheus``) on a loopback port, scraping every
    second the targets each job's file (file-based service discovery) names, with dealtrail's
    alert rules loaded. One per test session: the targets change, the server stays."""

    JOBS = ("dealtrail-worker", "dealtrail-projector", "dealtrail-console")

    def __init__(self, folder: Path) -> None:
        import socket

        self.folder = folder
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        rules = Path(__file__).resolve().parents[1] / "ops" / "prometheus" / "alerts.yml"
        jobs = "".join(
            f"  - job_name: {job}\n    file_sd_configs:\n"
            f"      - files: ['{folder / job}.json']\n        refresh_interval: 1s\n"
            for job in self.JOBS
        )
        for job in self.JOBS:
            self.set_targets(job, [])
        config = folder / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            f"rule_files: ['{rules}']\nscrape_configs:\n{jobs}"
        )
        self.log = folder / "prometheus.log"
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(
                [tool("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=fh, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus was not ready within 60 s:\n" + self.log.read_text()[-2000:])

    def set_targets(self, job: str, targets: list[str]) -> None:
        """Scrape ``targets`` (``host:port``) as ``job`` from now on (the file is replaced atomically)."""
        path = self.folder / f"{job}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"targets": targets}] if targets else []))
        os.replace(tmp, path)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now (each ``{"metric": labels, "value": [time, "value"]}``)."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def rules_loaded(self) -> int:
        """Alerting rules the server loaded."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/rules", timeout=10) as resp:
            body = json.loads(resp.read())
        return sum(len(g["rules"]) for g in body["data"]["groups"])

    def stop(self) -> None:
        """Stop the server (SIGTERM)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
