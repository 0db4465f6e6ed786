"""dealtrail: the audit trail for casino table-game dealing procedures (58 Pa. Code)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dealtrail")
    """The installed package's version (``pyproject.toml``; CHANGELOG.md's latest release)."""
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
