"""The printed report's running header: any property name becomes one harmless CSS string."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from projections.reports.executive import css_string, print_header, summary


def test_a_property_name_cannot_end_the_css_string_or_the_style_element() -> None:
    text = str(css_string('Keystone "Downs" </style><script>x</script> \\ ; }'))
    assert text.startswith('"') and text.endswith('"')
    inner = text[1:-1]
    assert '"' not in inner and "<" not in inner and ">" not in inner and "}" not in inner
    assert re.sub(r"\\[0-9a-f]{6}", "", inner).count("\\") == 0  # every backslash starts an escape


def test_an_unnamed_property_is_printed_as_not_named_and_the_period_in_its_zone() -> None:
    head = print_header(None, datetime(2026, 11, 27, 18, tzinfo=UTC), datetime(2026, 11, 27, 19, tzinfo=UTC), UTC)
    assert str(head["property"]) == '"property not named"'
    assert "2026-11-27 18:00:00+00:00" in str(head["period"])


def test_the_executive_summary_compares_with_the_previous_period_and_lists_what_is_not_disposed() -> None:
    keys = ("rounds", "incidents", "voiding", "integrity", "procedural", "per_1000_rounds", "not_disposed", "overdue")
    this = dict.fromkeys(keys, 4) | {"late_reviews": None, "per_1000_rounds": 2.5}
    prev = dict.fromkeys(keys, 1) | {"late_reviews": None, "per_1000_rounds": 1.25}
    listed = [{"review_status": "disposed"}, {"review_status": "unreviewed"}, {"review_status": "assigned"}]
    figures = {"reviews": {"late_not_disposed": None}, "data_quality": {"incidents": 2}}
    out = summary({"this": this, "previous": prev}, listed, [{"status": "overdue"}, {"status": "open"}], figures)
    rows = {r["label"]: r for r in out["rows"]}
    assert rows["Incidents"]["change"] == 3 and rows["Incidents per 1,000 rounds"]["change"] == 1.2
    assert rows["Reviews late"]["change"] is None
    assert out["action_total"] == 2 and out["overdue_remedies"] == 1 and out["open_remedies"] == 1
    assert summary({"this": None, "previous": None}, [], [], figures)["rows"] == []
