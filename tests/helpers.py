"""Helpers shared by test modules (fixtures live in the conftest files)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest


def unchained_lines(lines: Iterable[bytes]) -> list[bytes]:
    """JSON Lines events with their chain fields (``prev_hash``, ``hash``, ``hash_version``)
    removed, each ending in a newline."""
    out = []
    for line in lines:
        doc = json.loads(line)
        doc.pop("prev_hash", None)
        doc.pop("hash", None)
        doc.pop("hash_version", None)
        out.append(json.dumps(doc).encode() + b"\n")
    return out


def write_unchained(events: Path, out: Path) -> Path:
    """Write ``events`` to ``out`` without the chain fields; returns ``out``."""
    out.write_bytes(b"".join(unchained_lines(events.read_bytes().splitlines())))
    return out


def can_mount() -> bool:
    """Whether the tests run as root with ``mount`` at hand (a tmpfs can be mounted for a test)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("mount") is not None


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``3m``, bytes) mounted at ``folder`` for the block (skips the test
    where mounting is not allowed); unmounted afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def remount(folder: Path, options: str) -> None:
    """Mount the tmpfs at ``folder`` again with ``options`` (``size=64m``, ``ro``, ``rw``)."""
    subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True)


def rebag(out: Path) -> None:
    """Make the BagIt manifests of a written, unsigned evidence package anew after its payload
    (``data/``) was edited, as anyone can: what the checks after the bag's then see."""
    from dealtrail.investigate.bag import info, make_bag

    payload = {p.name: p.read_bytes() for p in (out / "data").iterdir()}
    labels = info({"bag-info.txt": (out / "bag-info.txt").read_bytes()})
    labels.pop("Payload-Oxum", None)
    tags = {"check_chain.py": (out / "check_chain.py").read_bytes()} if (out / "check_chain.py").exists() else {}
    for rel, data in make_bag(payload, labels, tags).items():
        (out / rel).write_bytes(data)


def need_browser(reason: str) -> None:
    """Skip a browser test for ``reason``, or fail it where a browser is required
    (``DEALTRAIL_REQUIRE_BROWSER=1``, as in CI)."""
    if os.environ.get("DEALTRAIL_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served_app(app: Any) -> Iterator[str]:
    """``app`` (ASGI) served by uvicorn on a free loopback port in a thread; yields its base URL
    and stops the server afterwards.

    Raises:
        AssertionError: the server did not start within 30 s.
    """
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the console did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
