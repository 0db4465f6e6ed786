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


# The packages of issue 33 and what each may import from the project's own packages (the standard
# library and third-party packages aside). A package may always import itself; each package's
# ``__init__.py`` says the same in its first line.
LAYERS: dict[str, frozenset[str]] = {
    "projections.display": frozenset(),
    "projections.store": frozenset({"schemas", "streams.engine", "projections.display"}),
    "projections.models": frozenset({"schemas", "streams.engine", "projections.display", "projections.store"}),
    "projections.records": frozenset(
        {"schemas", "streams.engine", "projections.display", "projections.store", "projections.models"}
    ),
    "projections.reports": frozenset(
        {
            "schemas",
            "streams.engine",
            "projections.display",
            "projections.store",
            "projections.models",
            "projections.records",
        }
    ),
}
_SERVICES = frozenset({"schemas", "streams", "streams.engine", "dealtrail.settings", *LAYERS})
LAYERS |= {
    "dealtrail.investigate": _SERVICES,
    "dealtrail.reporting": _SERVICES,
    "dealtrail.ingest": _SERVICES | {"dealtrail.investigate", "dealtrail.reporting"},
}
KNOWN_UPWARD = {
    # The writer's one transaction stores the reviews and access-log entries a projector batch
    # holds beside the Kafka offsets; their row schema and append live with their read side.
    ("projections/store/store.py", "projections.models.reviews"),
    ("projections/store/store.py", "projections.records.access_log"),
    # A store without the sum_floor summary reads the supervisor on duty through the roster module.
    ("projections/store/summaries.py", "projections.records.staff"),
}
"""Imports against :data:`LAYERS` that were there before the packages were drawn (issue 33); none
may be added, and each should go when its code moves down."""


def _package_of(module: str) -> str:
    """The package of :data:`LAYERS` (or the top-level name) ``module`` belongs to."""
    parts = module.split(".")
    for depth in (2, 1):
        name = ".".join(parts[:depth])
        if name in LAYERS or name in ("streams.engine", "dealtrail.settings", "dealtrail.cli", "dealtrail.console"):
            return name
    return parts[0]


def _imported_modules(path: Path) -> set[str]:
    """Every absolute module ``path`` imports (lazily or under TYPE_CHECKING too), with the names
    of ``from X import name`` as ``X.name`` (a name may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _layer_files() -> list[Path]:
    return [p for layer in LAYERS for p in _files(layer.replace(".", "/"))]


@pytest.mark.parametrize("path", _layer_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_package_imports_only_the_packages_below_it(path: Path) -> None:
    own = _package_of(".".join(path.relative_to(ROOT).with_suffix("").parts))
    allowed = LAYERS[own] | {own}
    rel = str(path.relative_to(ROOT))
    wrong = {
        module
        for module in _imported_modules(path)
        if module.split(".")[0] in ("schemas", "streams", "projections", "dealtrail")
        and _package_of(module) not in allowed
        and (rel, ".".join(module.split(".")[:3])) not in KNOWN_UPWARD
    }
    assert not wrong, f"{rel} ({own}) imports {sorted(wrong)}; it may import {sorted(allowed)}"


def test_the_read_side_never_imports_the_application_layer() -> None:
    for path in _files("projections"):
        wrong = {m for m in _imported_modules(path) if m.split(".")[0] == "dealtrail"}
        assert not wrong, f"{path} imports {wrong}"


def test_only_the_cli_imports_the_console() -> None:
    for folder in ("schemas", "streams", "projections", "dealtrail"):
        for path in _files(folder):
            if path.parent.name in ("cli", "console") and path.parent.parent.name == "dealtrail":
                continue
            wrong = {m for m in _imported_modules(path) if m.startswith("dealtrail.console")}
            assert not wrong, f"{path} imports {wrong}"


@pytest.mark.parametrize("package", ["projections", *LAYERS])
def test_each_package_opens_with_one_line_saying_what_it_holds_and_may_import(package: str) -> None:
    init = ROOT / package.replace(".", "/") / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")), clean=False)
    assert doc and "\n" not in doc.strip(), f"{init} does not open with a one-line docstring"
    assert "import" in doc, f"{init}'s first line does not say what it may import"


def test_the_known_upward_imports_are_still_there() -> None:
    """An exception of :data:`KNOWN_UPWARD` that is gone is taken off the list."""
    for rel, module in KNOWN_UPWARD:
        assert any(m.startswith(module) for m in _imported_modules(ROOT / rel)), (rel, module)
