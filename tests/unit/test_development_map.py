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
