"""The documents that are generated from the code, and the README's promises about them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dealtrail import docgen
from dealtrail.settings import Settings
from streams.engine.catalog import CLEARED_BY, DECISIONS, LAST_REVISED, RULES_BY_ID

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
VARIABLE = re.compile(r"\bDEALTRAIL_[A-Z0-9_]*[A-Z0-9]")


@pytest.mark.parametrize("name", sorted(docgen.DOCUMENTS))
def test_the_generated_document_matches_the_code(name: str) -> None:
    committed = (DOCS / name).read_text(encoding="utf-8")
    assert committed == docgen.DOCUMENTS[name](), f"docs/{name} is stale: run `make docs`"


def test_every_setting_says_which_commands_read_it() -> None:
    paths = [path for path, _info, _model in docgen.settings_fields()]
    assert "kafka.bootstrap" in paths and "notify.digest_at" in paths
    for path in paths:
        assert docgen.readers(path), path
    sections = {p.split(".")[0] for p in paths} | set(paths)
    assert set(docgen.READERS) <= sections, set(docgen.READERS) - sections


def test_a_new_setting_without_readers_is_caught() -> None:
    with pytest.raises(KeyError):
        docgen.readers("no_such_section.x")


def test_every_setting_has_a_meaning_in_the_reference() -> None:
    text = (DOCS / "settings.md").read_text()
    settings_part, _, broker_part = text.partition("## The local broker's variables")
    rows = [line for line in settings_part.splitlines() if line.startswith("| `DEALTRAIL_")]
    assert len(rows) == len(list(docgen.settings_fields()))
    # the broker script's variables the README names are listed apart, as the script documents them
    listed = {line.split("`")[1] for line in broker_part.splitlines() if line.startswith("| `DEALTRAIL_")}
    assert {"DEALTRAIL_KAFKA_PORT", "DEALTRAIL_KAFKA_CONTROLLER_PORT", "DEALTRAIL_KAFKA_STATE"} <= listed
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[3], f"no meaning for {cells[0]}: add it to the model's Attributes docstring"


def test_the_settings_reference_names_variables_the_settings_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEALTRAIL_WORKER__STATE_INTERVAL", "2.5")
    monkeypatch.setenv("DEALTRAIL_PROPERTY", "Riverside")
    assert Settings().worker.state_interval == 2.5
    assert Settings().property_name == "Riverside"
    assert docgen.env_names("worker.state_interval") == ("DEALTRAIL_WORKER__STATE_INTERVAL",)
    assert docgen.env_names("property_name") == ("DEALTRAIL_PROPERTY",)


def test_every_revised_rule_is_in_the_catalogue() -> None:
    assert set(LAST_REVISED) <= set(RULES_BY_ID)


def test_every_rule_says_what_clears_it_and_every_revised_rule_names_its_decisions() -> None:
    assert set(CLEARED_BY) == set(RULES_BY_ID)
    assert all(line.strip() and "\n" not in line for line in CLEARED_BY.values())
    assert set(DECISIONS) <= set(RULES_BY_ID)
    assert {r for r, rev in LAST_REVISED.items() if rev >= 2} <= set(DECISIONS)
    sections = {"10.2"} | {f"10.{s}.{n}" for s, items in ((1, 5), (3, 5), (4, 3), (5, 5)) for n in range(1, items + 1)}
    assert {d for ds in DECISIONS.values() for d in ds} <= sections


def _not_settings() -> set[str]:
    """DEALTRAIL_* variables of the broker script, CI and the tests, which are not settings."""
    found: set[str] = set()
    for path in [
        ROOT / "ops" / "kafka" / "broker",
        ROOT / ".ci" / "run",
        ROOT / "Makefile",
        *ROOT.glob("tests/**/*.py"),
    ]:
        found |= set(VARIABLE.findall(path.read_text(encoding="utf-8")))
    settings = {n for p, _i, _m in docgen.settings_fields() for n in docgen.env_names(p)}
    return found - settings


def test_the_readme_and_docs_name_no_variable_the_settings_lack() -> None:
    known = {n for p, _i, _m in docgen.settings_fields() for n in docgen.env_names(p)} | _not_settings()
    for doc in [ROOT / "README.md", *DOCS.glob("*.md")]:
        unknown = set(VARIABLE.findall(doc.read_text(encoding="utf-8"))) - known
        assert not unknown, f"{doc.name} names {sorted(unknown)}, which no setting reads"


def test_the_readme_is_short_and_links_every_document() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "make demo" in readme and "make test" in readme
    for doc in DOCS.glob("*.md"):
        assert f"docs/{doc.name}" in readme, f"README.md does not link docs/{doc.name}"


def test_the_version_is_the_changelogs_latest_release() -> None:
    import tomllib

    from typer.testing import CliRunner

    from dealtrail.cli import app

    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, flags=re.M)
    assert releases, "CHANGELOG.md has no release heading"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert project == releases[0]
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"dealtrail {releases[0]}"
