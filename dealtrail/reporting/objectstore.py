"""Where the daily exports live: a folder (a shared mount) or an S3-compatible bucket, one code path.

Both are fsspec filesystems: a folder is ``fsspec``'s local filesystem, a bucket is ``s3fs``'s
(credentials from the usual AWS variables or files, never from dealtrail's settings or logs; the
endpoint of an S3-compatible server from ``DEALTRAIL_EXPORT__S3_ENDPOINT``). Readers hand the same
filesystem to DuckDB (:meth:`Location.attach`, ``duckdb.register_filesystem``): DuckDB's own httpfs
extension is not needed, and a query reads ``s3://bucket/...`` or a folder's path alike.

On a folder every file is written owner-only (0600) and every folder 0700
(:mod:`projections.store.private`); in a bucket access is the bucket policy's to decide. A file
is never written over: :meth:`Location.write_new` refuses a path that exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import fsspec

from projections.store.private import make_private_dirs, open_private


class LocationError(ValueError):
    """A location that cannot be used: an unknown scheme, or a file there already where a new one would go."""


@dataclass(frozen=True)
class Location:
    """A folder or a bucket prefix holding exports.

    Attributes:
        url: as given: a folder's path, or ``s3://bucket/prefix``.
        fs: its fsspec filesystem.
        root: the root as ``fs`` names paths (an absolute folder path, or ``bucket/prefix``).
        scheme: ``file`` or ``s3``.
    """

    url: str
    fs: Any
    root: str
    scheme: str

    def path(self, *parts: str) -> str:
        """The fsspec path of ``parts`` under the root."""
        return "/".join([self.root.rstrip("/"), *parts])

    def duckdb_path(self, path: str) -> str:
        """How DuckDB names ``path`` (a path of :meth:`path`) once :meth:`attach` ran."""
        return f"s3://{path}" if self.scheme == "s3" else path

    def attach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Register the bucket's filesystem with ``con`` (a folder needs none)."""
        if self.scheme == "s3":
            con.register_filesystem(self.fs)

    def write_new(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path``, a file that must not exist (owner-only on a folder).

        Raises:
            LocationError: ``path`` exists (an export is never written over).
        """
        if self.fs.exists(path):
            raise LocationError(f"{self.duckdb_path(path)} exists: an export is never written over")
        if self.scheme == "file":
            target = Path(path)
            make_private_dirs(target.parent)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            with open_private(target, binary=True) as fh:
                fh.write(data)
            return
        self.fs.pipe_file(path, data)

    def claim(self, path: str) -> bool:
        """Create the folder ``path`` for a new revision; False if it is there already (on a
        folder the creation is atomic, so two exporters never share a revision; a bucket has no
        folders, and one exporter per property writes it)."""
        if self.scheme == "file":
            make_private_dirs(Path(path).parent)
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                return False
            os.chmod(path, 0o700)
            return True
        return not self.fs.exists(path)

    def read(self, path: str) -> bytes:
        """The bytes of ``path``."""
        data: bytes = self.fs.cat_file(path)
        return data

    def folders(self, path: str) -> list[str]:
        """The names of the folders directly under ``path`` (sorted; [] if none)."""
        try:
            entries = self.fs.ls(path, detail=True, refresh=True) if self.scheme == "s3" else self.fs.ls(path, True)
        except FileNotFoundError:
            return []
        return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e["type"] == "directory")

    def files(self, path: str) -> list[str]:
        """The names of the files directly under ``path`` (sorted; [] if none)."""
        try:
            entries = self.fs.ls(path, detail=True, refresh=True) if self.scheme == "s3" else self.fs.ls(path, True)
        except FileNotFoundError:
            return []
        return sorted(e["name"].rsplit("/", 1)[-1] for e in entries if e["type"] == "file")


def open_location(url: str, s3_endpoint: str | None = None) -> Location:
    """The :class:`Location` of ``url``: a folder's path, or ``s3://bucket[/prefix]``.

    Args:
        url: where the exports are.
        s3_endpoint: the address of an S3-compatible server (``DEALTRAIL_EXPORT__S3_ENDPOINT``);
            None: the bucket's provider's own.

    Raises:
        LocationError: another scheme, or an ``s3://`` without a bucket.
    """
    if url.startswith("s3://"):
        root = url.removeprefix("s3://").strip("/")
        if not root:
            raise LocationError(f"{url!r} names no bucket")
        import s3fs

        options: dict[str, Any] = {"client_kwargs": {"endpoint_url": s3_endpoint}} if s3_endpoint else {}
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
        return Location(url, fs, root, "s3")
    if "://" in url:
        raise LocationError(f"{url!r}: exports go to a folder or an s3:// bucket")
    return Location(url, fsspec.filesystem("file"), str(Path(url).resolve()), "file")
