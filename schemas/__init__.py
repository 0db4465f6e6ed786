"""dealtrail schemas: dealing events, findings and table configuration (pydantic v2, pure)."""

from schemas.base import Actor, ActorRole, DealingMethod, Envelope, Game, Source, WagerType
from schemas.codec import DecodeError, decode, encode
from schemas.config import PairBonusMode, ShakerMode, TableConfig
from schemas.events import EVENT_TYPES, DealingEvent
from schemas.findings import Finding, FindingStatus, Severity, finding_id_for

__all__ = [
    "EVENT_TYPES",
    "Actor",
    "ActorRole",
    "DealingEvent",
    "DealingMethod",
    "DecodeError",
    "Envelope",
    "Finding",
    "FindingStatus",
    "Game",
    "PairBonusMode",
    "Severity",
    "ShakerMode",
    "Source",
    "TableConfig",
    "WagerType",
    "decode",
    "encode",
    "finding_id_for",
]
