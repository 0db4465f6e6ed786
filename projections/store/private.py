"""Owner-only files and folders: everything dealtrail writes holds dealer IDs or raw input.

Files are created with mode 0600 and folders with 0700 and then chmod-ed, so the result does not
depend on the process umask; a file that was there before is made owner-only when it is
rewritten. Folders that existed before (``/tmp``, the user's home) are left as they are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Literal, overload


def make_private_dirs(folder: Path) -> list[Path]:
    """Create ``folder`` and any missing parents, each owner-only (0700).

    Returns:
        The folders created, outermost first (empty if ``folder`` existed).

    Raises:
        OSError: a path on the way is a file, or no permission.
    """
    missing: list[Path] = []
    p = folder
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    made = []
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            if not d.is_dir():
                raise
            continue
        d.chmod(0o700)
        made.append(d)
    return made


@overload
def open_private(path: Path, binary: Literal[False] = False) -> IO[str]: ...
@overload
def open_private(path: Path, binary: Literal[True]) -> IO[bytes]: ...
def open_private(path: Path, binary: bool = False) -> IO[str] | IO[bytes]:
    """Open ``path`` for writing (emptied if it exists), owner-only (0600) whatever the umask.

    Args:
        path: the file; its folder must exist.
        binary: bytes instead of UTF-8 text.

    Raises:
        OSError: ``path`` is a folder, or no permission.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    if binary:
        return open(fd, "wb")
    return open(fd, "w", encoding="utf-8")


def write_private_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, owner-only (see :func:`open_private`)."""
    with open_private(path) as fh:
        fh.write(text)


def make_private(path: Path) -> None:
    """Make an existing file owner-only (0600), e.g. one DuckDB's ``COPY`` wrote.

    Raises:
        OSError: no permission.
    """
    path.chmod(0o600)
