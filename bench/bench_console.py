"""Benchmark of the console in the streaming deployment: how long a new finding takes to reach the
floor page and a webhook, with events published at a steady 100 events/s.

Run with ``make bench-console`` (the broker must be up: ``make kafka-up``; ``DEALTRAIL_KAFKA_BOOTSTRAP``
names it). The run works in its own namespace ``bench-console-<random>`` and deletes its topics at
the end; every subprocess is stopped in a ``finally`` and every wait is bounded.

Set-up: a simulated floor (``--tables`` 4, error rate 0.5, the first ``--seconds`` x ``--rate``
events), one ``dealtrail worker``, ``dealtrail project --serve`` (the console in the projector's
process, default settings but for the webhook rule ``DEALTRAIL_NOTIFY__RULES``) and a webhook
receiver in this process. The events are sent one by one with the publisher's own ``Publisher``
at ``--rate`` events/s; the wall time just before each send is kept by event ID.

For each finding (revision 0) the event that raised it is its ``trigger_event_id``, read from the
findings topic the worker writes. Latency = arrival - publish time of that event, where arrival is:

  floor     the response of a poller that fetches ``/api/v1/floor`` (the rows the floor page
            shows, read from the same store) every ``DEALTRAIL_CONSOLE__POLL_SECONDS`` (the floor
            page's own refresh period), at the first poll whose row of the finding's table has
            ``last_finding_at`` >= the finding's detection time: what a person watching the floor
            page sees, the page's refresh period included.
  webhook   the webhook receiver's receipt of the POST for the finding.
  stored    (stderr) a poller that asks ``/api/v1/findings`` every 0.25 s: when the finding is in
            the store for the console to show (the floor latency without the page's period).

Prints exactly these lines on stdout (details on stderr)::

  findings measured             N
  floor latency ms p50/p99/max  a / b / c
  webhook latency ms p50/p99/max a / b / c

Options: ``--seconds`` (60), ``--rate`` (100), ``--tables`` (4), ``--poll-seconds`` (the floor
page's period; default: the settings').
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# kafka-python 3.0.12 emits ~200 DeprecationWarnings at import (legacy importlib.resources).
warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def log(msg: str) -> None:
    print(f"[bench-console {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Webhook:
    """A local receiver: finding ID -> first receipt (wall time)."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        arrived = self.arrived

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n))
                arrived.setdefault(body["finding"]["finding_id"], time.time())
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def percentiles(ms: list[float]) -> str:
    if not ms:
        return "- / - / -"
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return f"{statistics.median(ms):.0f} / {p99:.0f} / {ms[-1]:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--poll-seconds", type=float, default=None)
    args = parser.parse_args()

    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    from dealtrail.settings import Settings
    from dealtrail.simulator.run import write_simulation
    from schemas.codec import decode
    from streams.kafka import consumer_config, create_topics
    from streams.publish import Publisher

    namespace = f"bench-console-{uuid.uuid4().hex[:8]}"
    base_settings = Settings()
    settings = Settings(namespace=namespace, partitions=4).with_bootstrap(base_settings.kafka.bootstrap)
    poll = args.poll_seconds if args.poll_seconds is not None else base_settings.console.poll_seconds
    n_events = int(args.seconds * args.rate)
    work = Path(tempfile.mkdtemp(prefix="bench-console-"))
    events_file = work / "events.jsonl"
    hours = max(0.1, n_events / (args.tables * 2000))
    write_simulation(events_file, tables=args.tables, hours=hours, seed=17, error_rate=0.5)
    events = [decode(line) for line in events_file.read_bytes().splitlines() if line.strip()][:n_events]
    log(f"{len(events)} events, {args.tables} tables, {args.rate:g} events/s; floor page period {poll:g} s")
    create_topics(settings.kafka, settings.topics)

    hook = Webhook()
    port = free_port()
    env = {
        **os.environ,
        "DEALTRAIL_KAFKA_BOOTSTRAP": settings.kafka.bootstrap,
        "DEALTRAIL_NAMESPACE": namespace,
        "DEALTRAIL_PARTITIONS": "4",
        "DEALTRAIL_NOTIFY__RULES": json.dumps([{"webhook": hook.url}]),
        "DEALTRAIL_CONSOLE__POLL_SECONDS": str(poll),
    }
    db = work / "store.duckdb"
    cli = [sys.executable, "-m", "dealtrail.cli"]
    subprocess.run([*cli, "users", "add", "bench", "--role", "viewer", "--db", str(db)], env=env,
                   input="bench-long-password\n", text=True, check=True, capture_output=True)  # fmt: skip
    out = subprocess.run([*cli, "users", "token", "bench", "--db", str(db)], env=env, text=True, check=True,
                         capture_output=True)  # fmt: skip
    bearer = {"Authorization": "Bearer " + out.stdout.split()[-1]}

    procs: list[subprocess.Popen[bytes]] = []
    logs = {name: (work / f"{name}.log").open("ab") for name in ("worker", "projector")}
    stop = threading.Event()
    triggers: dict[str, str] = {}  # finding ID -> trigger event ID (revision 0)
    detected: dict[str, tuple[str, str]] = {}  # finding ID -> (table, detected_at ISO)
    stored: dict[str, float] = {}
    floor_seen: dict[str, float] = {}
    floor_polls: list[tuple[float, dict[str, str]]] = []  # (response time, table -> last finding time)
    sent: dict[str, float] = {}
    produced: dict[str, float] = {}  # finding ID -> CreateTime of its record in the findings topic
    try:
        procs.append(subprocess.Popen([*cli, "worker"], env=env, stdout=logs["worker"], stderr=subprocess.STDOUT,
                                      start_new_session=True))  # fmt: skip
        serve = [*cli, "project", "--db", str(db), "--serve", f"127.0.0.1:{port}"]
        procs.append(subprocess.Popen(serve, env=env, stdout=logs["projector"], stderr=subprocess.STDOUT,
                                      start_new_session=True))  # fmt: skip
        import httpx

        web = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, headers=bearer)
        deadline = time.monotonic() + 90
        while True:
            try:
                if web.get("/api/v1/floor").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise SystemExit(f"the console did not start; see {work}/projector.log")
            time.sleep(0.2)
        # the worker must hold the partitions before the clock starts
        admin = KafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap, client_id="bench-console")
        deadline = time.monotonic() + 120
        while True:
            group = admin.describe_groups([settings.topics.app_id]).get(settings.topics.app_id, {})
            if str(group.get("group_state") or group.get("state")) == "Stable" and group.get("members"):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the worker did not join its group; see {work}/worker.log")
            time.sleep(0.5)
        admin.close()
        log("worker and console up")

        def read_findings() -> None:
            consumer = KafkaConsumer(**consumer_config(settings.kafka, "bench-console"), enable_auto_commit=False)
            name = settings.topics.findings.name
            consumer.assign([TopicPartition(name, p) for p in sorted(consumer.partitions_for_topic(name) or ())])
            consumer.seek_to_beginning()
            while not stop.is_set():
                for records in consumer.poll(timeout_ms=200).values():
                    for r in records:
                        f = json.loads(r.value)
                        if f["revision"] == 0:
                            triggers.setdefault(f["finding_id"], f["trigger_event_id"])
                            produced.setdefault(f["finding_id"], r.timestamp / 1000)
            consumer.close()

        def poll_store() -> None:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, headers=bearer) as c:
                while not stop.is_set():
                    got = c.get("/api/v1/findings", params={"limit": 100}).json()["findings"]
                    now = time.time()
                    for f in got:
                        stored.setdefault(f["finding_id"], now)
                        detected.setdefault(f["finding_id"], (f["table_id"], f["detected_at"]))
                    time.sleep(0.25)

        def poll_floor() -> None:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, headers=bearer) as c:
                while not stop.is_set():
                    rows = c.get("/api/v1/floor").json()["tables"]
                    floor_polls.append(
                        (time.time(), {r["table_id"]: r["last_finding_at"] for r in rows if r.get("last_finding_at")})
                    )
                    stop.wait(poll)

        for target in (read_findings, poll_store, poll_floor):
            threading.Thread(target=target, daemon=True).start()

        publisher = Publisher(settings.kafka, settings.topics, chain=True)
        start = time.monotonic()
        for i, event in enumerate(events):
            due = start + i / args.rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            sent[event.event_id] = time.time()
            publisher.send(event)
        publisher.flush()
        publisher.close()
        log(f"published {len(events)} events in {time.monotonic() - start:.1f} s")
        # let the last findings arrive everywhere
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            wanted = [f for f, t in triggers.items() if t in sent]
            if wanted and all(f in hook.arrived and f in stored for f in wanted):
                break
            time.sleep(0.5)
        # every finding's table and detection time (what the floor rows are compared with)
        final = web.get("/api/v1/findings", params={"limit": 10_000}).json()["findings"]
        detected.update({f["finding_id"]: (f["table_id"], f["detected_at"]) for f in final})
    finally:
        stop.set()
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGINT if p is procs[-1] else signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        try:
            admin = KafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap, client_id="bench-console")
            admin.delete_topics([t for t in admin.list_topics() if t.startswith(namespace)])
            admin.close()
        except Exception as exc:  # the figures matter more than the clean-up
            log(f"could not delete the topics of {namespace}: {exc}")

    from datetime import datetime

    for fid, (table, at) in detected.items():
        when = datetime.fromisoformat(at)
        for polled_at, last in floor_polls:
            if table in last and datetime.fromisoformat(last[table]) >= when:
                floor_seen[fid] = polled_at
                break
    measured = [f for f, t in triggers.items() if t in sent]
    floor_ms = [1000 * (floor_seen[f] - sent[triggers[f]]) for f in measured if f in floor_seen]
    hook_ms = [1000 * (hook.arrived[f] - sent[triggers[f]]) for f in measured if f in hook.arrived]
    stored_ms = [1000 * (stored[f] - sent[triggers[f]]) for f in measured if f in stored]
    missing = [f for f in measured if f not in floor_seen or f not in hook.arrived]
    worker_ms = [1000 * (produced[f] - sent[triggers[f]]) for f in measured if f in produced]
    log(f"worker (findings record CreateTime) ms p50/p99/max: {percentiles(worker_ms)}")
    log(f"stored (console API, 0.25 s poll) ms p50/p99/max: {percentiles(stored_ms)}")
    if missing:
        log(f"{len(missing)} findings did not arrive everywhere within 30 s of the last publish")
    log(f"logs and store in {work}")
    print(f"findings measured             {len(measured)}")
    print(f"floor latency ms p50/p99/max  {percentiles(floor_ms)}")
    print(f"webhook latency ms p50/p99/max {percentiles(hook_ms)}")


if __name__ == "__main__":
    main()
