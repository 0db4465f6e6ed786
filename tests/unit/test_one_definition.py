"""Each rule of the read side has one definition (issue 33): the SQL that two readers need is one
file both splice in, and the audit's refusals go down one dead-letter path."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from projections.store.sql_files import INCLUDE, read_sql

SQL = resources.files("projections.store").joinpath("sql")


def _files_with(pattern: str) -> list[str]:
    return sorted(f.name for f in SQL.iterdir() if f.name.endswith(".sql") and re.search(pattern, f.read_text("utf-8")))


@pytest.mark.parametrize(
    ("pattern", "home"),
    [
        (r"THEN 'pending_approval'", "rev_status.sql"),  # the review status as of a time
        (r"THEN evidence_event_ids\[1:", "lnk_causes.sql"),  # a consequence's cause
        (r"k\.rule_id = 'DT-sequence-gap'", "lnk_causes.sql"),
        (r"avg\(mr\) / 1\.128", "rpt_control_judge.sql"),  # Laney's sigma_z: a store's charts and a group's
    ],
)
def test_a_read_side_rule_is_written_in_one_sql_file(pattern: str, home: str) -> None:
    assert _files_with(pattern) == [home]


@pytest.mark.parametrize(
    ("user", "included"),
    [
        ("004_console_views.sql", "rev_status.sql"),
        ("inc_findings.sql", "rev_status.sql"),
        ("rpt_findings.sql", "lnk_causes.sql"),
        ("sum_findings_rows.sql", "lnk_causes.sql"),
        ("rpt_control_chart.sql", "rpt_control_judge.sql"),
        ("rpt_control_given.sql", "rpt_control_judge.sql"),
    ],
)
def test_both_readers_of_a_rule_splice_in_the_same_file(user: str, included: str) -> None:
    assert f"/*include:{included}*/" in SQL.joinpath(user).read_text("utf-8")
    text = read_sql(user)
    assert not INCLUDE.search(text)
    assert SQL.joinpath(included).read_text("utf-8").strip().splitlines()[-1] in text


def test_audit_refuses_a_line_through_one_dead_letter_path() -> None:
    source = Path(__file__).parents[2].joinpath("dealtrail", "ingest", "audit.py").read_text("utf-8")
    assert source.count('"engine_error"') == 1
    assert source.count("except (DecodeError, EventRejected)") == 0
