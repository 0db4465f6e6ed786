"""An evidence package read by a second BagIt implementation (issue 47, item 6): the Library of
Congress's bagit-java 5.2.0 (``ops/bagit-java/fetch`` copies it from Maven Central) validates a
fresh signed package and rejects an altered one. bagit-java reads every file named
``tagmanifest-*`` or ``manifest-*`` as a manifest: a package whose signature was
``tagmanifest-sha256.txt.sig`` failed it.

Needs Java (``java``, ``javac``) and the jars; without them the test skips and says what to run,
except under ``DEALTRAIL_REQUIRE_BAGIT_JAVA=1`` or ``CI=true`` (``.ci/run``), where it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from dealtrail.investigate.evidence import build_package
from projections.records.signing import create_key
from streams.engine import Plausibility

SOURCE = Path(__file__).resolve().parents[2] / "ops" / "bagit-java" / "CheckBag.java"
NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _jars() -> Path:
    return Path(os.environ.get("DEALTRAIL_BAGIT_JAVA_DIR") or Path.home() / ".cache" / "dealtrail" / "bagit-java")


def _missing(reason: str) -> None:
    if os.environ.get("DEALTRAIL_REQUIRE_BAGIT_JAVA") == "1" or os.environ.get("CI") == "true":
        pytest.fail(f"bagit-java is required (DEALTRAIL_REQUIRE_BAGIT_JAVA=1 or CI=true) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def check_bag(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The command that validates a bag with bagit-java (CheckBag.java compiled against its jars)."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        _missing("java and javac are not installed (OpenJDK 17)")
    jars = sorted(_jars().glob("*.jar"))
    if not any(j.name == "bagit-5.2.0.jar" for j in jars):
        _missing(f"no bagit-5.2.0.jar in {_jars()}: run ops/bagit-java/fetch")
    classes = tmp_path_factory.mktemp("bagit-java")
    path = os.pathsep.join(str(j) for j in jars)
    subprocess.run(["javac", "-cp", path, "-d", str(classes), str(SOURCE)], check=True, timeout=300)
    yield ["java", "-cp", os.pathsep.join([path, str(classes)]), "CheckBag"]


@pytest.fixture()
def package(audited_shift: Path, tmp_path: Path) -> Path:
    """A fresh signed package of one finding, written as a folder."""
    key = create_key(tmp_path / "key" / "signing.pem")
    con = duckdb.connect(str(audited_shift), read_only=True)
    try:
        fid = con.execute("SELECT min(finding_id) FROM dim_findings WHERE rule_id = 'DT-remedy-overdue'").fetchall()
        pkg = build_package(con, fid[0][0], Plausibility(100_000, timedelta(hours=1)), NOW, signer=key)
    finally:
        con.close()
    return pkg.write(tmp_path / "pkg")


def _run(command: list[str], bag: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command, str(bag)], capture_output=True, text=True, timeout=300, check=False)


def test_bagit_java_validates_a_fresh_signed_package(check_bag: list[str], package: Path) -> None:
    r = _run(check_bag, package)
    assert r.returncode == 0 and r.stdout.startswith("valid:"), r.stdout + r.stderr


@pytest.mark.parametrize("alteration", ["an event", "a file added to the payload", "a tag file"])
def test_bagit_java_rejects_an_altered_package(check_bag: list[str], package: Path, alteration: str) -> None:
    if alteration == "an event":
        events = package / "data" / "events.jsonl"
        events.write_bytes(events.read_bytes().replace(b'"occurred_at":"2', b'"occurred_at":"1', 1))
    elif alteration == "a file added to the payload":
        (package / "data" / "notes.txt").write_text("added\n")
    else:
        (package / "check_chain.py").write_text('print("chain OK")\n')
    r = _run(check_bag, package)
    assert r.returncode == 1 and r.stdout.startswith("INVALID:"), r.stdout + r.stderr
