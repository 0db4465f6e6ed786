"""JSON Schema export of every event type, the ``Finding`` and ``TableConfig``.

The committed files in ``schemas/json/`` are checked against a fresh export by a test, so a
schema change without a new export fails the suite.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from schemas.config import TableConfig
from schemas.events import EVENT_TYPES
from schemas.findings import Finding


def all_schemas() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema document, for every exported model."""
    docs: dict[str, dict[str, Any]] = {}
    models: tuple[type[BaseModel], ...] = (*EVENT_TYPES, Finding, TableConfig)
    for cls in models:
        docs[f"{cls.__name__}.schema.json"] = cls.model_json_schema(mode="validation")
    return docs


def render(doc: dict[str, Any]) -> str:
    """The canonical text of a schema file (sorted keys, two-space indent, final newline)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    """Write every schema into ``folder`` and return the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, doc in all_schemas().items():
        path = folder / name
        path.write_text(render(doc), encoding="utf-8")
        out.append(path)
    return out
