"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

The commands are checked against the real ``dealtrail`` command line (introspected from the
typer app) and the environment against the real settings (introspected from
:class:`dealtrail.settings.Settings`), so a renamed subcommand, option or setting breaks a test
here instead of a user's ``docker compose up``. Every check returns a list of problems; the
``*_catches_*`` tests feed it mutated copies of the file to show that it can fail.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from pydantic import AliasChoices, BaseModel

from dealtrail import docgen
from dealtrail.cli import app
from dealtrail.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
KAFKA_SERVICE = "kafka"
# Settings whose compose default deliberately differs from the Settings default.
CONTAINER_DEFAULTS = {
    "DEALTRAIL_KAFKA_BOOTSTRAP",
    "DEALTRAIL_WORKER__ALIVE_FILE",
    "DEALTRAIL_REPLICA__EVERY",
    "DEALTRAIL_SIGNING__KEY_FILE",  # the signing_key secret's mount point (check_secrets)
}
SECRETS_DIR = "/run/secrets"
PREFIX = str(Settings.model_config.get("env_prefix", "")).upper()
DELIMITER = str(Settings.model_config.get("env_nested_delimiter", "__"))


# ---------------------------------------------------------------- reading the files


def load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def image_entrypoint() -> list[str]:
    """The exec-form ENTRYPOINT of the Dockerfile."""
    found = re.findall(r"^ENTRYPOINT\s+(\[.*\])\s*$", DOCKERFILE.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(found) == 1, "the Dockerfile needs exactly one exec-form ENTRYPOINT"
    entry = json.loads(found[0])
    assert isinstance(entry, list)
    return [str(x) for x in entry]


_VAR = re.compile(r"\$(?:(\$)|\{([A-Za-z_]\w*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_]\w*))")


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose interpolation: ``$$``, ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}`` ..."""

    def one(m: re.Match[str]) -> str:
        if m.group(1):
            return "$"
        name = m.group(2) or m.group(5)
        op, arg = m.group(3), m.group(4) or ""
        value = env.get(name)
        if op == ":-":
            return value if value else arg
        if op == "-":
            return value if value is not None else arg
        if op in (":?", "?") and (value is None or (op == ":?" and not value)):
            raise ValueError(f"${{{name}}} is required: {arg}")
        if op == ":+":
            return arg if value else ""
        if op == "+":
            return arg if value is not None else ""
        if value is None:
            raise ValueError(f"${{{name}}} has no default (compose would substitute an empty string)")
        return value

    return _VAR.sub(one, text)


def declared_environment(service: Mapping[str, Any]) -> dict[str, str | None]:
    """The service's ``environment`` as written: None for a key without a value (pass-through)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        out: dict[str, str | None] = {}
        for item in env:
            key, eq, value = str(item).partition("=")
            out[key] = value if eq else None
        return out
    return {str(k): (None if v is None else str(v).lower() if isinstance(v, bool) else str(v)) for k, v in env.items()}


def resolved_environment(service: Mapping[str, Any], user: Mapping[str, str]) -> dict[str, str]:
    """What the container sees, given the user's shell/.env variables ``user``."""
    out = {}
    for key, value in declared_environment(service).items():
        if value is None:
            if key in user:  # pass-through; unset in the container otherwise
                out[key] = user[key]
        else:
            out[key] = interpolate(value, user)
    return out


def dealtrail_services(compose: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    image = compose["x-dealtrail"]["image"]
    return {name: svc for name, svc in compose["services"].items() if svc.get("image") == image}


def _argv(value: Any) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(x) for x in value]


def invocations(service: Mapping[str, Any]) -> list[list[str]]:
    """The argument lists given to ``dealtrail`` by a service (several for an ``sh -c`` script)."""
    argv = (_argv(service["entrypoint"]) if "entrypoint" in service else image_entrypoint()) + _argv(
        service.get("command")
    )
    if argv[:1] == ["dealtrail"]:
        return [argv[1:]]
    if len(argv) == 3 and argv[0] in ("sh", "/bin/sh", "bash", "/bin/bash") and argv[1] == "-c":
        lexer = shlex.shlex(argv[2], posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        runs: list[list[str]] = [[]]
        for token in lexer:
            if token in ("&&", "||", ";", "|", "&"):
                runs.append([])
            else:
                runs[-1].append(token)
        return [run[1:] for run in runs if run[:1] == ["dealtrail"]]
    raise AssertionError(f"cannot tell what {argv!r} runs (expected dealtrail ... or sh -c '...')")


# ---------------------------------------------------------------- what dealtrail accepts


def cli() -> Any:
    """The click group of the ``dealtrail`` app (typer's own click core in recent typer releases)."""
    group = typer.main.get_command(app)
    assert hasattr(group, "commands")
    return group


def resolve_command(args: list[str]) -> tuple[Any, list[str], str]:
    """The command ``args`` name, the remaining arguments and the command path."""
    cmd, path, rest = cli(), "dealtrail", list(args)
    while hasattr(cmd, "commands"):
        if not rest or rest[0] not in cmd.commands:
            raise LookupError(f"{path} has no subcommand {rest[0] if rest else '(none given)'!r}")
        name = rest.pop(0)
        cmd, path = cmd.commands[name], f"{path} {name}"
    return cmd, rest, path


def _must_exist(param: Any) -> bool:
    """A path parameter checked for existence (a file that only exists inside the container)."""
    info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
    return bool(getattr(info if info is not None else getattr(param, "type", None), "exists", False))


def _existing_stand_ins(cmd: Any, rest: list[str]) -> list[str]:
    """``rest`` with the values of existence-checked path parameters replaced by a file that exists."""
    options = {o: p for p in cmd.params if p.param_type_name == "option" for o in (*p.opts, *p.secondary_opts)}
    arguments = iter(p for p in cmd.params if p.param_type_name == "argument")
    out, i = list(rest), 0
    while i < len(out):
        name, eq, _ = out[i].partition("=")
        param = options.get(name) if out[i].startswith("-") else next(arguments, None)
        if param is not None and out[i].startswith("-") and not param.is_flag and not eq:
            i += 1  # the value is the next token
        if param is not None and _must_exist(param) and i < len(out):
            out[i] = f"{name}={COMPOSE}" if eq else str(COMPOSE)
        i += 1
    return out


def check_invocation(args: list[str]) -> list[str]:
    """Problems with ``dealtrail *args``, found by the command's own parser (names, values, types)."""
    try:
        cmd, rest, path = resolve_command(args)
    except LookupError as exc:
        return [str(exc)]
    try:
        cmd.make_context(path, _existing_stand_ins(cmd, rest))
    except Exception as exc:  # the parser's UsageError family
        return [f"{path}: {exc.format_message() if hasattr(exc, 'format_message') else exc}"]
    return []


def settings_env_names() -> dict[str, tuple[str, ...]]:
    """Every environment variable the Settings read, with the attribute path it sets."""
    names: dict[str, tuple[str, ...]] = {}
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update({c.upper(): (field_name,) for c in alias.choices if isinstance(c, str)})
            continue
        if isinstance(alias, str):
            names[alias.upper()] = (field_name,)
            continue
        env = f"{PREFIX}{field_name.upper()}"
        names[env] = (field_name,)
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            for sub in field.annotation.model_fields:
                names[f"{env}{DELIMITER}{sub.upper()}"] = (field_name, sub)
    return names


def setting(settings: Settings, path: tuple[str, ...]) -> Any:
    value: Any = settings
    for part in path:
        value = getattr(value, part)
    return value


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No DEALTRAIL_* variable of the developer's shell leaks into Settings()."""
    import os

    for key in list(os.environ):
        if key.upper().startswith(PREFIX):
            monkeypatch.delenv(key)
    return monkeypatch


# ---------------------------------------------------------------- the checks


def check_commands(compose: Mapping[str, Any]) -> list[str]:
    problems = []
    for name, svc in dealtrail_services(compose).items():
        runs = invocations(svc)
        if not runs:
            problems.append(f"{name}: runs no dealtrail command")
        problems += [f"{name}: {p}" for run in runs for p in check_invocation(run)]
    return problems


def check_environment_names(compose: Mapping[str, Any]) -> list[str]:
    known, problems = settings_env_names(), []
    for name, svc in compose["services"].items():
        for key, value in declared_environment(svc).items():
            if not key.upper().startswith(PREFIX):
                continue
            if key.upper() not in known:
                problems.append(f"{name}: {key} is not read by the Settings (it would be silently ignored)")
            if value is not None and not re.search(r"\$\{" + re.escape(key) + r"(\}|:?-)", value):
                problems.append(f"{name}: {key}={value!r} cannot be set by the user (use ${{{key}:-...}})")
    return problems


def image_settings() -> set[str]:
    """The DEALTRAIL_* variables the image sets itself (its ``ENV``)."""
    return set(re.findall(r"\b(DEALTRAIL_[A-Z0-9_]+)=", (ROOT / "Dockerfile").read_text()))


def check_settings_reach_readers(compose: Mapping[str, Any]) -> list[str]:
    """Every setting a service's commands read (``dealtrail.docgen.READERS``) reaches its container."""
    problems, fixed = [], image_settings()
    for name, svc in dealtrail_services(compose).items():
        commands = {run[0] for run in invocations(svc) if run}
        passed = {k.upper() for k in declared_environment(svc)} | fixed
        for path, _info, _model in docgen.settings_fields():
            if commands & set(docgen.readers(path)) and not set(docgen.env_names(path)) & passed:
                wanted = " or ".join(docgen.env_names(path))
                problems.append(f"{name}: runs {', '.join(sorted(commands))}, which reads {wanted}, not passed")
    return problems


def check_defaults(compose: Mapping[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each DEALTRAIL_ default, alone in the environment, must load and mean what the Settings mean."""
    known, problems = settings_env_names(), []
    baseline = Settings()
    for name, svc in dealtrail_services(compose).items():
        for key, value in resolved_environment(svc, {}).items():
            if key.upper() not in known:
                continue  # reported by check_environment_names
            with monkeypatch.context() as m:
                m.setenv(key, value)
                try:
                    loaded = setting(Settings(), known[key.upper()])
                except Exception as exc:
                    problems.append(f"{name}: {key}={value!r} rejected by Settings: {exc}")
                    continue
            if key.upper() not in CONTAINER_DEFAULTS and loaded != setting(baseline, known[key.upper()]):
                problems.append(f"{name}: {key}={value!r} loads as {loaded!r}, not the Settings default")
    return problems


def check_secrets(compose: Mapping[str, Any]) -> list[str]:
    """Every service whose commands read the signing key file mounts the secret that file is, at
    the path its environment names; every secret a service mounts is declared with a file."""
    problems = []
    declared = compose.get("secrets") or {}
    for name, spec in declared.items():
        if not isinstance(spec, dict) or not spec.get("file"):
            problems.append(f"secret {name}: no file")
    signers = set(docgen.readers("signing.key_file"))
    for name, svc in dealtrail_services(compose).items():
        mounted = {s if isinstance(s, str) else s["source"]: s for s in svc.get("secrets") or []}
        for secret in mounted:
            if secret not in declared:
                problems.append(f"{name}: mounts secret {secret}, which is not declared")
        if not {run[0] for run in invocations(svc) if run} & signers:
            continue
        path = resolved_environment(svc, {}).get("DEALTRAIL_SIGNING__KEY_FILE", "")
        secret = path.removeprefix(SECRETS_DIR + "/")
        if not path.startswith(SECRETS_DIR + "/") or secret not in mounted:
            problems.append(f"{name}: signs, but DEALTRAIL_SIGNING__KEY_FILE={path!r} is no secret it mounts")
    return problems


def duckdb_path(run: list[str], option: str = "db") -> str | None:
    """The value of the command's ``--db`` (or another path ``option``) in ``run``; None if not given."""
    cmd, rest, _ = resolve_command(run)
    db = next((p for p in cmd.params if p.name == option), None)
    if db is None:
        return None
    for i, token in enumerate(rest):
        name, eq, value = token.partition("=")
        if name in db.opts:
            return value if eq else rest[i + 1]
    return None


def check_single_writer(compose: Mapping[str, Any]) -> list[str]:
    """One projector service, one replica, writing the store and its read replica, which the
    report reads while the projector runs; nothing else writes the store."""
    writers, readers, problems = [], [], []
    for name, svc in dealtrail_services(compose).items():
        for run in invocations(svc):
            command = resolve_command(run)[2]
            if command == "dealtrail project":
                writers.append((name, svc, duckdb_path(run), duckdb_path(run, "replica")))
            elif command == "dealtrail report":
                readers.append((name, svc, duckdb_path(run)))
            elif duckdb_path(run) is not None or command in ("dealtrail audit", "dealtrail demo"):
                problems.append(f"{name}: {command} writes a DuckDB file; only the projector may")
    if len(writers) != 1:
        return [*problems, f"exactly one service must run `dealtrail project`, found {[w[0] for w in writers]}"]
    name, svc, db, replica = writers[0]
    replicas = (svc.get("deploy") or {}).get("replicas", 1)
    if replicas != 1 or svc.get("scale", 1) != 1:
        problems.append(f"{name}: the DuckDB writer must run as a single replica")
    if not db:
        problems.append(f"{name}: project needs an explicit --db")
    if not replica:
        problems.append(f"{name}: project needs an explicit --replica (the report reads it while the projector runs)")
    if not readers:
        problems.append("no service runs `dealtrail report`")
    for reader, rsvc, rdb in readers:
        if rdb != replica:
            problems.append(f"{reader}: reads {rdb!r}, not the projector's replica {replica!r}")
        if "profiles" not in rsvc:
            problems.append(f"{reader}: the report must run on demand (profiles), not with `up`")
        if set(map(str, rsvc.get("volumes", []))) != set(map(str, svc.get("volumes", []))):
            problems.append(f"{reader}: must mount the projector's volumes")
    return problems


def check_kafka(compose: Mapping[str, Any]) -> list[str]:
    svc, problems = compose["services"][KAFKA_SERVICE], []
    if not re.fullmatch(r"apache/kafka:4\.\d+(\.\d+)?", str(svc.get("image"))):
        problems.append(f"kafka image must be the official apache/kafka with a 4.x tag, not {svc.get('image')!r}")
    env = resolved_environment(svc, {})
    if set(env.get("KAFKA_PROCESS_ROLES", "").split(",")) != {"broker", "controller"}:
        problems.append("KAFKA_PROCESS_ROLES must be broker,controller (KRaft, one node)")
    for key in ("KAFKA_NODE_ID", "KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS", "KAFKA_CONTROLLER_QUORUM_VOTERS"):
        if key not in env:
            problems.append(f"kafka: {key} missing")
    problems += [
        f"kafka: {k}={v} (single node: must be 1)"
        for k, v in env.items()
        if (k.endswith("REPLICATION_FACTOR") or k.endswith("MIN_ISR")) and v != "1"
    ]
    test = " ".join(_argv(svc.get("healthcheck", {}).get("test")))
    if not re.search(r"/opt/kafka/bin/(kafka-broker-api-versions\.sh|kafka-topics\.sh --list)", test):
        problems.append("kafka: healthcheck must call kafka-broker-api-versions.sh or kafka-topics.sh --list")
    advertised = {a.split("://", 1)[-1] for a in env.get("KAFKA_ADVERTISED_LISTENERS", "").split(",")}
    for name, dsvc in dealtrail_services(compose).items():
        bootstrap = resolved_environment(dsvc, {}).get("DEALTRAIL_KAFKA_BOOTSTRAP", "")
        if not set(bootstrap.split(",")) <= advertised:
            problems.append(f"{name}: bootstrap {bootstrap!r} is not an advertised listener {sorted(advertised)}")
    return problems


def check_topology(compose: Mapping[str, Any]) -> list[str]:
    problems, services = [], compose["services"]
    by_command = {
        resolve_command(run)[2]: name for name, svc in dealtrail_services(compose).items() for run in invocations(svc)
    }
    if set(services) - set(dealtrail_services(compose)) != {KAFKA_SERVICE}:
        problems.append("every service but kafka must use the dealtrail image of x-dealtrail")
    topics, worker = by_command.get("dealtrail topics create"), by_command.get("dealtrail worker")
    if (
        not topics
        or services[topics].get("depends_on", {}).get(KAFKA_SERVICE, {}).get("condition") != "service_healthy"
    ):
        problems.append("topics create must wait for a healthy kafka")
    if not worker or (services[worker].get("deploy") or {}).get("replicas") != 2:
        problems.append("the worker must run with deploy.replicas: 2")
    for command in ("dealtrail worker", "dealtrail project", "dealtrail publish"):
        name = by_command.get(command)
        if (
            name
            and (services[name].get("depends_on") or {}).get(topics, {}).get("condition")
            != "service_completed_successfully"
        ):
            problems.append(f"{name}: must wait for `topics create` to complete successfully")
    return problems


GRACE = 10.0  # seconds compose waits after the stop signal before SIGKILL, when a service sets none


def _seconds(value: Any) -> float:
    """A compose duration (``30s``, ``1m30s``, ``500ms``) in seconds."""
    total = 0.0
    for amount, unit in re.findall(r"([0-9.]+)(ms|us|ns|h|m|s)", str(value)):
        total += float(amount) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit]
    return total


def check_health(compose: Mapping[str, Any]) -> list[str]:
    """The projector's healthcheck asks its console's ``/readyz``; each worker's reads the alive file
    the worker touches; the publisher waits for live workers; every stop fits compose's grace."""
    problems, services = [], dealtrail_services(compose)
    by_command = {resolve_command(run)[2]: name for name, svc in services.items() for run in invocations(svc)}
    projector, worker = by_command.get("dealtrail project"), by_command.get("dealtrail worker")
    if projector:
        (run,) = invocations(services[projector])
        port = run[run.index("--serve") + 1].rpartition(":")[2] if "--serve" in run else None
        test = " ".join(_argv((services[projector].get("healthcheck") or {}).get("test")))
        if port is None or f"127.0.0.1:{port}/readyz" not in test:
            problems.append(f"{projector}: healthcheck must ask the console's /readyz on 127.0.0.1:{port}")
    if worker:
        test = " ".join(_argv((services[worker].get("healthcheck") or {}).get("test")))
        alive = resolved_environment(services[worker], {}).get("DEALTRAIL_WORKER__ALIVE_FILE")
        if not alive:
            problems.append(f"{worker}: DEALTRAIL_WORKER__ALIVE_FILE must be set for its liveness check")
        if "DEALTRAIL_WORKER__ALIVE_FILE" not in test:
            problems.append(f"{worker}: healthcheck must check the age of DEALTRAIL_WORKER__ALIVE_FILE")
    for name, svc in services.items():
        if "healthcheck" in svc and not str(_argv(svc["healthcheck"].get("test"))[:1]).startswith("['CMD"):
            problems.append(f"{name}: healthcheck test must be CMD or CMD-SHELL form")
        grace = _seconds(svc.get("stop_grace_period", "10s"))
        if grace > GRACE:
            problems.append(f"{name}: stop_grace_period {grace:g} s; dealtrail stops within compose's {GRACE:g} s")
    publisher = by_command.get("dealtrail publish")
    if publisher and worker:
        condition = (services[publisher].get("depends_on") or {}).get(worker, {}).get("condition")
        if condition != "service_healthy":
            problems.append(f"{publisher}: must wait for the workers to be healthy (alive)")
    return problems


# ---------------------------------------------------------------- tests


def test_the_compose_file_passes_every_check(clean_env: pytest.MonkeyPatch) -> None:
    compose = load_compose()
    problems = (
        check_commands(compose)
        + check_environment_names(compose)
        + check_settings_reach_readers(compose)
        + check_defaults(compose, clean_env)
        + check_single_writer(compose)
        + check_kafka(compose)
        + check_topology(compose)
        + check_health(compose)
        + check_secrets(compose)
    )
    assert problems == []


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (["services", "projector", "secrets"], [], "projector: signs"),
        (["services", "keys", "secrets"], ["other"], "keys: mounts secret other"),
        (["secrets", "signing_key"], {"external": True}, "secret signing_key: no file"),
    ],
)
def test_the_secrets_check_catches_a_signer_without_its_key(path: list[str], value: Any, needle: str) -> None:
    assert any(needle in p for p in check_secrets(_mutated(path, value))), check_secrets(_mutated(path, value))


def test_the_image_prints_pdfs_with_debian_chromium() -> None:
    """The console's Sign button prints the signed PDF in the projector's container: the image
    installs Debian's chromium and points DEALTRAIL_REPORTS__CHROMIUM at the program it installs."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    installs = re.search(r"apt-get install -y --no-install-recommends ([^\\&]+)", text)
    assert installs is not None and "chromium" in installs.group(1).split(), "the image installs chromium"
    assert "DEALTRAIL_REPORTS__CHROMIUM=/usr/bin/chromium" in text
    dpkg = Path("/var/lib/dpkg/info/chromium.list")  # where Debian's package puts it (CI installs it)
    if dpkg.is_file():
        assert "/usr/bin/chromium" in dpkg.read_text().split()


def test_the_introspection_sees_the_real_cli_and_settings() -> None:
    assert {"worker", "project", "publish", "report", "topics"} <= set(cli().commands)
    names = settings_env_names()
    assert names["DEALTRAIL_KAFKA_BOOTSTRAP"] == ("kafka_bootstrap",)
    assert names["DEALTRAIL_KAFKA__SECURITY_PROTOCOL"] == ("kafka", "security_protocol")
    assert names["DEALTRAIL_WORKER__BATCH"] == ("worker", "batch")


def test_every_dealtrail_service_is_checked() -> None:
    compose = load_compose()
    runs = {name: invocations(svc) for name, svc in dealtrail_services(compose).items()}
    assert {"topics", "worker", "projector", "report"} <= set(runs)
    assert all(runs.values())
    assert len(runs["publisher"]) == 2  # both halves of the sh -c script


def test_the_settings_check_catches_a_setting_a_service_reads_but_does_not_get() -> None:
    compose = load_compose()
    env = dict(compose["x-dealtrail"]["environment"])
    env.pop("DEALTRAIL_WORKER__STATE_INTERVAL")
    compose = _mutated(["services", "worker", "environment"], env)
    problems = check_settings_reach_readers(compose)
    assert problems == ["worker: runs worker, which reads DEALTRAIL_WORKER__STATE_INTERVAL, not passed"]


def _mutated(path: list[str], value: Any) -> dict[str, Any]:
    compose = copy.deepcopy(load_compose())
    node: Any = compose
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return compose


@pytest.mark.parametrize(
    ("service", "command", "needle"),
    [
        ("worker", ["wrker"], "no subcommand 'wrker'"),
        ("topics", ["topics", "delete"], "no subcommand 'delete'"),
        ("topics", ["topics"], "(none given)"),
        ("projector", ["project", "--database", "/data/x.duckdb"], "No such option: --database"),
        ("projector", ["project", "--timeout", "soon"], "Invalid value for '--timeout'"),
        ("report", ["report", "--db"], "'--db' requires an argument"),
        ("projector", ["project", "--once=yes"], "does not take a value"),
        ("worker", ["worker", "extra"], "unexpected extra argument"),
        ("publisher", ["dealtrail simulate --tables 8 && dealtrail publish /data/e.jsonl"], "Missing option '--out'"),
        (
            "publisher",
            ["dealtrail simulate --out e.jsonl --tables 0 && dealtrail publish"],
            "Missing argument 'events'",
        ),
        ("publisher", ["dealtrail simulate --out e.jsonl; dealtrail publsh e.jsonl"], "no subcommand 'publsh'"),
        ("publisher", ["dealtrail simulate --out e.jsonl --tables 0"], "Invalid value for '--tables'"),
    ],
)
def test_the_command_check_catches_a_bad_command(service: str, command: Any, needle: str) -> None:
    problems = check_commands(_mutated(["services", service, "command"], command))
    assert any(needle in p for p in problems), problems


def test_the_environment_check_catches_a_misspelt_setting(clean_env: pytest.MonkeyPatch) -> None:
    env = _mutated(["x-dealtrail", "environment"], {"DEALTRAIL_KAFKA_SECURITY_PROTOCOL": "${X:-SSL}"})
    for name in ("topics", "worker"):
        env["services"][name]["environment"] = env["x-dealtrail"]["environment"]
    problems = check_environment_names(env)
    assert any("DEALTRAIL_KAFKA_SECURITY_PROTOCOL is not read" in p for p in problems), problems
    assert any("cannot be set by the user" in p for p in problems), problems
    clean_env.setenv("DEALTRAIL_KAFKA_SECURITY_PROTOCOL", "SSL")
    assert Settings().kafka.security_protocol == "PLAINTEXT"  # why the check matters: extra="ignore"


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("DEALTRAIL_KAFKA__SSL_CAFILE", "${DEALTRAIL_KAFKA__SSL_CAFILE:-}", "not the Settings default"),
        ("DEALTRAIL_PARTITIONS", "${DEALTRAIL_PARTITIONS:-0}", "rejected by Settings"),
        ("DEALTRAIL_WORKER__BATCH", "${DEALTRAIL_WORKER__BATCH:-many}", "rejected by Settings"),
    ],
)
def test_the_default_check_catches_a_bad_default(
    clean_env: pytest.MonkeyPatch, key: str, value: str, needle: str
) -> None:
    compose = load_compose()
    for svc in dealtrail_services(compose).values():
        svc["environment"] = {**svc["environment"], key: value}
    problems = check_defaults(compose, clean_env)
    assert any(key in p and needle in p for p in problems), problems


def test_sasl_and_ssl_settings_reach_every_kafka_client(clean_env: pytest.MonkeyPatch) -> None:
    compose = load_compose()
    kafka_vars = [k for k, path in settings_env_names().items() if path[0].startswith("kafka") and len(path) > 1]
    kafka_vars = [k for k in kafka_vars if not k.endswith(f"{DELIMITER}BOOTSTRAP")] + ["DEALTRAIL_KAFKA_BOOTSTRAP"]
    # a number and a codec, not names
    numeric = {"DEALTRAIL_KAFKA__CONNECT_TIMEOUT": "7.5", "DEALTRAIL_KAFKA__COMPRESSION": "lz4"}
    user = {k: numeric.get(k, f"user-{k.lower()}") for k in kafka_vars}
    for name, svc in dealtrail_services(compose).items():
        seen = resolved_environment(svc, user)
        assert {k: seen.get(k) for k in kafka_vars} == user, name
        for key, value in seen.items():
            clean_env.setenv(key, value)
        settings = Settings()
        assert settings.kafka.bootstrap == user["DEALTRAIL_KAFKA_BOOTSTRAP"]
        assert settings.kafka.sasl_username == user["DEALTRAIL_KAFKA__SASL_USERNAME"]
        assert settings.kafka.sasl_password is not None
        assert str(settings.kafka.ssl_cafile) == user["DEALTRAIL_KAFKA__SSL_CAFILE"]
        assert settings.kafka.connect_timeout == 7.5


def test_unset_sasl_and_ssl_settings_stay_unset(clean_env: pytest.MonkeyPatch) -> None:
    for svc in dealtrail_services(load_compose()).values():
        for key, value in resolved_environment(svc, {}).items():
            clean_env.setenv(key, value)
        kafka = Settings().kafka
        assert (kafka.sasl_mechanism, kafka.sasl_password, kafka.ssl_cafile, kafka.ssl_keyfile) == (None,) * 4


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (["services", "worker", "command"], ["project", "--db", "/data/dealtrail.duckdb"], "exactly one service"),
        (["services", "projector", "deploy"], {"replicas": 2}, "single replica"),
        (["services", "report", "command"], ["report", "--db", "/data/other.duckdb"], "reads '/data/other.duckdb'"),
        (
            ["services", "report", "command"],
            ["report", "--db", "/data/dealtrail.duckdb"],
            "not the projector's replica '/data/dealtrail.replica.duckdb'",
        ),
        (
            ["services", "projector", "command"],
            ["project", "--db", "/data/dealtrail.duckdb"],
            "project needs an explicit --replica",
        ),
        (["services", "report", "volumes"], ["elsewhere:/data"], "projector's volumes"),
        (
            ["services", "publisher", "command"],
            ["dealtrail audit /data/e.jsonl --db /data/x.duckdb"],
            "only the projector",
        ),
    ],
)
def test_the_writer_check_catches_a_second_writer(path: list[str], value: Any, needle: str) -> None:
    problems = check_single_writer(_mutated(path, value))
    assert any(needle in p for p in problems), problems


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (["services", "kafka", "image"], "apache/kafka:3.9.0", "4.x tag"),
        (["services", "kafka", "image"], "bitnami/kafka:4.0", "4.x tag"),
        (["services", "kafka", "environment", "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"], 3, "must be 1"),
        (["services", "kafka", "healthcheck"], {"test": ["CMD", "true"]}, "healthcheck"),
        (
            ["x-dealtrail", "environment", "DEALTRAIL_KAFKA_BOOTSTRAP"],
            "${DEALTRAIL_KAFKA_BOOTSTRAP:-kafka:19092}",
            "not an advertised",
        ),
    ],
)
def test_the_kafka_check_catches_a_bad_broker(path: list[str], value: Any, needle: str) -> None:
    compose = _mutated(path, value)
    for svc in dealtrail_services(compose).values():
        svc["environment"] = compose["x-dealtrail"]["environment"]
    problems = check_kafka(compose)
    assert any(needle in p for p in problems), problems


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (["services", "projector", "healthcheck"], {"test": ["CMD", "true"]}, "/readyz"),
        (["services", "projector", "healthcheck", "test", 3], "urlopen('http://127.0.0.1:9000/readyz')", "/readyz"),
        (["services", "worker", "healthcheck"], {"test": ["CMD", "true"]}, "DEALTRAIL_WORKER__ALIVE_FILE"),
        (["x-dealtrail", "environment", "DEALTRAIL_WORKER__ALIVE_FILE"], "", "must be set"),
        (["services", "projector", "stop_grace_period"], "30s", "stop_grace_period 30 s"),
        (["services", "publisher", "depends_on", "worker"], {"condition": "service_started"}, "healthy"),
    ],
)
def test_the_health_check_catches_a_missing_or_wrong_healthcheck(path: list[Any], value: Any, needle: str) -> None:
    compose = _mutated(path, value)
    if path[0] == "x-dealtrail":  # the anchor is merged into each service when the file is read
        for svc in dealtrail_services(compose).values():
            svc["environment"] = compose["x-dealtrail"]["environment"]
    problems = check_health(compose)
    assert any(needle in p for p in problems), problems


def test_the_healthcheck_commands_answer_as_compose_reads_them(tmp_path: Path) -> None:
    """The worker's check passes on a fresh alive file and fails on a stale or missing one."""
    import os
    import subprocess
    import sys
    import time

    services = dealtrail_services(load_compose())
    argv = _argv(services["worker"]["healthcheck"]["test"])
    assert argv[:2] == ["CMD", "python"]
    alive = tmp_path / "w.alive"

    def check() -> int:
        env = {**os.environ, "DEALTRAIL_WORKER__ALIVE_FILE": str(alive)}
        return subprocess.run([sys.executable, *argv[2:]], env=env, timeout=60, check=False).returncode

    assert check() != 0, "no file: not alive"
    alive.touch()
    assert check() == 0
    old = time.time() - 60
    os.utime(alive, (old, old))
    assert check() != 0, "a file a minute old: stuck"


def test_the_topology_check_catches_one_worker() -> None:
    assert any("replicas: 2" in p for p in check_topology(_mutated(["services", "worker", "deploy"], {})))


def _dockerfile_lines() -> Iterator[str]:
    yield from re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8")).splitlines()


def test_the_dockerfile_installs_every_package_and_runs_unprivileged() -> None:
    lines = [line.strip() for line in _dockerfile_lines() if line.strip() and not line.lstrip().startswith("#")]
    assert re.fullmatch(r"FROM python:3\.11\.\d+-slim-bookworm", lines[0]), "the base image pinned to a patch release"
    assert image_entrypoint() == ["dealtrail"]
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert any(re.search(r"pip install --no-cache-dir --require-hashes -r requirements\.lock$", line) for line in lines)
    assert any(re.search(r"pip install --no-cache-dir --no-deps \.(\s|$)", line) for line in lines)
    copied = {Path(part).name for line in lines if line.startswith("COPY ") for part in line.split()[1:-1]}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages | {"pyproject.toml", project["project"]["readme"], "requirements.lock"} <= copied


def test_the_dockerfile_sets_only_real_settings_and_keeps_secrets_out() -> None:
    known = settings_env_names()
    env_lines = [line.split(None, 1)[1] for line in _dockerfile_lines() if line.startswith("ENV ")]
    names = {pair.split("=", 1)[0] for line in env_lines for pair in shlex.split(line)}
    dealtrail_names = {n for n in names if n.upper().startswith(PREFIX)}
    assert dealtrail_names, "the image should point DEALTRAIL_DB/DEALTRAIL_OUT at /data"
    assert {n.upper() for n in dealtrail_names} <= set(known)
    ignored = set((ROOT / ".dockerignore").read_text(encoding="utf-8").split())
    assert {".env", ".venv", ".git"} <= ignored


def test_the_projector_serves_the_console_on_this_host_only_and_users_run_on_demand() -> None:
    compose = load_compose()
    services = dealtrail_services(compose)
    (run,) = invocations(services["projector"])
    serve = run[run.index("--serve") + 1]
    host, _, port = serve.rpartition(":")
    assert host == "0.0.0.0"  # inside the container; published below on the host's loopback only
    published = [str(p) for p in services["projector"]["ports"]]
    assert published and all(p.startswith("127.0.0.1:") and p.endswith(f":{port}") for p in published)
    (users,) = invocations(services["users"])
    assert users[:2] == ["users", "add"] and "--role" in users and users[users.index("--role") + 1] == "admin"
    assert "profiles" in services["users"], "users are made on demand, not with `up`"
    assert services["users"]["volumes"] == services["projector"]["volumes"]


def test_compose_and_the_native_broker_run_the_same_kafka() -> None:
    native = re.search(
        r'KAFKA_VERSION="\$\{DEALTRAIL_KAFKA_VERSION:-([0-9.]+)\}"', (ROOT / "ops/kafka/broker").read_text()
    )
    assert native, "ops/kafka/broker names no default Kafka version"
    image = load_compose()["services"]["kafka"]["image"]
    assert image == f"apache/kafka:{native.group(1)}"
    assert f"<kafka.version>{native.group(1)}</kafka.version>" in (ROOT / "ops/kafka/pom.xml").read_text()
