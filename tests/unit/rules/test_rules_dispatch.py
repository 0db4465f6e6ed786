"""The engine calls a rule module only for the event types it declares in ``READS``: every
event type a module tests for must be declared, or its findings would be lost silently."""

from __future__ import annotations

import inspect
import re
from types import ModuleType

import pytest

from schemas import events as ev
from streams.engine import engine
from streams.engine.reducer import DEAL_CLOSERS
from streams.engine.rules import chapter_691, hand_deal, integrity, pai_gow_poker, three_card_prime

MODULES = (hand_deal, chapter_691, three_card_prime, pai_gow_poker, integrity)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_a_rule_module_declares_every_event_type_it_tests_for(module: ModuleType) -> None:
    source = inspect.getsource(module)
    tested = set(re.findall(r"type\((?:event|step\.event)\) is ev\.(\w+)", source))
    assert tested, "no event type test found: the pattern no longer matches the module's style"
    assert {getattr(ev, name) for name in tested} <= module.READS
    assert "isinstance(event" not in source and "match event" not in source
    if "deal_closed()" in source:  # the deal is judged at the first DEAL_CLOSERS event
        assert module.READS >= DEAL_CLOSERS
    if "hand_deal.check(" in source:
        assert module.READS >= hand_deal.READS


def test_every_game_check_the_engine_runs_has_its_event_types_registered() -> None:
    for checks in engine.GAME_RULES.values():
        for check in checks:
            assert engine.READS[check] is inspect.getmodule(check).READS  # type: ignore[union-attr]
