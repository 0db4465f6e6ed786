"""The second reader's acceptance trails (``../shared/acceptance/``), run against the installed
``dealtrail`` command with the runner that ships beside them: one test per trail, failing with the
runner's line for it (what is missing, what is extra).

The trails were written from the rulebook by a reader who never read the rule code; they are the
independent check of the engine (see their README). The folder lies beside the repository on a
developer's machine and in CI; without it these tests skip, unless
``DEALTRAIL_REQUIRE_ACCEPTANCE=1`` (CI), where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ACCEPTANCE = Path(os.environ.get("DEALTRAIL_ACCEPTANCE") or ROOT.parent / "shared" / "acceptance")
RUNNER = ACCEPTANCE / "run"
EXPECTED = ACCEPTANCE / "expected.json"
DEALTRAIL = Path(sys.executable).with_name("dealtrail")  # the command `make install` put beside this Python


def _cases() -> list[str]:
    try:
        return list(json.loads(EXPECTED.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return []


CASES = _cases()

CONTRADICTED: dict[str, tuple[str, str]] = {
    "H27": (
        "FAIL missing: (DT-deal-after-device-fault, TCP-52-R0005)",
        "rulebook 10.5.2 (revision 5) replaces 10.3.1 for a fault with no deck_id recorded during IDLE: deck "
        "TCP-52-DK01, whose last clearing completion (seq 172) came before the empty shuffler's fault (seq 198) and "
        "which was not in the device since, is dealt in R0005 without a finding; the expectation, written under "
        "revision 4, cites 10.3.1",
    ),
}
"""Trails whose expectation the rulebook's later revision contradicts, with the exact line the
runner must print for them and the section that decides (the README's rule: do not edit the trail,
say so, follow the rulebook). A contradicted trail that starts to pass, or fails another way, fails
its test."""


@pytest.fixture(scope="module")
def runner_lines() -> dict[str, str]:
    """Each case's line from one run of the runner over every trail, and its closing line."""
    if not CASES or not RUNNER.exists():
        if os.environ.get("DEALTRAIL_REQUIRE_ACCEPTANCE") == "1":
            pytest.fail(f"DEALTRAIL_REQUIRE_ACCEPTANCE=1 but there are no acceptance trails at {ACCEPTANCE}")
        pytest.skip(f"no acceptance trails at {ACCEPTANCE} (set DEALTRAIL_ACCEPTANCE to their folder)")
    assert DEALTRAIL.exists(), f"no installed dealtrail command at {DEALTRAIL}: run `make install`"
    proc = subprocess.run(
        [sys.executable, str(RUNNER), str(DEALTRAIL)],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
        check=False,
    )
    lines: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        name, sep, rest = line.partition(": ")
        if sep:
            lines[name] = rest
    assert "acceptance" in lines, f"the runner printed no closing line (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return lines


@pytest.mark.parametrize("case", CASES or ["(no trails)"])
def test_the_acceptance_trail_gives_the_findings_the_rulebook_demands(case: str, runner_lines: dict[str, str]) -> None:
    line = runner_lines.get(case)
    assert line is not None, f"{case}: the runner printed no line for it"
    if case in CONTRADICTED:
        expected, why = CONTRADICTED[case]
        assert line == expected, f"{case}: {line} (expected, as the rulebook decides: {expected}; {why})"
        return
    assert line.startswith("PASS"), f"{case}: {line}"


def test_every_acceptance_trail_passes_but_those_the_rulebook_contradicts(runner_lines: dict[str, str]) -> None:
    assert set(CONTRADICTED) <= set(CASES)
    passing = len(CASES) - len(CONTRADICTED)
    assert runner_lines["acceptance"] == f"{passing}/{len(CASES)} cases pass"
