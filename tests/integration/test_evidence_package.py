"""A hostile recipient's evidence packages (issue 22, item 5): ``verify-package`` refuses a zip or
folder not laid out as ``dealtrail evidence`` writes it (a forged file with the genuine one
behind it, duplicate, nested, absolute, ``..`` or unknown members), a zip bomb, and a finding
edited in ``finding.json``; says what the chain does not prove; and refuses in one line."""

from __future__ import annotations

import contextlib
import json
import struct
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from dealtrail.cli import app as cli
from dealtrail.investigate import evidence
from dealtrail.investigate.evidence import Package, build_package, verify_package
from streams.engine import Plausibility
from tests.helpers import rebag

LIMITS = Plausibility(100_000, timedelta(hours=1))
NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@pytest.fixture(scope="module")
def package(audited_shift: Path) -> Package:
    """The package of one remedy-overdue finding of the small shift (its proof spans two rounds)."""
    import duckdb

    con = duckdb.connect(str(audited_shift), read_only=True)
    fid = con.execute(
        "SELECT finding_id FROM dim_findings WHERE rule_id = 'DT-remedy-overdue' ORDER BY finding_id LIMIT 1"
    ).fetchall()[0][0]
    try:
        return build_package(con, fid, LIMITS, NOW)
    finally:
        con.close()


def _zip(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return path


def _genuine(package: Package, folder: str = "pkg") -> list[tuple[str, bytes]]:
    """The package's bag as zip members (in ``folder/``, or at the top)."""
    return [(f"{folder}/{rel}" if folder else rel, data) for rel, data in package.bag.items()]


def _rewrite(out: Path, name: str, text: str) -> None:
    """Edit a payload file of a written (unsigned) package, and make the bag's manifests anew,
    as anyone can: what the re-derivation then checks."""
    (out / "data" / name).write_text(text)
    rebag(out)


def _forged_events(package: Package) -> bytes:
    lines = package.files["events.jsonl"].split(b"\n")
    lines[1] = lines[1].replace(b'"occurred_at":"2', b'"occurred_at":"1', 1)
    assert lines[1] != package.files["events.jsonl"].split(b"\n")[1]
    return b"\n".join(lines)


def _refused(r: Result, code: int = 4) -> str:
    """The one line ``verify-package`` printed on stderr (no traceback, nothing on stdout), checked."""
    assert r.exit_code == code, r.output
    assert not isinstance(r.exception, Exception) or isinstance(r.exception, SystemExit), r.exception
    lines = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith("WARNING: the package is not signed")]
    assert "Traceback" not in r.output, r.output
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("first event that does not verify")), r.output
    assert "verified:" not in r.stdout
    return lines[0]


def test_the_genuine_package_still_verifies_as_a_zip_with_or_without_its_folder(
    package: Package, tmp_path: Path
) -> None:
    for folder in ("pkg", ""):
        path = _zip(tmp_path / f"ok{folder}.zip", _genuine(package, folder))
        r = CliRunner().invoke(cli, ["verify-package", str(path)])
        assert r.exit_code == 0 and "verified:" in r.stdout, r.output
    path = _zip(tmp_path / "with-dir.zip", [("pkg/", b""), *_genuine(package)])
    assert verify_package(path).ok


def test_a_forged_file_with_the_genuine_one_behind_it_in_another_folder_is_refused(
    package: Package, tmp_path: Path
) -> None:
    members = [(n, _forged_events(package) if n.endswith("events.jsonl") else d) for n, d in _genuine(package)]
    path = _zip(tmp_path / "forged.zip", [*members, ("zzz/events.jsonl", package.files["events.jsonl"])])
    line = _refused(CliRunner().invoke(cli, ["verify-package", str(path)]))
    assert line.startswith("NOT VERIFIED:") and "'zzz/events.jsonl'" in line and "outside the package's folder" in line


@pytest.mark.parametrize(
    ("member", "said"),
    [
        ("pkg/data/events.jsonl", "twice"),
        ("../../x", "'..' path"),
        ("/tmp/x", "absolute"),
        ("pkg/sub/events.jsonl", "nested"),
        ("pkg/notes.txt", "not a file of an evidence package"),
        ("pkg/..", "'..' path"),
        ("events.jsonl", "outside the package's folder"),
    ],
)
def test_zip_members_outside_a_package_layout_are_refused_naming_the_member(
    package: Package, tmp_path: Path, member: str, said: str
) -> None:
    path = tmp_path / "bad.zip"
    with (
        pytest.warns(UserWarning) if member == "pkg/data/events.jsonl" else contextlib.nullcontext()
    ):  # zipfile: duplicate name
        _zip(path, [*_genuine(package), (member, package.files["events.jsonl"])])
    report = verify_package(path)
    assert not report.ok and repr(member) in (report.problem or "") and said in (report.problem or ""), report.problem
    line = _refused(CliRunner().invoke(cli, ["verify-package", str(path)]))
    assert repr(member) in line


def test_a_missing_file_and_extra_files_in_a_package_folder_are_refused(package: Package, tmp_path: Path) -> None:
    out = package.write(tmp_path / "extra")
    (out / "notes.txt").write_text("a file the package does not hold\n")
    report = verify_package(out)
    assert (
        not report.ok
        and "'notes.txt'" in (report.problem or "")
        and "not a file of an evidence package" in (report.problem or "")
    )
    _refused(CliRunner().invoke(cli, ["verify-package", str(out)]))
    out2 = package.write(tmp_path / "sub")
    (out2 / "events.jsonl.d").mkdir()
    assert "'events.jsonl.d'" in (verify_package(out2).problem or "")
    out3 = package.write(tmp_path / "link")
    (out3 / "data" / "reviews.json").unlink()
    (out3 / "data" / "reviews.json").symlink_to(out2 / "data" / "reviews.json")
    assert "not a regular file" in (verify_package(out3).problem or "")
    out4 = package.write(tmp_path / "missing")
    (out4 / "data" / "reviews.json").unlink()
    assert "data/reviews.json is listed in manifest-sha256.txt but not in the bag (removed)" in str(
        verify_package(out4).problem
    )


def test_a_zip_bomb_is_refused_unread_in_one_line(package: Package, tmp_path: Path) -> None:
    # A real one: events.jsonl of newlines, a little over the limit (64 MiB) in a zip of about 70 KB
    big = b"\n" * (evidence.MAX_FILE_BYTES + 1)
    path = _zip(tmp_path / "bomb.zip", [(n, big if n.endswith("events.jsonl") else d) for n, d in _genuine(package)])
    del big
    assert path.stat().st_size < 1_000_000
    line = _refused(CliRunner().invoke(cli, ["verify-package", str(path)]))
    assert "'pkg/data/events.jsonl' holds more than 64 MiB" in line


def test_a_zip_listing_too_many_members_is_refused_before_its_directory_is_read(
    package: Package, tmp_path: Path
) -> None:
    path = _zip(tmp_path / "many.zip", [*_genuine(package), *((f"pkg/{n}", b"") for n in range(100))])
    line = _refused(CliRunner().invoke(cli, ["verify-package", str(path)]))
    assert f"lists {len(package.bag) + 100} members" in line and "refused unread" in line


def test_a_zip_whose_recorded_size_lies_or_is_over_the_limit_is_refused(
    package: Package, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = max(len(data) for data in package.files.values()) + 1
    monkeypatch.setattr(evidence, "MAX_FILE_BYTES", limit)
    big = b"\n" * (2 * limit)
    path = _zip(tmp_path / "liar.zip", [(n, big if n.endswith("events.jsonl") else d) for n, d in _genuine(package)])
    # the sizes of pkg/events.jsonl rewritten to 10 bytes in its local header and the central directory:
    # read no further than that, its CRC does not match: refused naming the member
    data = bytearray(path.read_bytes())
    name = b"pkg/data/events.jsonl"
    for signature, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = 0
        while (at := data.find(signature, at)) >= 0:
            name_at = at + (30 if signature == b"PK\x03\x04" else 46)
            if data[name_at : name_at + len(name)] == name:
                struct.pack_into("<I", data, at + size_at, 10)
            at += 4
    path.write_bytes(bytes(data))
    report = verify_package(path)
    assert not report.ok and "'pkg/data/events.jsonl'" in (report.problem or ""), report.problem
    _refused(CliRunner().invoke(cli, ["verify-package", str(path)]))
    # a member whose size is told truly but over the limit, and the files' total over its limit
    honest = _zip(tmp_path / "big.zip", [(n, big if n.endswith("events.jsonl") else d) for n, d in _genuine(package)])
    assert "'pkg/data/events.jsonl' holds more than" in (verify_package(honest).problem or "")
    out = package.write(tmp_path / "big-folder")
    (out / "data" / "chain.jsonl").write_bytes(big)
    assert "'data/chain.jsonl' in the package folder holds more than" in (verify_package(out).problem or "")
    monkeypatch.setattr(evidence, "MAX_FILE_BYTES", 2**20)
    monkeypatch.setattr(evidence, "MAX_TOTAL_BYTES", len(package.files["chain.jsonl"]) + 100)
    assert "hold more than" in (verify_package(package.write(tmp_path / "total")).problem or "")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("message", "The dealer did everything right."),
        ("severity", "procedural"),
        ("rule_id", "DT-other-rule"),
        ("citation", "58 Pa. Code 0.0"),
        ("table_id", "T-ELSEWHERE"),
        ("round_id", "R-OTHER"),
        ("evidence_event_ids", []),
        ("required_remedy", "nothing"),
        ("late", True),
        ("observed_at", "2020-01-01T00:00:00Z"),
    ],
)
def test_a_finding_edited_in_finding_json_fails_naming_the_field(
    package: Package, tmp_path: Path, field: str, value: object
) -> None:
    out = package.write(tmp_path / "p")
    doc = json.loads((out / "data" / "finding.json").read_text())
    if doc["revisions"][0][field] == value:
        value = {"severity": "integrity"}.get(field, "something-else")
    doc["revisions"][0][field] = value
    _rewrite(out, "finding.json", json.dumps(doc))
    report = verify_package(out)
    assert not report.ok and f"its {field} in finding.json" in (report.problem or ""), report.problem
    line = _refused(CliRunner().invoke(cli, ["verify-package", str(out)]))
    assert f"its {field} in finding.json" in line


def test_finding_json_must_agree_with_the_manifest_and_hold_a_revision(package: Package, tmp_path: Path) -> None:
    out = package.write(tmp_path / "p")
    doc = json.loads((out / "data" / "finding.json").read_text())
    _rewrite(out, "finding.json", json.dumps({**doc, "rule_id": "DT-other"}))
    assert "finding.json's rule_id" in (verify_package(out).problem or "")
    _rewrite(out, "finding.json", json.dumps({**doc, "citation": "58 Pa. Code 0.0"}))
    assert "finding.json's citation" in (verify_package(out).problem or "")
    _rewrite(out, "finding.json", json.dumps({**doc, "revisions": []}))
    assert "holds no revision" in (verify_package(out).problem or "")


def test_what_the_chain_does_not_prove_is_said_by_verify_package_and_the_readme(
    package: Package, tmp_path: Path
) -> None:
    out = package.write(tmp_path / "p")
    _rewrite(out, "reviews.json", '[{"kind": "disposed", "actor": "someone-else"}]\n')
    r = CliRunner().invoke(cli, ["verify-package", str(out)])
    assert r.exit_code == 0 and "verified:" in r.stdout, r.output
    said = next(x for x in r.stdout.splitlines() if x.startswith("not proven by the chain:"))
    assert "reviews.json" in said and "start-states.json" in said
    readme = " ".join((out / "data" / "README.md").read_text().split())
    assert (
        "not proven by the chain" in readme.lower() and "`reviews.json`" in readme and "`start-states.json`" in readme
    )
    docs = " ".join((Path(__file__).parents[2] / "docs" / "integrity.md").read_text().split())
    assert f"`{evidence.NOT_PROVEN}`" in docs  # the docs quote the line verify-package prints


def test_garbage_and_no_package_still_refused_as_no_package(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.zip"
    garbage.write_bytes(b"this is not a zip at all\n" * 10)
    assert "neither a package folder nor a zip" in _refused(
        CliRunner().invoke(cli, ["verify-package", str(garbage)]), 2
    )
    assert "no package at" in _refused(CliRunner().invoke(cli, ["verify-package", str(tmp_path / "none")]), 2)
    # a name with rich markup in it is printed as it is
    path = _zip(tmp_path / "markup.zip", [("pkg/[bold]x[/bold]", b"x")])
    assert "'pkg/[bold]x[/bold]'" in _refused(CliRunner().invoke(cli, ["verify-package", str(path)]))
