"""docs/development.md draws the map of the packages (issue 33): its table names every package of
the tree, and no package that is not there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
TOP = ("schemas", "streams", "projections", "dealtrail")


def _packages_in_tree() -> set[str]:
    return {init.parent.relative_to(ROOT).as_posix() + "/" for top in TOP for init in (ROOT / top).rglob("__init__.py")}


def _packages_on_the_map() -> set[str]:
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    section = text.split("## The map", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z_/]+/)` \|", section, flags=re.MULTILINE))


def test_the_development_map_names_every_package_of_the_tree_and_no_other() -> None:
    assert _packages_on_the_map() == _packages_in_tree()


def test_the_development_map_says_where_a_newcomer_adds_a_rule_an_event_type_a_page_and_a_setting() -> None:
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    for thing in ("A rule", "An event type", "A page", "A setting"):
        assert f"- **{thing}**" in text


SAME_MEANING = {
    # a game's rules (engine) and the same game dealt (simulator), one module per game in both
    "chapter_691.py": 2,
    "pai_gow_poker.py": 2,
    "three_card_prime.py": 2,
    # the trail's integrity: its rules (engine) and the command that checks its hash chain
    "integrity.py": 2,
    # a command of the CLI over the service of the same name
    "evidence.py": 2,
    "replay.py": 2,
    "schedule.py": 2,
    "signoff.py": 2,
    "exports.py": 2,
    # the events (schemas) and their projection in the store, and for staff the CLI over it
    "reviews.py": 2,
    "staff.py": 3,
    # the access log: its entries (schemas) and the CLI's access-log command group
    "access.py": 2,
}
"""Module names that stand in more than one package with the same meaning (issue 33: "no module
name appears twice with a different meaning"); any other repeat is a new name to choose."""


def test_a_module_name_repeats_only_where_it_means_the_same() -> None:
    counts: dict[str, int] = {}
    for top in TOP:
        for path in (ROOT / top).rglob("*.py"):
            if path.name != "__init__.py" and path.name != "__main__.py":
                counts[path.name] = counts.get(path.name, 0) + 1
    assert {name: n for name, n in counts.items() if n > 1} == SAME_MEANING
