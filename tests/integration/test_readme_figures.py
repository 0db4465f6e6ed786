"""The README's figures are the program's: the disk a `make demo` takes (its events file and its
store), estimated from a smaller floor of the demo's own mix, and the exit codes it names.

The demo floor is 24 tables (8 of each game) for 8 hours; three tables of the same kinds (one per
game, the demo's first three) for 8 hours, scaled by 8, give its size to within the spread of the
other tables' methods and error kinds (measured: the demo's events file 433 MB, its store 137 MB;
this estimate 10 to 15 % off either way), so a README figure more than a quarter away fails."""

from __future__ import annotations

import re
from pathlib import Path

from dealtrail.ingest.audit import audit_file
from dealtrail.simulator.run import write_simulation
from projections.store.store import Store

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MB = 1_000_000


def _readme_mb(what: str) -> int:
    found = re.search(rf"the {what} about (\d+) MB", " ".join(README.split()))
    assert found, f"the README names no size for the {what}"
    return int(found.group(1))


def test_the_readme_gives_the_disk_make_demo_takes_within_a_quarter(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_simulation(events, 3, 8.0, 7, 0.03, 0.001)  # the demo's seed, error and duplicate rates
    with Store(tmp_path / "store.duckdb") as store:
        audit_file(events, store)
    estimated_events = events.stat().st_size * 8 / MB
    estimated_store = (tmp_path / "store.duckdb").stat().st_size * 8 / MB
    for what, estimate in (("events file", estimated_events), ("store", estimated_store)):
        stated = _readme_mb(what)
        assert 0.75 * estimate <= stated <= 1.25 * estimate, f"README: {what} {stated} MB, estimated {estimate:.0f}"
    total = re.search(r"One run takes about (\d+) MB of disk", " ".join(README.split()))
    assert total and abs(int(total.group(1)) - _readme_mb("events file") - _readme_mb("store")) <= 20


def test_the_exit_codes_the_readme_names_are_the_commands_exit_codes() -> None:
    from dealtrail.cli.common import EXIT_CODES

    text = " ".join(README.split())
    for code in re.findall(r"exits (\d+)", text):
        assert f" {code} " in f" {EXIT_CODES} ", f"README says a command exits {code}, not an exit code"


def test_the_exit_code_table_of_the_docs_is_the_commands() -> None:
    from dealtrail.cli.common import EXIT_CODES

    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    table = text[text.index("## Exit codes") :]
    rows = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+) \| (.*) \|$", table, flags=re.M)}
    assert set(rows) == {int(c) for c in re.findall(r"(\d+) [a-z]", EXIT_CODES.split(":", 1)[1])}
    # the verifiers' failed checks: verify and verify-package exit 4, verify-signoff 1 (its tests say so)
    assert "`verify`" in rows[4] and "`verify-package`" in rows[4] and "verify-signoff" not in rows[4]
    assert "`verify-signoff`" in rows[1]
