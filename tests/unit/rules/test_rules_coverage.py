"""Every catalogue rule has, in this directory, a test that must raise it and a near miss that
must not, named by its rule ID (a parametrize ID equal to the rule ID, or the sanitized ID in the
function name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.engine import RULES

NOT_YET_IMPLEMENTED: set[str] = set()
HERE = Path(__file__).parent


def _sanitize(rule_id: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in rule_id)


def _names_rule(nodeid: str, rule_id: str) -> bool:
    return f"[{rule_id}]" in nodeid or f"[{rule_id}-" in nodeid or f"test_{_sanitize(rule_id)}_" in nodeid


def test_every_rule_has_a_raised_and_a_not_raised_test(request):
    modules = {p.name for p in HERE.glob("test_rules_*.py")}
    collected = {Path(item.path).name for item in request.session.items}
    if not modules <= collected:
        pytest.skip("run the whole tests/unit/rules directory to check rule coverage")
    nodeids = [item.nodeid for item in request.session.items if Path(item.path).parent == HERE]
    missing = []
    for spec in RULES:
        if spec.rule_id in NOT_YET_IMPLEMENTED:
            continue
        mine = [n for n in nodeids if _names_rule(n, spec.rule_id)]
        if not [n for n in mine if "_raised" in n.replace("_not_raised", "")]:
            missing.append(f"{spec.rule_id}: no raised test")
        if not [n for n in mine if "_not_raised" in n]:
            missing.append(f"{spec.rule_id}: no not_raised test")
    assert missing == []
