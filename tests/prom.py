"""Prometheus's own tools for the tests: ``promtool`` and ``prometheus`` (Debian's package
``prometheus``). Missing, a test skips, or fails under ``DEALTRAIL_REQUIRE_PROMETHEUS=1`` (.ci/run)."""

from __future__ import annotations

import os
import shutil
import subprocess

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
