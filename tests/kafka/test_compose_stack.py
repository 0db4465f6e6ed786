"""docker-compose.yml itself, started as compose would start it, without a Docker engine.

Each dealtrail service's own command (the image's ``dealtrail`` entrypoint, or the publisher's
``sh -c`` script) runs as a subprocess with that service's resolved environment (compose's
``${VAR:-default}`` rules, from tests/unit/test_compose.py) plus the Dockerfile's ``ENV``, with
the broker host ``kafka:9092`` mapped to the test broker, ``/data`` (the volume, and the
container user's home) to a temporary folder and the console's ``--serve 0.0.0.0:8000`` to a free
port of 127.0.0.1. Order as ``depends_on`` and the README give it: ``topics``, the first admin
(the ``users`` service's own command, password on stdin) and its API token, then the ``worker``
replicas and the ``projector`` (with its scheduled reports and the console), then the
``publisher``; the console must answer (login page, 401 without a token, the stack's findings
with one), and the ``report`` service's own command writes the report from the projector's read
replica while the projector runs on. The publisher runs its real script with one change: the simulated shift is a
quarter of an hour (``--hours 0.25``, about 7,500 events at the 8 tables) instead of 2 hours
(about 60,000 events, more than two workers on a shared 2-core machine audit in the few
minutes this test may take).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from tests.kafka.conftest import Cluster, findings_of, stop
from tests.unit.test_compose import (
    _argv,
    _dockerfile_lines,
    dealtrail_services,
    image_entrypoint,
    load_compose,
    resolved_environment,
)

pytestmark = pytest.mark.kafka

COMPOSE_BROKER = "kafka:9092"
VOLUME = "/data"
SECRETS = "/run/secrets"
BIN = Path(sys.executable).parent


def image_env() -> dict[str, str]:
    """The Dockerfile's ``ENV`` pairs."""
    out: dict[str, str] = {}
    for line in _dockerfile_lines():
        if line.startswith("ENV "):
            for pair in shlex.split(line.split(None, 1)[1]):
                key, _, value = pair.partition("=")
                out[key] = value
    return out


def _on_host(value: str, data: Path, bootstrap: str) -> str:
    secrets = data.parent / "run-secrets"  # where compose mounts the services' secrets
    return value.replace(COMPOSE_BROKER, bootstrap).replace(VOLUME, str(data)).replace(SECRETS, str(secrets))


def make_secrets(compose: dict[str, Any], data: Path) -> Path:
    """The signing key as the compose file's header says to make it (openssl, 0600), mounted
    where compose mounts each service's secrets; returns the key file."""
    (name,) = compose["secrets"]
    key = data.parent / "secrets" / "signing-key.pem"
    key.parent.mkdir(mode=0o700)
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True, capture_output=True)
    key.chmod(0o600)
    mounted = data.parent / "run-secrets"
    mounted.mkdir(mode=0o700)
    (mounted / name).symlink_to(key)  # a bind mount of the file: its owner and mode are the host file's
    return key


def service_env(service: dict[str, Any], user: dict[str, str], data: Path, bootstrap: str) -> dict[str, str]:
    """What the service's container would see, mapped onto this host."""
    env = {**image_env(), **resolved_environment(service, user)}
    env = {k: _on_host(v, data, bootstrap) for k, v in env.items()}
    return {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(data),  # the image's user has /data as its home
        "LANG": "C.UTF-8",
        **env,
    }


SHORT_SHIFT = "--hours 0.25"


def shortened(script: str) -> str:
    """The publisher's script with a shorter simulated shift (see the module docstring)."""
    short, n = re.subn(r"--hours\s+\S+", SHORT_SHIFT, script)
    assert n == 1, f"expected one --hours in the publisher's script: {script!r}"
    return short


def service_argv(service: dict[str, Any], data: Path, bootstrap: str) -> list[str]:
    """The service's entrypoint + command, mapped onto this host (``dealtrail`` from this venv)."""
    entry = _argv(service["entrypoint"]) if "entrypoint" in service else image_entrypoint()
    argv = [_on_host(a, data, bootstrap) for a in (*entry, *_argv(service.get("command")))]
    if argv[:2] == ["sh", "-c"]:
        argv[2] = shortened(argv[2])
    if argv[0] == "dealtrail":
        argv[0] = str(BIN / "dealtrail")
    return argv


@pytest.fixture
def stack(kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[Cluster, Path, dict[str, Any], dict[str, str]]]:
    namespace = f"c{uuid.uuid4().hex[:10]}"
    compose = load_compose()
    user = {"DEALTRAIL_NAMESPACE": namespace}  # as a user's shell or .env would give it
    partitions = int(resolved_environment(compose["x-dealtrail"], user)["DEALTRAIL_PARTITIONS"])
    cluster = Cluster(kafka_bootstrap, namespace, partitions)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    try:
        yield cluster, data, dealtrail_services(compose), user
    finally:
        cluster.delete_topics()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def console_argv(argv: list[str], port: int) -> list[str]:
    """The projector's arguments with its ``--serve`` address on this host's loopback."""
    i = argv.index("--serve")
    assert argv[i + 1] == "0.0.0.0:8000", argv
    return [*argv[: i + 1], f"127.0.0.1:{port}", *argv[i + 2 :]]


def _run(
    service: dict[str, Any], user: dict[str, str], data: Path, bootstrap: str, argv: list[str], stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env=service_env(service, user, data, bootstrap),
        cwd=data,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _start(
    service: dict[str, Any],
    user: dict[str, str],
    data: Path,
    bootstrap: str,
    log: Path,
    argv: list[str] | None = None,
) -> Any:
    with log.open("ab") as fh:
        return subprocess.Popen(
            argv or service_argv(service, data, bootstrap),
            env=service_env(service, user, data, bootstrap),
            cwd=data,  # the image's WORKDIR
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def healthcheck(
    service: dict[str, Any], user: dict[str, str], data: Path, bootstrap: str, port: int
) -> subprocess.CompletedProcess[str]:
    """Run the service's healthcheck ``test`` (CMD form) with its environment, the console's port
    8000 mapped to ``port`` and ``python`` to this interpreter."""
    argv = _argv(service["healthcheck"]["test"])
    assert argv[0] == "CMD", argv
    argv = [a.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in argv[1:]]
    if argv[0] == "python":
        argv[0] = sys.executable
    return _run(service, user, data, bootstrap, argv)


def _projected(cluster: Cluster) -> bool:
    """True when the projector's group has committed the end of every partition of its topics."""
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    t = cluster.settings().topics
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="dealtrail-test")
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    try:
        committed = admin.list_group_offsets(t.projector_group).get(t.projector_group, {})
        tps = [
            TopicPartition(name, p)
            for name in (t.events.name, t.findings.name, t.rounds.name, t.dead_letter.name)
            for p in sorted(consumer.partitions_for_topic(name) or ())
        ]
        ends = consumer.end_offsets(tps)
        return all(end == 0 or (tp in committed and committed[tp].offset >= end) for tp, end in ends.items())
    finally:
        consumer.close()
        admin.close()


def _copied_after(replica: Path, after: float) -> bool:
    """True if the replica exists and was copied after ``after`` (epoch seconds)."""
    from projections.store.replica import replica_info
    from projections.store.store import connect_read_only

    if not replica.exists():
        return False
    try:
        con = connect_read_only(replica)
    except (OSError, duckdb.Error):
        return False
    try:
        info = replica_info(con)
    finally:
        con.close()
    return info is not None and info.copied_at.timestamp() > after


def test_the_compose_services_own_commands_bring_findings_into_the_projected_store(
    stack: tuple[Cluster, Path, dict[str, Any], dict[str, str]], tmp_path: Path
) -> None:
    cluster, data, services, user = stack
    bootstrap = cluster.bootstrap
    assert bootstrap != COMPOSE_BROKER
    logs = tmp_path / "logs"
    logs.mkdir()

    # 1. topics (one-shot): it must say which broker it dialled
    topics = subprocess.run(
        service_argv(services["topics"], data, bootstrap),
        env=service_env(services["topics"], user, data, bootstrap),
        cwd=data,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert topics.returncode == 0, topics.stdout + topics.stderr
    assert f"Kafka at {bootstrap} (brokers: {bootstrap})" in topics.stdout, topics.stdout

    # 2. the first admin, as the README says: the users service's own command, password on stdin,
    # then an API token for it (its password on stdin; the token is the last word of its output)
    users = services["users"]
    made = _run(users, user, data, bootstrap, service_argv(users, data, bootstrap), stdin="admin-long-password\n")
    assert made.returncode == 0 and "user admin added with role admin" in made.stdout, made.stdout + made.stderr
    token_argv = [*service_argv(users, data, bootstrap)[:2], "token", "admin"]
    issued = _run(users, user, data, bootstrap, token_argv, stdin="admin-long-password\n")
    assert issued.returncode == 0, issued.stderr
    bearer = {"Authorization": "Bearer " + issued.stdout.split()[-1]}
    # the signing key: made with openssl as the header says, a secret, registered by the keys
    # service's own command (the store records its public key; the projector then signs with it)
    key = make_secrets(load_compose(), data)
    keys = services["keys"]
    registered = _run(keys, user, data, bootstrap, service_argv(keys, data, bootstrap))
    assert registered.returncode == 0 and "is recorded in" in registered.stdout, registered.stdout + registered.stderr
    again = _run(keys, user, data, bootstrap, service_argv(keys, data, bootstrap))
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr
    shown = _run(keys, user, data, bootstrap, [*service_argv(keys, data, bootstrap)[:2], "show"])
    public = subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout"], capture_output=True, text=True, check=True)
    assert public.stdout.strip() in shown.stdout, shown.stdout + shown.stderr

    # 3. the workers (deploy.replicas) and the projector, with its scheduled reports and the console
    replicas = int((services["worker"].get("deploy") or {}).get("replicas", 1))
    assert replicas == 2
    # each replica's container has its own /tmp: here, its own alive file (outside the mapped /data)
    alive = [{**user, "DEALTRAIL_WORKER__ALIVE_FILE": str(tmp_path / f"worker-{i}.alive")} for i in range(replicas)]
    workers = [_start(services["worker"], alive[i], data, bootstrap, logs / f"worker-{i}.log") for i in range(replicas)]
    port = free_port()
    projector_argv = console_argv(service_argv(services["projector"], data, bootstrap), port)
    # the replica every 2 s instead of the default 60, so that the report below reads what was projected
    copying = {**user, "DEALTRAIL_REPLICA__EVERY": "2"}
    projector = _start(services["projector"], copying, data, bootstrap, logs / "projector.log", projector_argv)
    procs = [*workers, projector]
    try:
        # 4. the publisher's own sh -c script: simulate a shift and publish it
        publisher = _start(services["publisher"], user, data, bootstrap, logs / "publisher.log")
        try:
            code = publisher.wait(timeout=150)
        finally:
            stop(publisher, signal.SIGKILL)  # the whole sh -c group, if it overran
        out = (logs / "publisher.log").read_text()
        assert code == 0 and "published" in out and (data / "events.jsonl").is_file(), out
        for p in procs:
            assert p.poll() is None, [log.read_text() for log in logs.iterdir()]
        cluster.wait_consumed(timeout=150)
        deadline = time.monotonic() + 90
        while not _projected(cluster):
            assert time.monotonic() < deadline, (logs / "projector.log").read_text()
            assert projector.poll() is None, (logs / "projector.log").read_text()
            time.sleep(1)
        # 5. the console in the projector's process
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as web:
            assert web.get("/login").status_code == 200
            assert web.get("/api/v1/findings").status_code == 401
            listed = web.get("/api/v1/findings", params={"limit": 10_000}, headers=bearer)
            assert listed.status_code == 200, listed.text
            served = {f["finding_id"] for f in listed.json()["findings"]}
            assert listed.json()["total"] == len(served)
        # 6. the services' own healthchecks: the workers alive, the projector ready
        for i in range(replicas):  # retried as compose retries a healthcheck (a worker may start late)
            for _ in range(30):
                check = healthcheck(services["worker"], alive[i], data, bootstrap, port)
                if check.returncode == 0:
                    break
                time.sleep(1)
            assert check.returncode == 0, check.stderr
        check = healthcheck(services["projector"], user, data, bootstrap, port)
        assert check.returncode == 0, check.stderr
        # 7. the report service's own command, while the projector runs: it reads the replica
        stored = time.time()
        replica = data / "dealtrail.replica.duckdb"
        while not _copied_after(replica, stored):
            assert time.time() < stored + 60, (logs / "projector.log").read_text()
            time.sleep(1)
        report = _run(services["report"], user, data, bootstrap, service_argv(services["report"], data, bootstrap))
        assert report.returncode == 0, report.stdout + report.stderr
        assert f"reading replica {replica}" in " ".join(report.stderr.split()), report.stderr
        assert (data / "report" / "report.html").is_file()
        assert projector.poll() is None, "the report did not need the projector stopped"
    finally:
        for w in workers:
            assert stop(w, signal.SIGTERM) == 0, [log.read_text() for log in logs.iterdir()]
        # compose's stop signal for the projector (SIGTERM): it closes the DuckDB file and exits 0
        assert stop(projector, signal.SIGTERM) == 0, (logs / "projector.log").read_text()
    # the workers said what they did at the compose file's log level: start, assignment, stop
    for i in range(replicas):
        said = (logs / f"worker-{i}.log").read_text()
        for line in ("worker starting: group", "; Kafka at ", "assigned ", "worker stopped: "):
            assert line in said, said

    db = data / "dealtrail.duckdb"
    assert db.is_file(), (logs / "projector.log").read_text()
    stream = findings_of(db)
    assert stream, "findings arrived in the projected store"
    assert served == {fid for fid, _, _ in stream}, "the console lists the findings the stack produced"
    con = duckdb.connect(str(db), read_only=True)
    try:
        events = con.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    lines = sum(1 for line in (data / "events.jsonl").read_bytes().splitlines() if line.strip())
    assert 0 < events <= lines
    # the projector's scheduled reports (--report-every shift --reports /data/periods)
    periods = data / "periods"
    assert any(periods.glob("*/rev-*/report.html")), sorted(periods.rglob("*")) if periods.exists() else "no periods"
    # the workers' Faust data folders lived under the container user's home and are gone
    assert not any((data / ".local" / "state" / "dealtrail" / "faust").glob("*")), "worker data folders left"
