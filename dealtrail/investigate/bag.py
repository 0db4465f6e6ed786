"""BagIt bags (RFC 8493) in memory: what an evidence package is laid out as, and its fixity check.

A bag is a folder holding ``bagit.txt`` (the version), ``bag-info.txt`` (who made it, what it
is), ``manifest-sha256.txt`` (the SHA-256 of every payload file under ``data/``) and
``tagmanifest-sha256.txt`` (the SHA-256 of those three tag files). Any BagIt tool checks it
(``bagit.py --validate FOLDER``); :func:`check_bag` does the same checks and names the file
that fails. A detached signature (``tagmanifest-sha256.txt.sig``, :mod:`projections.records.signing`)
over the tag manifest covers every file through it, and with it the public key it verifies with
(``signing-key.pem``): these two are tag files outside the tag manifest, which BagIt allows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

BAGIT_TXT = b"BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"
MANIFEST = "manifest-sha256.txt"
TAGMANIFEST = "tagmanifest-sha256.txt"
BAG_INFO = "bag-info.txt"
TAG_FILES = ("bagit.txt", BAG_INFO, MANIFEST, TAGMANIFEST)
"""The tag files every bag holds, in the order they are written."""


class BagError(ValueError):
    """A bag that fails a BagIt check: the message names the file."""


def _manifest(files: Mapping[str, bytes]) -> bytes:
    return "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(files.items())).encode()


def _info_line(key: str, value: str) -> str:
    clean = " ".join(str(value).split())  # one line: no line break can start another label
    return f"{key}: {clean}\n"


def make_bag(payload: Mapping[str, bytes], info: Mapping[str, str]) -> dict[str, bytes]:
    """The files of a bag (relative path -> bytes): ``payload`` under ``data/`` and the tag files.

    Args:
        payload: file name -> content (plain names, no folders).
        info: ``bag-info.txt`` labels -> values (one line each; ``Payload-Oxum`` is added).

    Returns:
        Every file of the bag, tag files first.
    """
    data = {f"data/{name}": content for name, content in payload.items()}
    oxum = f"{sum(len(c) for c in data.values())}.{len(data)}"
    bag_info = "".join(_info_line(k, v) for k, v in {**info, "Payload-Oxum": oxum}.items()).encode()
    tags = {"bagit.txt": BAGIT_TXT, BAG_INFO: bag_info, MANIFEST: _manifest(data)}
    tags[TAGMANIFEST] = _manifest(tags)
    return {**tags, **data}


def _read_manifest(name: str, text: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for n, line in enumerate(text.decode("utf-8", "replace").splitlines(), start=1):
        digest, sep, path = line.partition("  ")
        if not sep or len(digest) != 64 or not path:
            raise BagError(f"{name}, line {n}: not '<sha256>  <path>'")
        if path in out:
            raise BagError(f"{name} lists {path} twice")
        if path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in path.split("/")):
            raise BagError(f"{name}, line {n}: {path} lies outside the bag")
        out[path] = digest.lower()
    return out


def info(files: Mapping[str, bytes]) -> dict[str, str]:
    """The labels of the bag's ``bag-info.txt`` (the first value of each)."""
    out: dict[str, str] = {}
    for line in files.get(BAG_INFO, b"").decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in out:
            out[key.strip()] = value.strip()
    return out


def check_bag(files: Mapping[str, bytes]) -> None:
    """Check a bag's completeness and fixity as ``bagit.py --validate`` does.

    Args:
        files: every file of the bag, relative path -> bytes (tag files at the top, payload
            under ``data/``).

    Raises:
        BagError: a tag file missing, ``bagit.txt`` not BagIt 1.0, a payload file changed,
            missing from the bag, or not listed in the manifest, a tag file changed, or the
            ``Payload-Oxum`` not the payload's size; the message names the file.
    """
    for name in TAG_FILES:
        if name not in files:
            raise BagError(f"the bag holds no {name}")
    if not files["bagit.txt"].startswith(b"BagIt-Version: 1."):
        raise BagError("bagit.txt does not declare BagIt version 1")
    for listed, text, scope in (
        (_read_manifest(TAGMANIFEST, files[TAGMANIFEST]), TAGMANIFEST, "tag"),
        (_read_manifest(MANIFEST, files[MANIFEST]), MANIFEST, "payload"),
    ):
        for path, digest in listed.items():
            if path not in files:
                raise BagError(f"{path} is listed in {text} but not in the bag (removed)")
            if hashlib.sha256(files[path]).hexdigest() != digest:
                raise BagError(f"{path}: its SHA-256 is not the one {text} lists (altered)")
        if scope == "payload":
            for path in sorted(files):
                if path.startswith("data/") and path not in listed:
                    raise BagError(f"{path} is in the bag's payload but not listed in {MANIFEST} (added)")
    payload = [c for p, c in files.items() if p.startswith("data/")]
    oxum = info(files).get("Payload-Oxum")
    if oxum is not None and oxum != f"{sum(len(c) for c in payload)}.{len(payload)}":
        raise BagError(f"bag-info.txt's Payload-Oxum {oxum} is not the payload's size and count")
