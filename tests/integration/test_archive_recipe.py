"""getting-started.md's "Trying the archive" (issue 47, item 9): its commands, run as written
in a fresh folder, move a whole UTC month out of a store made from a simulated shift that
crosses the month's end, and the report before and after is byte for byte the same."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dealtrail.cli import app as cli

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "getting-started.md"


def recipe() -> str:
    """The shell block of the guide's "Trying the archive" section."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("\n## Trying the archive\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return block


def test_the_archive_recipe_runs_as_written_and_the_report_is_the_same_after(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("DEALTRAIL_DB", None)
    script = ["bash", "-euo", "pipefail", "-c", recipe()]
    done = subprocess.run(script, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert done.stdout.rstrip().endswith("the same report"), said
    moved = re.search(r"archived 2026-10: ([\d,]+) events", said)
    assert moved is not None and int(moved.group(1).replace(",", "")) > 1000, said
    folder = tmp_path / "out" / "archive-try"
    assert list((folder / "archive" / "events").glob("month=2026-10/table_id=*/*.parquet"))
    assert not list((folder / "archive" / "events").glob("month=2026-11*")), "November stays in the store"


@pytest.mark.parametrize(
    ("start", "needle"),
    [("2026-10-31T18:00", "has no offset"), ("31/10/2026 18:00", "is not an ISO 8601 time")],
)
def test_simulate_refuses_a_start_without_an_instant(start: str, needle: str, tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    r = CliRunner().invoke(cli, ["simulate", "--out", str(out), "--tables", "1", "--hours", "0.1", "--start", start])
    assert r.exit_code == 2 and needle in r.output, r.output
    assert not out.exists()


def test_simulate_starts_the_shift_at_the_instant_given(tmp_path: Path) -> None:
    import json
    from datetime import datetime

    out = tmp_path / "events.jsonl"
    r = CliRunner().invoke(
        cli, ["simulate", "--out", str(out), "--tables", "1", "--hours", "0.1", "--start", "2026-10-31T22:00Z"]
    )
    assert r.exit_code == 0, r.output
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    at = datetime.fromisoformat(first["occurred_at"])
    assert datetime.fromisoformat("2026-10-31T22:00Z") <= at < datetime.fromisoformat("2026-10-31T22:02Z")
