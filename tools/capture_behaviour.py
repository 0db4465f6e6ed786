"""Capture what a user sees of dealtrail, to compare before and after a change that must not alter it.

Written for issue 33 (the package layout moved by concern): run it on the commit before the change
and on the commit after, into two folders, and compare them byte for byte::

    .venv/bin/python tools/capture_behaviour.py /tmp/before      # on the old commit
    .venv/bin/python tools/capture_behaviour.py /tmp/after       # on the new commit
    diff -r /tmp/before /tmp/after && echo identical

It writes:

- ``openapi.json``: the console API's OpenAPI document (what ``/api/v1/openapi.json`` serves),
  as sorted, indented JSON (the approach of the console split, commit 98dfe87: the same
  document byte for byte as sorted JSON);
- ``help/<command path>.txt``: ``dealtrail --help`` and the ``--help`` of every command and
  sub-command (120 columns, no colour);
- ``demo/summary.json`` and ``demo/findings.csv``: a small simulated shift (the demo's seed and
  rates, 4 tables for 1 hour instead of 24 for 8) run through ``dealtrail simulate``, ``dealtrail
  audit`` and ``dealtrail report`` with a fixed as-of time, so the files depend only on the code.

Only public entry points are used (the ``dealtrail`` command, ``dealtrail.console.app``), so the
script runs unchanged on both sides of a move of the modules behind them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

COLUMNS = "120"
AS_OF = "2026-12-31T00:00:00+00:00"
DEMO = ["--tables", "4", "--hours", "1", "--seed", "2026", "--error-rate", "0.03", "--duplicate-rate", "0.001"]


def _env(home: Path) -> dict[str, str]:
    """A fixed environment: UTC, 120 columns, no colour, no DEALTRAIL_* setting from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEALTRAIL_")}
    env.update(
        COLUMNS=COLUMNS,
        TERM="dumb",
        NO_COLOR="1",
        TZ="UTC",
        HOME=str(home),
        DEALTRAIL_DB=str(home / "dealtrail.duckdb"),
        DEALTRAIL_OUT=str(home / "out"),
    )
    env.pop("FORCE_COLOR", None)
    return env


def capture_openapi(out: Path, work: Path) -> None:
    """Write the console API's OpenAPI document to ``out/openapi.json`` (sorted keys, indent 2)."""
    from fastapi.openapi.utils import get_openapi

    from dealtrail.console import app as console_app

    # the names the console itself imports, whatever module they come from: the same on both sides of a move
    store_cls = getattr(console_app, "Store")  # noqa: B009
    due = getattr(console_app, "reviews").ReviewDue(voiding=24, integrity=24, procedural=72)  # noqa: B009
    with store_cls(work / "openapi.duckdb") as store:
        app = console_app.create_app(store, console_app.ConsoleConfig(due, "s" * 48))
        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    (out / "openapi.json").write_text(json.dumps(doc, sort_keys=True, indent=2) + "\n", encoding="utf-8")


def _commands(cmd: Any, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every command path under ``cmd`` (a click command as Typer builds it; Typer may vendor
    click, so a group is recognised by its ``list_commands``), hidden ones included."""
    found = [path]
    if hasattr(cmd, "list_commands"):
        ctx = cmd.make_context("dealtrail", [], resilient_parsing=True)
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            if sub is not None:
                found += _commands(sub, (*path, name))
    return found


def capture_help(out: Path, env: dict[str, str]) -> None:
    """Write ``--help`` of ``dealtrail`` and of every command and sub-command to ``out/help/``."""
    import typer

    from dealtrail.cli import app

    folder = out / "help"
    folder.mkdir()
    exe = str(Path(sys.executable).with_name("dealtrail"))
    for path in _commands(typer.main.get_command(app), ()):
        run = subprocess.run([exe, *path, "--help"], env=env, capture_output=True, text=True, check=False)
        text = f"exit {run.returncode}\n{run.stdout}{run.stderr}"
        (folder / ("-".join(("dealtrail", *path)) + ".txt")).write_text(text, encoding="utf-8")


def capture_demo(out: Path, work: Path, env: dict[str, str]) -> None:
    """Simulate, audit and report a small shift; copy its ``summary.json`` and ``findings.csv``."""
    exe = str(Path(sys.executable).with_name("dealtrail"))
    steps = [
        ["simulate", "--out", "events.jsonl", *DEMO],
        ["audit", "events.jsonl", "--db", "demo.duckdb"],
        ["report", "--db", "demo.duckdb", "--out", "report", "--as-of", AS_OF],
    ]
    for step in steps:
        run = subprocess.run([exe, *step], cwd=work, env=env, capture_output=True, text=True, check=False)
        if run.returncode:
            raise SystemExit(f"dealtrail {' '.join(step)} failed (exit {run.returncode}):\n{run.stdout}{run.stderr}")
    folder = out / "demo"
    folder.mkdir()
    for name in ("summary.json", "findings.csv"):
        shutil.copyfile(work / "report" / name, folder / name)


def main(argv: list[str]) -> int:
    """Capture into the folder named by ``argv[0]`` (created; it must not exist yet)."""
    if len(argv) != 1:
        print("usage: capture_behaviour.py OUT_FOLDER", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = _env(work)
        os.environ.update(TZ="UTC")
        capture_openapi(out, work)
        capture_help(out, env)
        capture_demo(out, work, env)
    print(f"captured into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
