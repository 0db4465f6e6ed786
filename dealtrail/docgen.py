"""Reference documents generated from the code: settings, rules and events (``make docs``).

``docs/settings.md`` comes from the settings model (:class:`dealtrail.settings.Settings`),
``docs/rules.md`` from the rule catalogue (:data:`streams.engine.catalog.RULES`) and
``docs/events.md`` from the event schemas (:data:`schemas.events.EVENT_TYPES`). Tests compare the
committed files with what this module writes, so a setting, rule or event changed without its
document fails the suite.

Run ``python -m dealtrail.docgen [FOLDER]`` (default ``docs``) to write the three files.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from dealtrail.settings import Settings
from schemas.base import SCHEMA_VERSION
from schemas.bounds import BOUNDS
from schemas.events import EVENT_TYPES
from streams.engine.catalog import RULEBOOK_REVISION, RULES

KAFKA_CLIENTS = ("topics", "publish", "worker", "project", "replay", "verify", "staff", "status")
"""The commands that talk to Kafka (``replay`` and ``verify`` with ``--source kafka``, ``staff
import --publish``, ``status``)."""
WRITERS = ("audit", "demo", "reaudit", "project", "serve", "users", "staff", "sign-report")
"""The commands that open the store for writing."""
REPORTERS = ("report", "demo", "schedule", "project", "serve")
"""The commands that write or show compliance reports."""

READERS: dict[str, tuple[str, ...]] = {
    "kafka": KAFKA_CLIENTS,
    "kafka.compression": ("publish", "worker"),
    "db": (
        "audit",
        "reaudit",
        "report",
        "project",
        "replay",
        "schedule",
        "verify",
        "digest",
        "serve",
        "users",
        "staff",
        "sign-report",
    ),
    "out": ("report", "project", "schedule"),
    "property_name": REPORTERS,
    "timezone": ("report", "schedule", "project", "replay", "serve"),
    "namespace": KAFKA_CLIENTS,
    "partitions": ("topics",),
    "replication": ("topics",),
    "worker": ("worker",),
    "reorder": ("audit", "demo", "publish", "worker", "reaudit"),
    "reorder.idle": ("worker",),
    "health": ("project", "serve"),
    "metrics": ("worker", "project", "serve"),
    "health.host": ("project",),
    "health.port": ("project",),
    "review": REPORTERS,
    "review.disposition_needs_voiding": ("serve", "project"),
    "review.disposition_needs_integrity": ("serve", "project"),
    "review.disposition_needs_procedural": ("serve", "project"),
    "reports": ("report", "schedule", "project"),
    "reports.check_seconds": ("project",),
    "reports.chromium": ("report", "sign-report"),
    "reports.max_listed": ("report", "schedule", "project", "serve", "demo"),
    # control charts: the console's dealer and table pages, the period report, a frozen baseline
    "control": (*REPORTERS, "baseline", "chart"),
    "console.url": (*REPORTERS, "serve"),
    "console": ("serve", "project"),
    "security": ("serve", "project"),
    "directory": ("serve", "project"),
    **{  # sign-report applies the console's sign-in lock and throttle to its signer
        f"security.login_{name}": ("serve", "project", "sign-report")
        for name in ("slow_after", "delay_seconds", "max_delay_seconds", "lock_after", "lock_minutes")
    },
    "security.trusted_proxies": ("serve", "project"),
    # sign-report checks a signer's one-time code, which the key opens
    "security.totp_key": ("serve", "project", "sign-report"),
    "security.totp_key_file": ("serve", "project", "sign-report"),
    "notify": ("serve", "project"),
    "notify.console_url": (*REPORTERS, "serve"),
    "duckdb_memory_limit": WRITERS,
    "snapshot_every": ("audit", "demo", "reaudit", "worker"),
    "max_record_bytes": ("audit", "demo", "publish", "worker"),
    "max_seq_jump": ("audit", "demo", "publish", "worker", "project", "reaudit", "replay", "serve", "evidence"),
    "max_clock_skew": ("audit", "demo", "publish", "worker", "project", "reaudit", "replay", "serve", "evidence"),
    "video": ("serve", "project"),
    "replica": ("audit", "project"),
    "archive": ("replay", "verify", "digest", "reaudit", "report", "schedule", "project", "serve", "export"),
    "signing": ("evidence", "keys", "serve", "project", "schedule", "sign-report", "export"),
    "export": ("export", "project"),
    "group": ("group",),
    # the casino's own certificate signs only the report's PDF
    "signing.pdf_cert_file": ("serve", "project", "sign-report"),
    "signing.pdf_key_file": ("serve", "project", "sign-report"),
    # the store's writers forward its access log as they run; access-log forward while none does
    "access_forward": ("serve", "project", "access-log"),
    "remedy_window": ("audit", "demo", "simulate", "worker", "reaudit", "replay", "serve", "project", "evidence"),
}
"""Which ``dealtrail`` commands read each setting: a dotted field path, or a section that
stands for all its fields unless a field has an entry of its own. A test checks that every
setting has readers and that docker-compose.yml passes each setting to the services whose
command reads it."""


def env_names(field_path: str) -> tuple[str, ...]:
    """The environment variables of a dotted settings path, the documented one first.

    Args:
        field_path: ``kafka.bootstrap``, ``property_name``, ...

    Returns:
        One or two names: ``DEALTRAIL_KAFKA__BOOTSTRAP``; an alias such as ``DEALTRAIL_PROPERTY``.
    """
    if field_path == "kafka.bootstrap":  # the short form wins when both are set (dealtrail.settings)
        return ("DEALTRAIL_KAFKA_BOOTSTRAP", "DEALTRAIL_KAFKA__BOOTSTRAP")
    parts = field_path.split(".")
    top = Settings.model_fields[parts[0]]
    if len(parts) == 1:
        aliases = _aliases(top)
        if aliases:
            return aliases
    return ("DEALTRAIL_" + "__".join(p.upper() for p in parts),)


def _aliases(info: FieldInfo) -> tuple[str, ...]:
    alias = info.validation_alias
    choices = getattr(alias, "choices", None)
    if not choices:
        return ()
    return tuple(c for c in choices if isinstance(c, str) and c.startswith("DEALTRAIL_"))


def _section(annotation: Any) -> type[BaseModel] | None:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    return None


def settings_fields() -> Iterator[tuple[str, FieldInfo, type[BaseModel]]]:
    """Every leaf setting as ``(dotted path, field, the model that declares it)``, in model order.

    ``kafka_bootstrap`` is left out: it is the short form of ``kafka.bootstrap`` (see :func:`env_names`).
    """
    for name, info in Settings.model_fields.items():
        if name == "kafka_bootstrap":
            continue
        section = _section(info.annotation)
        if section is None:
            yield name, info, Settings
            continue
        for sub, sub_info in section.model_fields.items():
            yield f"{name}.{sub}", sub_info, section


def readers(field_path: str) -> tuple[str, ...]:
    """The commands that read a setting (:data:`READERS`, the field's own entry first).

    Raises:
        KeyError: the setting has no entry (a new setting must say who reads it).
    """
    found = READERS[field_path] if field_path in READERS else READERS[field_path.split(".", maxsplit=1)[0]]
    return tuple(dict.fromkeys(found))  # each command once ("serve" is a reporter and a console)


def _attributes(model: type) -> dict[str, str]:
    """The ``Attributes:`` section of a class docstring as ``{name: text}`` (``a / b: text`` gives both)."""
    doc = inspect.getdoc(model) or ""
    out: dict[str, str] = {}
    m = re.search(r"^(?:Attributes|Fields):\n(.*?)(?:\n\S|\Z)", doc, flags=re.S | re.M)
    if not m:
        return out
    current: list[str] = []
    for line in m.group(1).splitlines():
        head = re.match(r"^    ([a-z_][a-z0-9_ /]*):\s*(.*)$", line)
        if head:
            current = [n.strip() for n in head.group(1).split("/")]
            for n in current:
                out[n] = head.group(2).strip()
        elif line.strip() and current:
            for n in current:
                out[n] = f"{out[n]} {line.strip()}"
    return out


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is None:
        name = getattr(annotation, "__name__", str(annotation))
        names = {
            "NoneType": "none",
            "SecretStr": "secret",
            "Path": "path",
            "time": "time (HH:MM)",
            "timedelta": "duration (seconds, or ISO 8601 such as PT1H)",
        }
        return names.get(name, name)
    args = [a for a in get_args(annotation) if a is not type(None)]
    inner = " or ".join(_type_name(a) for a in args)
    if origin is list:
        return f"JSON list of {inner}"
    if origin is dict:
        return f"JSON object of {' to '.join(_type_name(a) for a in args)}"
    if len(args) < len(get_args(annotation)):
        return f"{inner} (optional)"
    return inner


def _default(info: FieldInfo, path: str) -> str:
    if path == "worker.datadir":
        return "`$XDG_STATE_HOME/dealtrail/faust`, else `~/.local/state/dealtrail/faust`"
    value = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]
    if value is None:
        return "unset"
    if isinstance(value, timedelta):
        return f"`{value.total_seconds():g}` s"
    if value == []:
        return "`[]`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|").replace("\n", " ")


def settings_markdown() -> str:
    """``docs/settings.md``: every ``DEALTRAIL_*`` variable with its type, default, meaning and readers."""
    lines = [
        "# Settings reference",
        "",
        "Generated from `dealtrail/settings.py` by `make docs`; do not edit by hand (a test compares it).",
        "Every setting is an environment variable, read once by the command that starts and passed down.",
        "Sections use `__` between section and name (`DEALTRAIL_KAFKA__SECURITY_PROTOCOL`). The **read by**",
        "column names the `dealtrail` commands that use the setting; docker-compose.yml passes each",
        "setting to the services that run those commands.",
        "",
        "| variable | type | default | meaning | read by |",
        "|---|---|---|---|---|",
    ]
    docs: dict[type, dict[str, str]] = {}
    for path, info, model in settings_fields():
        meaning = docs.setdefault(model, _attributes(model)).get(path.split(".")[-1], "")
        names = " or ".join(f"`{n}`" for n in env_names(path))
        lines.append(
            f"| {names} | {_type_name(info.annotation)} | {_cell(_default(info, path))} | {_cell(meaning)} "
            f"| {', '.join(readers(path))} |"
        )
    lines += [
        "",
        "## The local broker's variables (`ops/kafka/broker`, `make kafka-up`)",
        "",
        "Not settings of dealtrail: the development broker's script reads them (from its own header, where",
        "they are documented). Give a broker of your own its own ports and state folder, and point the",
        "commands at it with `DEALTRAIL_KAFKA_BOOTSTRAP=127.0.0.1:PORT`.",
        "",
        "| variable | meaning (default) |",
        "|---|---|",
        *(f"| `{name}` | {_cell(text)} |" for name, text in broker_variables()),
    ]
    return "\n".join(lines) + "\n"


BROKER_VARIABLE = re.compile(r"^#\s{2,}(DEALTRAIL_[A-Z_]+)\s+(.*)$")


def broker_variables() -> list[tuple[str, str]]:
    """The ``DEALTRAIL_*`` variables ``ops/kafka/broker`` documents in its header, with their text
    (continuation lines joined): ``(name, meaning)``, in the script's order."""
    script = Path(__file__).resolve().parents[1] / "ops" / "kafka" / "broker"
    out: list[tuple[str, str]] = []
    for line in script.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            if out:
                break
            continue
        found = BROKER_VARIABLE.match(line)
        if found:
            out.append((found.group(1), " ".join(found.group(2).split())))
        elif out and line.startswith("#    ") and line.strip("# "):
            name, text = out[-1]
            out[-1] = (name, " ".join(f"{text} {line.strip('# ')}".split()))
        elif out and not line.strip("# "):
            break
    return out


def rules_markdown() -> str:
    """``docs/rules.md``: the rule catalogue (ID, citation, game, severity, trigger, remedy, revision),
    then each rule's rulebook decisions and what clears it."""
    lines = [
        "# Rules reference",
        "",
        "Generated from `streams/engine/catalog.py` by `make docs`; do not edit by hand (a test compares it).",
        f"dealtrail applies **revision {RULEBOOK_REVISION}** of the rulebook (`../shared/rulebook.md`); what each",
        "revision's decisions add and withdraw is in [rule-decisions.md](rule-decisions.md). *Revised* is the",
        "rulebook revision that last changed the rule's trigger or remedy. Provisional rules (rulebook",
        "section 7) are on by default and can be switched off per table (`TableConfig.provisional_rules`).",
        "",
        "| rule | citation | game | severity | trigger | required remedy | revised |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in RULES:
        game = r.game.value if r.game else "all"
        rid = f"`{r.rule_id}`" + (" (provisional)" if r.provisional else "")
        lines.append(
            f"| {rid} | {_cell(r.citation)} | {game} | {r.severity.value} | {_cell(r.summary)} "
            f"| {_cell(r.required_remedy or '')} | {r.revised_in} |"
        )
    lines += [
        "",
        "## Why a finding fired and what clears it",
        "",
        "Per rule: the decisions of the rulebook's section 10 that shape how it is read (revision 2 is 10.1",
        "and 10.2, revision 3 is 10.3, revision 4 is 10.4; 10.4.3, one answer whatever the arrival order within",
        "the reorder window and whatever other tables share the file, holds for every rule), and what clears",
        "a finding of it (its remedy events) or, for a rule with no remedy, what would have prevented it.",
        "",
        "| rule | rulebook decisions | what clears it |",
        "|---|---|---|",
    ]
    for r in RULES:
        lines.append(f"| `{r.rule_id}` | {', '.join(r.decisions) or '-'} | {_cell(r.cleared_by)} |")
    return "\n".join(lines) + "\n"


def _json_type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in prop:
        kinds = [_json_type(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(kinds) + (" or null" if len(kinds) < len(prop["anyOf"]) else "")
    if prop.get("type") == "array":
        return f"list of {_json_type(prop.get('items', {}))}"
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = str(prop.get("type", "any"))
    bounds = [
        f"{label} {prop[key]}"
        for key, label in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"), ("maxLength", "length ≤"))
        if key in prop
    ]
    if "maxItems" in prop:
        bounds.append(f"at most {prop['maxItems']} items")
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _bounds_of(field: str) -> str:
    """The plausibility bounds of ``field`` (``Event.field``, ``*.field`` for the envelope) as the
    events reference writes them beside its type: each bound's name and, if any, its setting."""
    named = [f"`{b.name}`" + (f" (`{b.setting}`)" if b.setting else "") for b in BOUNDS if field in b.fields]
    return f"; bound: {', '.join(named)}" if named else ""


def events_markdown() -> str:
    """``docs/events.md``: every event type with its own fields (beyond the envelope) and its version."""
    from schemas.base import Envelope

    envelope = set(Envelope.model_fields)
    lines = [
        "# Events reference",
        "",
        "Generated from `schemas/events.py` by `make docs`; do not edit by hand (a test compares it). The JSON",
        "Schema of each event is in `schemas/json/`; the rulebook's names for them are in",
        f"[event-mapping.md](event-mapping.md). Events made now carry `schema_version` {SCHEMA_VERSION}; a",
        "version 1 event is read as it is, and an event of a newer version than this is dead-lettered as",
        "`unsupported_schema_version`.",
        "",
        "## Plausibility bounds (rulebook 10.3.4, 10.5.5)",
        "",
        "A record beyond one of these is refused with the reason given, never judged; each is defined once,",
        "in `schemas/bounds.py`, which the schemas, their JSON Schema, the settings and this page read. The",
        "schema's bounds are fixed (whether a record is an event does not depend on the reader's",
        "settings); the two that depend on a table's state or a clock are settings.",
        "",
        "| bound | refused | fields | setting | rulebook | refused as |",
        "|---|---|---|---|---|---|",
        *(
            f"| `{b.name}` | {_cell(b.limit)} | {', '.join(f'`{f}`' for f in b.fields)} | "
            f"{f'`{b.setting}`' if b.setting else 'fixed'} | {_cell(b.rulebook)} | `{b.refused_as}` |"
            for b in BOUNDS
        ),
        "",
        "## The envelope (every event)",
        "",
        "| field | type | required | meaning |",
        "|---|---|---|---|",
    ]
    schema = EVENT_TYPES[0].model_json_schema()
    required = set(schema.get("required", []))
    meaning = _attributes(Envelope)
    for name in Envelope.model_fields:
        kind = _cell(_json_type(schema["properties"][name]) + _bounds_of(f"*.{name}"))
        lines.append(f"| `{name}` | {kind} | {'yes' if name in required else ''} | {_cell(meaning.get(name, ''))} |")
    for cls in EVENT_TYPES:
        schema = cls.model_json_schema()
        required = set(schema.get("required", []))
        doc = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        lines += ["", f"## {cls.__name__}", "", doc, ""]
        own = [n for n in cls.model_fields if n not in envelope and n != "type"]
        if not own:
            lines.append("No fields beyond the envelope.")
            continue
        lines += ["| field | type | required |", "|---|---|---|"]
        for name in own:
            prop = schema["properties"][name]
            kind = _cell(_json_type(prop) + _bounds_of(f"{cls.__name__}.{name}"))
            lines.append(f"| `{name}` | {kind} | {'yes' if name in required else ''} |")
    return "\n".join(lines) + "\n"


DOCUMENTS = {"settings.md": settings_markdown, "rules.md": rules_markdown, "events.md": events_markdown}
"""File name in ``docs/`` -> the function that writes it."""


def write(folder: Path) -> list[Path]:
    """Write the generated documents into ``folder``; returns the paths written."""
    written = []
    for name, make in DOCUMENTS.items():
        path = folder / name
        path.write_text(make(), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover - `make docs`
    for p in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")):
        print(f"wrote {p}")
