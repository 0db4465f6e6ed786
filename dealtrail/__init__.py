"""dealtrail: the audit trail for casino table-game dealing procedures (58 Pa. Code)."""

__version__ = "0.1.0"
