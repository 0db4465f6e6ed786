"""The lock files: every dependency pinned with hashes, and the environment running the tests installed from them."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", flags=re.M)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked(name: str) -> dict[str, str]:
    text = (ROOT / name).read_text(encoding="utf-8")
    pins = {_norm(m.group(1)): m.group(2) for m in PIN.finditer(text)}
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text)
    for block in blocks:
        if PIN.match(block):
            assert "--hash=sha256:" in block, f"{name}: {block.splitlines()[0]} has no hash"
    return pins


def _requirements(extra: str | None) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = project["dependencies"] + (project["optional-dependencies"][extra] if extra else [])
    return {_norm(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in reqs}


@pytest.mark.parametrize(("lock", "extra"), [("requirements.lock", None), ("requirements-dev.lock", "dev")])
def test_every_dependency_is_locked_with_hashes(lock: str, extra: str | None) -> None:
    pins = _locked(lock)
    missing = _requirements(extra) - set(pins)
    assert not missing, f"{lock} lacks {sorted(missing)}: run `make lock`"


def test_the_runtime_lock_agrees_with_the_dev_lock() -> None:
    runtime, dev = _locked("requirements.lock"), _locked("requirements-dev.lock")
    differ = {n: (v, dev.get(n)) for n, v in runtime.items() if dev.get(n) != v}
    assert not differ, f"the image and the tests would run different versions: {differ}"


def test_this_environment_runs_the_locked_versions() -> None:
    wrong = {}
    for name, pinned in _locked("requirements-dev.lock").items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            wrong[name] = (pinned, None)
            continue
        if installed != pinned:
            wrong[name] = (pinned, installed)
    assert not wrong, f"installed otherwise than locked (run `make install`): {wrong}"
