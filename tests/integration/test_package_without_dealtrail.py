"""An evidence package checked as a regulator checks it (issue 35): the exact commands of
docs/integrity.md's "Checking a package without dealtrail", taken from the page and run in a
shell whose PATH holds no dealtrail (``bagit.py``, ``openssl``, ``sha256sum``, the system's
``python3`` with the page's standard-library script), on a fresh signed package and on packages
altered in each part; each alteration is refused by the tool that should catch it, and by
``dealtrail verify-package`` naming what changed."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dealtrail.investigate.bag import MANIFEST, TAGMANIFEST
from dealtrail.investigate.evidence import Package, build_package, verify_package
from projections.records.signing import create_key, public_pem
from streams.engine import Plausibility

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrity.md"
SECTION = "## Checking a package without dealtrail"
NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end > 0 else None]


def doc_commands() -> list[str]:
    """The section's shell commands, one a line, as written."""
    block = re.search(r"```sh\n(.*?)```", _section(), re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def doc_script() -> str:
    block = re.search(r"```python\n(.*?)```", _section(), re.S)
    assert block is not None
    return block.group(1)


def test_the_package_carries_the_docs_chain_script_under_its_signature(signed: tuple[Package, bytes]) -> None:
    package, _ = signed
    assert package.bag["check_chain.py"].decode() == doc_script()
    signed_list = package.bag["signed-sha256.txt"].decode()
    assert f"{hashlib.sha256(package.bag['check_chain.py']).hexdigest()}  check_chain.py" in signed_list
    # every file of the bag is in a manifest; no file but a manifest is named manifest-* or tagmanifest-*
    listed = {line.split("  ", 1)[1] for line in package.bag[TAGMANIFEST].decode().splitlines()}
    listed |= {line.split("  ", 1)[1] for line in package.bag[MANIFEST].decode().splitlines()}
    assert set(package.bag) - {TAGMANIFEST} == listed
    assert [n for n in package.bag if n.startswith(("manifest-", "tagmanifest-"))] == [MANIFEST, TAGMANIFEST]


def test_the_docs_chain_script_is_short_and_imports_only_the_standard_library() -> None:
    script = doc_script()
    assert len(script.splitlines()) <= 40
    imported = set()
    for node in ast.walk(ast.parse(script)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(str(node.module).split(".")[0])
    assert imported <= set(sys.stdlib_module_names), imported


@pytest.fixture(scope="module")
def signed(audited_shift: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Package, bytes]:
    """A signed package of one remedy-overdue finding of the small shift, and the public key."""
    import duckdb

    key = create_key(tmp_path_factory.mktemp("key") / "signing.pem")
    con = duckdb.connect(str(audited_shift), read_only=True)
    fid = con.execute(
        "SELECT finding_id FROM dim_findings WHERE rule_id = 'DT-remedy-overdue' ORDER BY finding_id LIMIT 1"
    ).fetchall()[0][0]
    try:
        package = build_package(
            con, fid, Plausibility(100_000, timedelta(hours=1)), NOW, signer=key, property_name="Test Casino"
        )
    finally:
        con.close()
    return package, public_pem(key)


def _lay_out(package: Package, public_key: bytes, where: Path) -> Path:
    """The folder a regulator works in: ``pkg`` (the package as unzipped), the registered key,
    the doc's script, and a ``bin`` with ``bagit.py`` only (nothing of dealtrail on PATH)."""
    package.write(where / "pkg")
    (where / "registered-key.pem").write_bytes(public_key)
    (where / "bin").mkdir()
    (where / "bin" / "bagit.py").symlink_to(Path(sys.executable).parent / "bagit.py")
    return where


def _run(where: Path) -> list[subprocess.CompletedProcess[str]]:
    env = {"PATH": f"{where / 'bin'}:/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(where)}
    env["TZ"] = os.environ.get("TZ", "UTC")
    return [
        subprocess.run(
            ["bash", "-c", cmd], check=False, cwd=where, env=env, capture_output=True, text=True, timeout=120
        )
        for cmd in doc_commands()
    ]


def test_a_fresh_package_passes_every_command_of_the_docs(signed: tuple[Package, bytes], tmp_path: Path) -> None:
    where = _lay_out(*signed, tmp_path)
    runs = _run(where)
    assert [r.returncode for r in runs] == [0] * len(runs), [(r.args, r.stdout, r.stderr) for r in runs]
    bagit, openssl, _, chain = runs
    assert "pkg is valid" in bagit.stderr
    assert openssl.stdout.strip() == "Signature Verified Successfully"
    assert chain.stdout.startswith(f"chain OK: {signed[0].events} events, {signed[0].links} links")
    assert verify_package(where / "pkg", signed[1]).ok


def _edit(rel: str, change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def apply(pkg: Path) -> None:
        path = pkg / rel
        path.write_bytes(change(path.read_bytes()))

    return apply


def _rehash(pkg: Path) -> None:
    """What a forger without the key does after an edit: the bag's manifests made anew."""
    payload = sorted(p for p in (pkg / "data").iterdir())
    (pkg / MANIFEST).write_text("".join(f"{_sha(p)}  data/{p.name}\n" for p in payload))
    _rehash_tags(pkg)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _alter_event(data: bytes) -> bytes:
    lines = data.split(b"\n")
    lines[1] = lines[1].replace(b'"occurred_at":"2', b'"occurred_at":"1', 1)
    return b"\n".join(lines)


def _alter_digest(data: bytes) -> bytes:
    return re.sub(rb'"head_hash": "[0-9a-f]', b'"head_hash": "x', data, count=1)


def _event_rehashed(pkg: Path) -> None:
    _edit("data/events.jsonl", _alter_event)(pkg)
    _rehash(pkg)


def _outside(pkg: Path) -> None:
    (pkg.parent / "outside.txt").write_text("not in the bag\n")
    with (pkg / MANIFEST).open("a") as fh:
        fh.write(f"{_sha(pkg.parent / 'outside.txt')}  data/../../outside.txt\n")
    _rehash_tags(pkg)


def _rehash_tags(pkg: Path) -> None:
    tags = sorted(p for p in pkg.iterdir() if p.is_file() and p.name != TAGMANIFEST)
    (pkg / TAGMANIFEST).write_text("".join(f"{_sha(p)}  {p.name}\n" for p in tags))


def _checker_rehashed(pkg: Path) -> None:
    (pkg / "check_chain.py").write_text('print("chain OK")\n')
    _rehash_tags(pkg)


# alteration -> (the change, which of the doc's commands must fail: bagit, openssl, sha256sum, chain, what
# verify-package names)
ALTERATIONS: dict[str, tuple[Callable[[Path], None], tuple[bool, bool, bool, bool], str]] = {
    "an event": (_edit("data/events.jsonl", _alter_event), (True, False, True, True), "data/events.jsonl"),
    "an event, the bag rehashed": (_event_rehashed, (False, False, True, True), "altered after signing"),
    "the checker, the bag rehashed": (_checker_rehashed, (False, False, True, False), "check_chain.py"),
    "the manifest": (
        _edit(MANIFEST, lambda b: b.replace(b"  data/events.jsonl", b"  data/event.jsonl")),
        (True, False, True, False),
        "manifest-sha256.txt",
    ),  # (the signed list names the manifest's SHA-256: sha256sum -c signed-sha256.txt fails)
    "the digest": (_edit("data/digest.json", _alter_digest), (True, False, True, True), "data/digest.json"),
    "a removed file": (lambda pkg: (pkg / "data" / "reviews.json").unlink(), (True, False, True, False), "reviews"),
    "an added file": (
        lambda pkg: (pkg / "data" / "notes.txt").write_text("added\n"),
        (True, False, False, False),
        "data/notes.txt",
    ),
    "a path outside the bag": (_outside, (True, False, True, False), "outside the bag"),
}


@pytest.mark.parametrize("alteration", list(ALTERATIONS))
def test_each_alteration_is_refused_by_the_tool_that_should_catch_it_and_by_verify_package(
    alteration: str, signed: tuple[Package, bytes], tmp_path: Path
) -> None:
    change, must_fail, named = ALTERATIONS[alteration]
    where = _lay_out(*signed, tmp_path)
    change(where / "pkg")
    runs = _run(where)
    failed = tuple(r.returncode != 0 for r in runs)
    assert failed == must_fail, [(r.args, r.returncode, r.stdout[-300:], r.stderr[-300:]) for r in runs]
    report = verify_package(where / "pkg", signed[1])
    assert not report.ok and named in (report.problem or ""), report.problem
