"""End-to-end smoke test of the dev Kafka broker (ops/kafka/broker) with the project's clients.

  1. creates a topic with 4 partitions with kafka-python's KafkaAdminClient;
  2. produces N (default 1000) string-keyed messages with kafka-python's KafkaProducer
     (acks="all", enable_idempotence=True);
  3. consumes them back with a tiny faust-streaming app (an agent counting messages into a
     Table, whose changelog topic faust creates itself) run as a worker in a subprocess,
     which stops itself once it has seen all N;
  4. checks the counts and the changelog, then deletes the topics it made.

Run with the project venv while the broker is up:

    ops/kafka/broker up && .venv/bin/python ops/kafka/smoke.py

Exit status 0 on success. Options: --bootstrap (default $DEALTRAIL_KAFKA_BOOTSTRAP, else
127.0.0.1:$DEALTRAIL_KAFKA_PORT or 127.0.0.1:9092), --messages, --timeout, --guarantee
at_least_once|exactly_once, --loglevel, --stop-delay.

exactly_once note: stopping a faust 0.15.3 worker right after its last table update races the
per-partition transaction producers (ProducerBuffer crashes with aiokafka IllegalOperation
"Can't send messages while not in transaction", worker exits 1; faust-streaming issue #177,
not broker-specific). Letting one commit interval pass before the stop avoids it, hence the
default --stop-delay of 4 s with exactly_once.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
import warnings

# kafka-python 3.0.12 loads its protocol schemas with the legacy importlib.resources.read_text,
# which emits ~200 DeprecationWarnings at import on Python 3.11+ (hidden by Python's default
# filters, shown by pytest). Silence exactly those.
warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)

PARTITIONS = 4
KEYS = 50


def _default_bootstrap() -> str:
    # the address dealtrail's settings would dial, else the broker script's own port
    return os.environ.get("DEALTRAIL_KAFKA_BOOTSTRAP") or "127.0.0.1:{}".format(
        os.environ.get("DEALTRAIL_KAFKA_PORT", "9092")
    )


# --------------------------------------------------------------------------------------------
# faust side (runs in the subprocess)
# --------------------------------------------------------------------------------------------
def run_faust_worker(args: argparse.Namespace) -> None:
    import asyncio
    import signal

    import faust

    app = faust.App(
        args.app_id,
        broker=f"kafka://{args.bootstrap}",
        store="memory://",
        datadir=args.datadir,
        web_enabled=False,  # no HTTP port (default 6066) needed
        topic_partitions=PARTITIONS,  # tables/changelogs co-partitioned with the source
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        processing_guarantee=args.guarantee,
    )
    source = app.topic(args.topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    counts = app.Table("counts", default=int, key_type=str, value_type=int, partitions=PARTITIONS)
    state = {"seen": 0, "first": None, "partitions": {}}

    @app.agent(source)
    async def count(stream):
        async for event in stream.events():
            key = event.key.decode()
            counts[key] += 1
            state["seen"] += 1
            tp = event.message.partition
            state["partitions"][tp] = state["partitions"].get(tp, 0) + 1
            if state["first"] is None:
                state["first"] = time.monotonic()
            if state["seen"] == args.expect:
                result = {
                    "seen": state["seen"],
                    "table_total": sum(counts.values()),
                    "table_keys": len(counts),
                    "partitions": state["partitions"],
                    "consume_s": round(time.monotonic() - state["first"], 3),
                }
                with open(args.result, "w") as fh:
                    json.dump(result, fh)
                # graceful stop: mode's Worker handles SIGTERM by stopping the app.
                # --stop-delay lets a commit interval pass first (see the exactly_once note).
                asyncio.get_running_loop().call_later(args.stop_delay, os.kill, os.getpid(), signal.SIGTERM)

    worker = faust.Worker(app, loglevel=args.loglevel, quiet=True)
    worker.spinner = None  # else it writes cursor hide/show escapes even to a pipe
    worker.execute_from_commandline()  # exits the process (0 on a clean stop)


# --------------------------------------------------------------------------------------------
# driver side
# --------------------------------------------------------------------------------------------
def main(args: argparse.Namespace) -> int:
    import logging

    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    from kafka.serializer import DefaultSerializer

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run = uuid.uuid4().hex[:8]
    topic = f"dealtrail-smoke-{run}"
    app_id = f"dealtrail-smoke-app-{run}"
    t_all = time.monotonic()

    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, client_id="dealtrail-smoke")
    try:
        # 1. topic with 4 partitions
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
        meta = admin.describe_topics([topic])[0]
        nparts = len(meta["partitions"])
        assert nparts == PARTITIONS, f"expected {PARTITIONS} partitions, got {nparts}"
        print(f"created topic {topic} with {nparts} partitions")

        # 2. produce, idempotent, acks=all
        producer = KafkaProducer(
            bootstrap_servers=args.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            # kafka-python 3.x wants Serializer objects; a plain callable
            # still works but raises a DeprecationWarning
            key_serializer=DefaultSerializer(),
            value_serializer=DefaultSerializer(),
        )
        t0 = time.monotonic()
        futures = [producer.send(topic, key=f"key-{i % KEYS}", value=f"message {i}") for i in range(args.messages)]
        producer.flush(timeout=60)
        per_partition: dict[int, int] = {}
        for fut in futures:
            md = fut.get(timeout=30)
            per_partition[md.partition] = per_partition.get(md.partition, 0) + 1
        producer.close(timeout=10)
        print(
            f"produced {args.messages} messages in {time.monotonic() - t0:.2f}s "
            f"(per partition: {dict(sorted(per_partition.items()))})"
        )

        # 3. consume with faust in a subprocess
        with tempfile.TemporaryDirectory(prefix="dealtrail-smoke-") as tmp:
            result_path = os.path.join(tmp, "result.json")
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "_worker",
                "--bootstrap",
                args.bootstrap,
                "--topic",
                topic,
                "--app-id",
                app_id,
                "--expect",
                str(args.messages),
                "--datadir",
                os.path.join(tmp, "faust"),
                "--result",
                result_path,
                "--guarantee",
                args.guarantee,
                "--loglevel",
                args.loglevel,
                "--stop-delay",
                str(args.stop_delay),
            ]
            t0 = time.monotonic()
            try:
                proc = subprocess.run(  # noqa: PLW1510 - the return code is checked below
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    timeout=args.timeout,
                    text=True,
                )
                out, rc = proc.stdout, proc.returncode
            except subprocess.TimeoutExpired as exc:
                out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
                rc = "timeout"
            wall = time.monotonic() - t0
            if out.strip():
                print("---- faust worker output ----")
                print(out.rstrip())
                print("---- end of faust worker output ----")
            if not os.path.exists(result_path):
                print(f"FAIL: faust worker (exit {rc}) did not see {args.messages} messages within {args.timeout}s")
                return 1
            with open(result_path) as fh:
                result = json.load(fh)
        print(
            f"faust worker: exit {rc}, {wall:.1f}s wall (start + consume + stop), "
            f"consumed in {result['consume_s']}s: {result}"
        )
        ok = (
            rc == 0
            and result["seen"] == args.messages
            and result["table_total"] == args.messages
            and result["table_keys"] == KEYS
        )

        # 4. the Table's changelog topic exists and got the updates
        changelog = f"{app_id}-counts-changelog"
        topics = set(admin.list_topics())
        if changelog in topics:
            consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, enable_auto_commit=False)
            tps = [TopicPartition(changelog, p) for p in sorted(consumer.partitions_for_topic(changelog) or ())]
            ends = consumer.end_offsets(tps)
            consumer.close()
            cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, changelog)])
            cfg = {k: v.get("value") for k, v in cfg["topic"][changelog].items()}
            print(
                f"changelog {changelog}: {len(tps)} partitions, "
                f"end offsets total {sum(ends.values())}, topic configs {cfg}"
            )
            ok = ok and len(tps) == PARTITIONS and sum(ends.values()) >= KEYS
        else:
            print(f"FAIL: changelog topic {changelog} missing; topics: {sorted(topics)}")
            ok = False

        # clean up what this run created
        mine = [t for t in admin.list_topics() if t == topic or t.startswith(app_id)]
        admin.delete_topics(mine)
        print(f"deleted topics: {sorted(mine)}")
    finally:
        admin.close()

    print(f"{'OK' if ok else 'FAIL'}: smoke test {time.monotonic() - t_all:.1f}s")
    return 0 if ok else 1


def parse_args(argv: list[str]) -> argparse.Namespace:
    worker = bool(argv) and argv[0] == "_worker"
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default=_default_bootstrap())
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds allowed for the faust worker")
    p.add_argument("--guarantee", default="at_least_once", choices=["at_least_once", "exactly_once"])
    p.add_argument("--loglevel", default="warning", help="faust worker log level")
    p.add_argument(
        "--stop-delay",
        type=float,
        default=None,
        help="seconds the worker keeps running after the last message (default 0; 4 with exactly_once)",
    )
    if worker:
        for opt in ("--topic", "--app-id", "--datadir", "--result"):
            p.add_argument(opt, required=True)
        p.add_argument("--expect", type=int, required=True)
        argv = argv[1:]
    ns = p.parse_args(argv)
    ns.worker = worker
    if ns.stop_delay is None:
        ns.stop_delay = 4.0 if ns.guarantee == "exactly_once" else 0.0
    return ns


if __name__ == "__main__":
    ns = parse_args(sys.argv[1:])
    if ns.worker:
        run_faust_worker(ns)
    else:
        sys.exit(main(ns))
