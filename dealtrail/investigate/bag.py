"""BagIt bags (RFC 8493) in memory: what an evidence package is laid out as, and its fixity check.

A bag is a folder holding ``bagit.txt`` (the version), ``bag-info.txt`` (who made it, what it
is), ``manifest-sha256.txt`` (the SHA-256 of every payload file under ``data/``) and
``tagmanifest-sha256.txt`` (the SHA-256 of those three tag files). Any BagIt tool checks it
(``bagit.py --validate FOLDER``); :func:`check_bag` does the same checks and names the file
that fails.

Other tag files a bag carries (the public key, the standard-library chain checker) are listed in
the tag manifest too, so that every file of the bag is in a manifest. A signed bag also holds
:data:`SIGNED` (the SHA-256 of every tag file but the tag manifest, in a manifest's form) and its
detached signature :data:`SIGNED_SIGNATURE` (:mod:`projections.records.signing`), both in the tag
manifest: the signature covers every tag file and, through the payload manifest, every payload
file. Neither is named ``manifest-*`` or ``tagmanifest-*``, which BagIt reserves for manifests
(bagit-java reads every file so named as one).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

BAGIT_TXT = b"BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"
MANIFEST = "manifest-sha256.txt"
TAGMANIFEST = "tagmanifest-sha256.txt"
BAG_INFO = "bag-info.txt"
TAG_FILES = ("bagit.txt", BAG_INFO, MANIFEST, TAGMANIFEST)
"""The tag files every bag holds, in the order they are written."""
SIGNED = "signed-sha256.txt"
"""A signed bag's list of the SHA-256 of its tag files (all but the tag manifest): what its signature signs."""
SIGNED_SIGNATURE = SIGNED + ".sig"
"""The detached Ed25519 signature of :data:`SIGNED`."""


class BagError(ValueError):
    """A bag that fails a BagIt check: the message names the file."""


def _manifest(files: Mapping[str, bytes]) -> bytes:
    return "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(files.items())).encode()


def _info_line(key: str, value: str) -> str:
    clean = " ".join(str(value).split())  # one line: no line break can start another label
    return f"{key}: {clean}\n"


def make_bag(
    payload: Mapping[str, bytes],
    info: Mapping[str, str],
    tags: Mapping[str, bytes] | None = None,
    signer: Callable[[bytes], bytes] | None = None,
) -> dict[str, bytes]:
    """The files of a bag (relative path -> bytes): ``payload`` under ``data/`` and the tag files.

    Args:
        payload: file name -> content (plain names, no folders).
        info: ``bag-info.txt`` labels -> values (one line each; ``Payload-Oxum`` is added).
        tags: more tag files (name -> content) for the bag's top, listed in its tag manifest.
        signer: signs bytes (a detached signature); given, the bag holds :data:`SIGNED` and
            :data:`SIGNED_SIGNATURE`, both in its tag manifest.

    Returns:
        Every file of the bag, tag files first; every one of them is in a manifest.
    """
    data = {f"data/{name}": content for name, content in payload.items()}
    oxum = f"{sum(len(c) for c in data.values())}.{len(data)}"
    bag_info = "".join(_info_line(k, v) for k, v in {**info, "Payload-Oxum": oxum}.items()).encode()
    files = {"bagit.txt": BAGIT_TXT, BAG_INFO: bag_info, MANIFEST: _manifest(data), **(tags or {})}
    if signer is not None:
        files[SIGNED] = _manifest(files)
        files[SIGNED_SIGNATURE] = signer(files[SIGNED])
    files[TAGMANIFEST] = _manifest(files)
    return {**files, **data}


def read_manifest(name: str, text: bytes) -> dict[str, str]:
    """A manifest's lines (``<sha256>  <path>``) as path -> SHA-256 (lower case).

    Raises:
        BagError: a line not of that form, a path twice, or one outside the bag (``name`` named).
    """
    return _read_manifest(name, text)


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


def check_bag(files: Mapping[str, bytes], every_tag_listed: bool = False) -> None:
    """Check a bag's completeness and fixity as ``bagit.py --validate`` does.

    Args:
        files: every file of the bag, relative path -> bytes (tag files at the top, payload
            under ``data/``).
        every_tag_listed: also refuse a tag file the tag manifest does not list (every file of
            the bag in a manifest, as :func:`make_bag` writes it).

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
        if scope == "tag" and every_tag_listed:
            for path in sorted(files):
                if "/" not in path and path != TAGMANIFEST and path not in listed:
                    raise BagError(f"{path} is in the bag but not listed in {TAGMANIFEST} (added)")
        if scope == "payload":
            for path in sorted(files):
                if path.startswith("data/") and path not in listed:
                    raise BagError(f"{path} is in the bag's payload but not listed in {MANIFEST} (added)")
    payload = [c for p, c in files.items() if p.startswith("data/")]
    oxum = info(files).get("Payload-Oxum")
    if oxum is not None and oxum != f"{sum(len(c) for c in payload)}.{len(payload)}":
        raise BagError(f"bag-info.txt's Payload-Oxum {oxum} is not the payload's size and count")
