"""The SQL files of ``projections/store/sql/``, read with their shared definitions spliced in.

A rule that two SQL files need (a finding's review status as of a time, the link from a consequence
to its cause) is written once, in a file of its own, and named where it is used by a marker
``/*include:<file>.sql*/``: :func:`read_sql` replaces each marker with that file's text (itself
read the same way), so every reader (the writer's DDL, the summaries, the read models, the report)
runs the one definition.
"""

from __future__ import annotations

import re
from importlib import resources

INCLUDE = re.compile(r"/\*include:([a-z0-9_]+\.sql)\*/")
"""A marker naming the SQL file to splice in at its place."""


def read_sql(name: str) -> str:
    """The text of ``projections/store/sql/<name>`` with every ``/*include:<file>*/`` replaced.

    Args:
        name: the file's name, e.g. ``"rpt_findings.sql"``.

    Returns:
        The SQL text (UTF-8 decoded), includes expanded recursively.

    Raises:
        FileNotFoundError: no such file (the named one or an included one).
        ValueError: a file includes itself, directly or through another.
    """
    return _expand(name, ())


def _expand(name: str, within: tuple[str, ...]) -> str:
    if name in within:
        raise ValueError(f"{name} includes itself (through {' -> '.join(within)})")
    text = resources.files("projections.store").joinpath("sql", name).read_text(encoding="utf-8")
    return INCLUDE.sub(lambda m: _expand(m.group(1), (*within, name)).rstrip("\n"), text)
