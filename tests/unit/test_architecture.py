"""The dependency rule of the house style: pure core, adapters outside."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_IN_CORE = {
    "faust",
    "kafka",
    "aiokafka",
    "duckdb",
    "os",
    "time",
    "random",
    "logging",
    "pyarrow",
    "dealtrail",
    "projections",
    "socket",
    "subprocess",
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _files("schemas"), ids=lambda p: p.name)
def test_schemas_import_only_the_standard_library_and_pydantic(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | {"pydantic", "schemas", "__future__"}
    extra = _imports(path) - allowed
    assert not extra, f"{path} imports {extra}"
    assert not _imports(path) & FORBIDDEN_IN_CORE


@pytest.mark.parametrize("path", _files("streams/engine"), ids=lambda p: p.name)
def test_engine_imports_only_schemas_and_pure_standard_modules(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | {"pydantic", "schemas", "streams", "__future__"}
    names = _imports(path)
    assert not names - allowed, f"{path} imports {names - allowed}"
    assert not names & FORBIDDEN_IN_CORE, f"{path} imports {names & FORBIDDEN_IN_CORE}"


def test_engine_never_reads_the_clock() -> None:
    for path in _files("streams/engine") + _files("schemas"):
        text = path.read_text(encoding="utf-8")
        for call in ("datetime.now", "datetime.utcnow", "date.today", "uuid4", "time.time"):
            assert call not in text, f"{path} calls {call}"


def test_nothing_imports_the_cli() -> None:
    for folder in ("schemas", "streams", "projections", "dealtrail"):
        for path in _files(folder):
            if path.parent.name == "cli" and path.parent.parent.name == "dealtrail":
                continue  # the command line's own package
            text = path.read_text(encoding="utf-8")
            assert "dealtrail.cli" not in text and "from dealtrail import cli" not in text, path
