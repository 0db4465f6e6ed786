"""Benchmark of the streaming path on the real Kafka broker: publisher, bare Faust agent, worker.

Run with ``make bench-stream`` (the broker must be up: ``make kafka-up``). Every run works in
its own namespaces ``bench-<random>-<phase>`` (or ``$DEALTRAIL_NAMESPACE-<phase>`` when that
starts with ``bench-``), creates them with :func:`streams.kafka.create_topics`, and deletes its
topics and consumer groups at the end, so it can share a broker with other users. Every
subprocess is stopped with SIGTERM (SIGKILL only if it does not exit in time) in a ``finally``,
and every wait is bounded.

Prints exactly these lines on stdout (details and cross-checks go to stderr)::

  publisher events/s      ``Publisher`` + ``publish_file`` over N simulated events (the cached
                          ``bench/data/events-chained-N.jsonl``, 48 tables): read, validate, send, and the
                          final ``flush`` (every record acknowledged, acks=all), wall time.
  bare agent events/s     A bare Faust agent (own app, own consumer group, in a subprocess, the
                          worker's Faust settings: memory store, web off, earliest, at-least-once,
                          same producer settings) on the same events topic that only
                          ``schemas.codec.decode``-s and counts each message. Timed inside the agent,
                          from the first message it sees to the N-th. Run twice, with
                          ``stream.take_events(batch, within)`` (the worker's batch settings) and with
                          plain ``async for value in stream``; the faster is reported (stderr says which).
  worker events/s         ``dealtrail worker`` in a subprocess (its own namespace app ID) consuming
                          the same N events from a pre-filled topic. Completion is detected with
                          the consumer group's committed offsets (``KafkaAdminClient.list_group_offsets``
                          vs end offsets), but the commit interval (2.8 s) is far too coarse to time
                          with, so the rate is N / (last - first output timestamp), where the output
                          records are everything the worker writes: its table changelog (one record
                          per touched table per batch), rounds and findings. Their CreateTime is
                          stamped by the worker's producer when the record is appended, i.e. right
                          after the event that caused it was processed, so the window runs from the end
                          of the first batch to the end of the last one (it misses at most one batch,
                          ``batch``/N = 0.25 % with defaults, which slightly favours the worker). The
                          offset-lag window (first commit > 0 to all committed) is printed on stderr.
  worker/bare ratio       worker events/s / bare agent events/s.
  two workers events/s    Two ``dealtrail worker`` processes in one consumer group on a fresh
                          namespace with ``--partitions`` (8) partitions. To keep the start-up
                          rebalance out of the figure, both are started on the empty topic, the
                          bench waits for the group to be Stable with 2 members, pauses both with
                          SIGSTOP, publishes the N events or as many as it can in 8 s (the workers'
                          session timeout is 12 s: a longer pause made the broker drop both, and the
                          phase timed a rebalance), resumes them with SIGCONT and times them like
                          the single worker (first to last output record over both).
  p50 / p99 latency ms    A fresh namespace and one worker (started and Stable first); events are
                          published one by one at a steady ``--rate`` (1,000/s) for ``--seconds``
                          (25; 8 with --quick). For each ``RoundCompleted`` the wall time just before
                          ``Publisher.send`` is kept by event ID; a consumer in a process of its own
                          (``_latency_reader``) reads the rounds topic live and notes when each round
                          record (``completed_event_id``) arrives. Latency = arrival at that
                          downstream consumer - publish time, so it includes the publisher's linger
                          (5 ms), the worker's batching window (``within``), its producer linger
                          (10 ms), acks and the fetch. Round records whose RoundCompleted was not
                          published in this phase cannot occur; RoundCompleted events that make no
                          round record (rejected) are counted on stderr. On stderr too: the
                          CreateTime-based figure, and the split at the moment the reader got each
                          RoundCompleted back from the events topic (publisher and broker before it,
                          the worker after it, by quarter of the phase and by partition).

  The latency phase's events and rounds topics are LogAppendTime, so the record timestamps
  are the broker's append times. With ``--stages`` its worker is ``dealtrail worker`` run
  in-process with a clock at each stage (``run_stage_worker``), and stderr gives p50/p90/p99/max
  of each stage (publish -> broker append -> fetch response -> returned by the consumer ->
  Faust's loop -> batch handed to the judge process -> its answer back -> round row sent ->
  round record appended -> downstream reader), the slowest rounds with what the worker did
  meanwhile (state writes, judge calls, produce requests over 30 ms) and the fetches the broker
  held over 0.3 s.

With ``--designs`` the bench publishes, runs the bare agent (``take_events``) and two agents that
do, besides, the worker's pure work on each event (decode, canonical encode, the engine with the
tables' states, findings serialised; no window, no duplicate index, no Kafka writes): in the
agent's loop as the worker does, and in one child process while the agent takes the next batch
(two batches out at most). Then it prints these lines and stops::

  bare agent events/s
  engine in the agent events/s
  engine in a child process events/s
  engine in the agent/bare ratio
  engine in a child process/bare ratio

Options: ``--events N`` (200,000), ``--quick`` (20,000 events, 8 s latency phase),
``--partitions`` (8), ``--stages``, ``--latency-only`` (the latency phase alone: p50/p99 lines), ``--designs`` (above),
``--keep-logs`` (the subprocesses' logs are kept), ``--profile FILE`` (afterwards, run one more worker in-process under
cProfile on a fresh namespace and write the stats to FILE; prints the top functions on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

# kafka-python 3.0.12 emits ~200 DeprecationWarnings at import (legacy importlib.resources).
warnings.filterwarnings("ignore", message=r"(read_text|open_text) is deprecated", category=DeprecationWarning)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent
DEALTRAIL = BIN / "dealtrail"
PAUSE_SECONDS = 8.0
"""Longest the two-worker phase keeps both workers paused while it publishes (seconds)."""


def log(msg: str) -> None:
    print(f"[bench-stream {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ensure_events(n: int) -> Path:
    """Simulate a floor until ``n`` events, cached in bench/data/ (the file bench_audit.py uses)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_audit import ensure_events as cached

    path: Path = cached(n)
    return path


def load_events(path: Path, n: int) -> list[Any]:
    """The first ``n`` events of ``path``, decoded."""
    from schemas.codec import decode

    out = []
    with path.open("rb") as fh:
        for line in fh:
            if len(out) >= n:
                break
            if line.strip():
                out.append(decode(line))
    return out


def make_settings(namespace: str, partitions: int) -> Any:
    from dealtrail.settings import Settings

    return Settings(namespace=namespace, partitions=partitions)


def faust_app_kwargs(settings: Any) -> dict[str, Any]:
    """The faust.App settings of the worker (``streams.worker.faust_settings``), for the bare agent."""
    from streams.worker import faust_settings

    return faust_settings(settings)


# ----------------------------------------------------------------------------------------------
# subprocess entry points
# ----------------------------------------------------------------------------------------------
def run_bare(args: argparse.Namespace) -> None:
    """A bare agent: decode and count; writes the timing to ``--result`` after ``--expect`` messages."""
    import faust

    from schemas.codec import DecodeError, decode
    from streams.judge import settle_heap

    settings = make_settings(args.namespace, args.partitions)
    app = faust.App(f"{settings.namespace}-bare-{args.mode}", **faust_app_kwargs(settings))
    source = app.topic(
        settings.topics.events.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    st: dict[str, Any] = {"n": 0, "bad": 0, "first": None, "cpu": 0.0, "pure": 0.0, "gc": 0.0, "gc_start": 0.0}
    batch, within = settings.worker.batch, settings.worker.within

    def gc_clock(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            st["gc_start"] = time.perf_counter()
        elif st["first"] is not None:
            st["gc"] += time.perf_counter() - st["gc_start"]

    def done() -> None:
        res = {"n": st["n"], "bad": st["bad"], "seconds": time.perf_counter() - st["first"], "mode": args.mode}
        res["cpu"] = time.thread_time() - st["cpu"]  # the agent's thread: Faust's loop and the agent
        res["pure"], res["gc"] = st["pure"], st["gc"]
        Path(args.result).write_text(json.dumps(res))

    if args.mode in ("engine", "offload"):
        engine_agent(app, source, st, args, batch, within, done)
    elif args.mode == "take":

        @app.agent(source)
        async def bare(stream: Any) -> None:
            async for events in stream.take_events(batch, within=within):
                if st["first"] is None:
                    st["first"], st["cpu"] = time.perf_counter(), time.thread_time()
                for event in events:
                    try:
                        decode(event.message.value)
                    except DecodeError:
                        st["bad"] += 1
                    st["n"] += 1
                if st["n"] >= args.expect and not Path(args.result).exists():
                    done()

    else:

        @app.agent(source)
        async def bare(stream: Any) -> None:
            async for value in stream:
                if st["first"] is None:
                    st["first"], st["cpu"] = time.perf_counter(), time.thread_time()
                try:
                    decode(value)
                except DecodeError:
                    st["bad"] += 1
                st["n"] += 1
                if st["n"] == args.expect:
                    done()

    worker = faust.Worker(app, loglevel="warning", quiet=True)
    worker.spinner = None
    settle_heap()  # the worker's garbage-collector settings too
    gc.callbacks.append(gc_clock)
    worker.execute_from_commandline()


_DESIGN_STATES: dict[str, Any] = {}
"""The engine states of ``_judge``'s process, by table (the ``offload`` design's child)."""
_DESIGN_LIMITS: list[Any] = []
"""The plausibility limits ``_judge`` applies, loaded from the settings once per process."""


def _judge(raws: list[bytes]) -> int:
    """What the worker does to a batch that the bare agent does not, its pure part only: decode,
    canonical encode, the engine (states kept in this process, by table) and the findings
    serialised. Returns the number of findings. Run in the agent's loop (``engine``) or in a
    child process (``offload``)."""
    from dealtrail.settings import load
    from schemas.codec import DecodeError, decode, encode
    from streams.engine import EventRejected, apply

    if not _DESIGN_LIMITS:
        _DESIGN_LIMITS.append(load().plausibility)
    limits = _DESIGN_LIMITS[0]
    found = 0
    for raw in raws:
        try:
            event = decode(raw)
        except DecodeError:
            continue
        try:
            state, findings = apply(_DESIGN_STATES.get(event.table_id), event, encode(event), limits)
        except EventRejected:
            continue
        _DESIGN_STATES[event.table_id] = state
        for f in findings:
            f.model_dump_json()
        found += len(findings)
    return found


def engine_agent(
    app: Any,
    source: Any,
    st: dict[str, Any],
    args: argparse.Namespace,
    batch: int,
    within: float,
    done: Callable[[], None],
) -> None:
    """The ``engine`` and ``offload`` designs of the bare agent (``--designs``): each batch of
    ``stream.take_events`` judged by :func:`_judge` in the agent (``engine``: the worker's
    design), or in one child process while the agent takes the next batch (``offload``: at most
    two batches out, events acknowledged when their batch is judged; one child keeps the order)."""
    import concurrent.futures
    import multiprocessing

    if args.mode == "engine":

        @app.agent(source)
        async def judged(stream: Any) -> None:
            async for events in stream.take_events(batch, within=within):
                if st["first"] is None:
                    st["first"], st["cpu"] = time.perf_counter(), time.thread_time()
                t0 = time.perf_counter()
                _judge([e.message.value for e in events])
                st["pure"] += time.perf_counter() - t0
                st["n"] += len(events)
                if st["n"] >= args.expect and not Path(args.result).exists():
                    done()

        return

    pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver"))
    out: list[Any] = []

    def on_judged(events: list[Any], future: Any) -> None:
        future.result()  # a failure in the child is raised (and logged) here, its batch not counted
        for e in events:
            e.ack()
        st["n"] += len(events)
        if st["n"] >= args.expect and not Path(args.result).exists():
            done()

    @app.agent(source)
    async def offloaded(stream: Any) -> None:
        import asyncio
        import functools

        loop = asyncio.get_running_loop()
        async for events in stream.take_events(batch, within=within):
            if st["first"] is None:
                st["first"], st["cpu"] = time.perf_counter(), time.thread_time()
            for e in events:
                e.message.incref()  # acknowledged once the child has judged its batch
            future = loop.run_in_executor(pool, _judge, [e.message.value for e in events])
            future.add_done_callback(functools.partial(on_judged, events))  # in order: one child
            out.append(future)
            while len(out) > 1:  # at most two batches out
                await out.pop(0)


def run_latency_reader(args: argparse.Namespace) -> None:
    """The latency phase's downstream consumer, in a process of its own: notes when each round
    record arrives (wall time, and its CreateTime) and when each published RoundCompleted can be
    read back from the events topic. Touches ``DIR/ready`` once it is assigned and at the start
    of both topics; once ``DIR/expect.json`` (the published RoundCompleted event IDs) appears, it
    stops when every one has its round record, or 10 s later, and writes ``DIR/result.json``."""
    from kafka import KafkaConsumer

    from streams.kafka import consumer_config

    settings = make_settings(args.namespace, args.partitions)
    t = settings.topics
    folder = Path(args.dir)
    c = KafkaConsumer(**consumer_config(settings.kafka, "bench-stream-latency"), enable_auto_commit=False,
                      fetch_max_wait_ms=100)  # fmt: skip
    arrivals: dict[str, tuple[float, float]] = {}
    in_topic: dict[str, float] = {}
    partition_of: dict[str, int] = {}
    try:
        k = Kafka(settings)
        try:
            tps = k.tps(t.rounds.name) + k.tps(t.events.name)
        finally:
            k.close()
        c.assign(tps)
        c.seek_to_beginning(*tps)
        for tp in tps:
            c.position(tp)
        (folder / "ready").touch()
        expected: set[str] | None = None
        stop_at = 0.0
        while True:
            polled = c.poll(timeout_ms=100)
            now = time.time()
            for tp, recs in polled.items():
                for r in recs:
                    if tp.topic == t.events.name:
                        if b'"RoundCompleted"' in r.value:
                            event_id = json.loads(r.value)["event_id"]
                            in_topic[event_id] = now
                            partition_of[event_id] = tp.partition
                        continue
                    arrivals[json.loads(r.value)["completed_event_id"]] = (now, r.timestamp / 1000)
            if expected is None and (folder / "expect.json").exists():
                expected = set(json.loads((folder / "expect.json").read_text()))
                stop_at = time.monotonic() + 10
            if expected is not None and (expected <= arrivals.keys() or time.monotonic() > stop_at):
                break
    finally:
        c.close()
    done = {"arrivals": arrivals, "in_topic": in_topic, "partition_of": partition_of}
    (folder / "result.json").write_text(json.dumps(done))


def run_profiled_worker(args: argparse.Namespace) -> None:
    """``dealtrail worker`` in-process under cProfile; stats written on SIGTERM."""
    import cProfile

    from dealtrail.settings import load
    from streams.worker import run_worker

    prof = cProfile.Profile()
    prof.enable()
    try:
        run_worker(load())
    except SystemExit:
        pass
    finally:
        prof.disable()
        prof.dump_stats(args.result)


def run_stage_worker(args: argparse.Namespace) -> None:
    """``dealtrail worker`` in-process with a clock at each stage of a ``RoundCompleted``, written
    to ``--result`` (JSON) when it stops (SIGTERM). Clocks (seconds since the epoch), by event ID:

    ``response``  the fetch response that brought the record reached the worker's Kafka consumer
                  (aiokafka's ``Fetcher._proc_fetch_request``; fetches the broker held over 0.3 s
                  are kept with the partitions they asked for);
    ``polled``    the consumer returned it to Faust (``Fetcher.fetched_records``);
    ``fetched``   Faust's consumer loop takes the record (``_to_message``), with the record's
                  timestamp (``appended``: the broker's append time on a LogAppendTime topic);
    ``handed``    the agent hands its batch to the judge process (``JudgeProcess.submit``);
    ``judged``    the judge's answer for that batch is back in the worker process;
    ``sent``      its round row is handed to the producer (``Topic.send`` of the rounds topic).

    Also kept: each carry-out of state writes (``write_state`` calls of one call, first to last:
    start, seconds, entries, bytes) and each call to the judge (method, handed, answered), so
    the slowest rounds can be laid beside what the worker did then. The wrappers cost a
    substring test per message and a few clock reads per RoundCompleted."""
    import faust.transport.drivers.aiokafka as faust_aiokafka
    from faust.topics import Topic

    import streams.judge as judge_module
    import streams.worker as worker
    from dealtrail.settings import load

    settings = load()
    events_topic, rounds_topic = settings.topics.events.name, settings.topics.rounds.name
    stages: dict[str, dict[str, float]] = {}
    to_message = faust_aiokafka.Consumer._to_message

    long_fetches: list[tuple[float, float, str]] = []  # (sent, seconds, partitions asked) over 0.3 s
    calls: list[tuple[str, float, float, int]] = []  # (method, handed, answered, records)
    writes: list[list[float]] = []  # [start, end, entries, bytes] per carry-out of state writes

    def traced_to_message(self: Any, tp: Any, record: Any) -> Any:
        if tp.topic == events_topic and b'"RoundCompleted"' in (record.value or b""):
            event_id = json.loads(record.value)["event_id"]
            stages[event_id] = {"fetched": time.time(), "appended": record.timestamp / 1000}
            if event_id in polled:
                stages[event_id]["response"], stages[event_id]["polled"] = polled.pop(event_id)
        return to_message(self, tp, record)

    submit = judge_module.JudgeProcess.submit

    def traced_submit(self: Any, method: str, number: int, carried: int, *rest: Any) -> Any:
        now = time.time()
        future = submit(self, method, number, carried, *rest)
        mine: list[str] = []
        records = rest[0] if method == "batch" and rest else ()
        for _, _, _, raw, _ in records:
            if b'"RoundCompleted"' in raw:
                event_id = json.loads(raw)["event_id"]
                if event_id in stages:
                    stages[event_id]["handed"] = now
                    mine.append(event_id)
        row = [method, now, 0.0, len(records)]

        def answered(_: Any) -> None:
            row[2] = time.time()
            for event_id in mine:
                stages[event_id]["judged"] = row[2]

        future.add_done_callback(answered)
        calls.append(row)  # type: ignore[arg-type]
        return future

    topic_send = Topic.send

    async def traced_send(self: Any, *a: Any, **kw: Any) -> Any:
        if self.get_topic_name() == rounds_topic:
            value = kw.get("value")
            if isinstance(value, bytes):
                done = stages.get(str(json.loads(value).get("completed_event_id")))
                if done is not None:
                    done.setdefault("sent", time.time())
        return await topic_send(self, *a, **kw)

    write_state = worker.write_state

    async def traced_write_state(
        table: Any, producer: Any, key: bytes, stored: bytes, partition: int | None = None
    ) -> None:
        now = time.time()
        if not writes or now - writes[-1][1] > 0.002:
            writes.append([now, now, 0, 0])
        await write_state(table, producer, key, stored, partition)
        last = writes[-1]
        last[1], last[2], last[3] = time.time(), last[2] + 1, last[3] + len(stored)

    from aiokafka.consumer.fetcher import Fetcher

    fetched_records, proc_fetch_request = Fetcher.fetched_records, Fetcher._proc_fetch_request
    # (partition, offset it was fetched from, when its response came), per fetch with new records
    responses: dict[int, list[tuple[int, float]]] = {}

    async def traced_proc_fetch_request(self: Any, assignment: Any, *args: Any) -> Any:
        before = {tp: id(r) for tp, r in self._records.items()}
        sent = time.time()
        out = await proc_fetch_request(self, assignment, *args)
        now = time.time()
        if now - sent > 0.3:
            request = args[-1]
            asked = [(t[-28:], [p[0] for p in parts]) for t, parts in getattr(request, "_topics", None) or ()]
            long_fetches.append((sent, now - sent, str(asked or vars(request))[:300]))
        for tp, r in self._records.items():
            if tp.topic == events_topic and before.get(tp) != id(r):
                responses.setdefault(tp.partition, []).append((assignment.state_value(tp).position, now))
        return out

    async def traced_fetched_records(self: Any, *args: Any, **kwargs: Any) -> Any:
        drained = await fetched_records(self, *args, **kwargs)
        now = time.time()
        for tp, records in drained.items():
            if tp.topic == events_topic:
                for record in records:
                    if b'"RoundCompleted"' in (record.value or b""):
                        got = [t for at, t in responses.get(tp.partition, ()) if at <= record.offset]
                        polled[json.loads(record.value)["event_id"]] = (max(got) if got else now, now)
        return drained

    from aiokafka.producer.sender import SendProduceReqHandler

    produce_do = SendProduceReqHandler.do

    async def traced_produce(self: Any, node_id: int) -> Any:
        start = time.time()
        try:
            return await produce_do(self, node_id)
        finally:
            size = sum(len(b.get_data_buffer()) for b in self._batches.values())
            names = sorted({tp.topic.rsplit(".", 2)[-2] if "." in tp.topic else tp.topic[-24:] for tp in self._batches})
            produced.append((start, time.time(), size, ",".join(names)))

    produced: list[tuple[float, float, int, str]] = []  # (start, end, bytes, topics) per produce request
    SendProduceReqHandler.do = traced_produce  # type: ignore[method-assign]
    polled: dict[str, tuple[float, float]] = {}
    Fetcher.fetched_records = traced_fetched_records  # type: ignore[method-assign]
    Fetcher._proc_fetch_request = traced_proc_fetch_request  # type: ignore[method-assign]
    faust_aiokafka.Consumer._to_message = traced_to_message  # type: ignore[method-assign]
    judge_module.JudgeProcess.submit = traced_submit  # type: ignore[method-assign]
    Topic.send = traced_send  # type: ignore[method-assign]
    worker.write_state = traced_write_state
    try:
        worker.run_worker(settings)
    except SystemExit:
        pass
    finally:
        Path(args.result).write_text(
            json.dumps(
                {"stages": stages, "long_fetches": long_fetches, "calls": calls, "writes": writes, "produced": produced}
            )
        )


# ----------------------------------------------------------------------------------------------
# driver helpers
# ----------------------------------------------------------------------------------------------
class Procs:
    """Every subprocess started, so the ``finally`` can stop them all."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def start(self, name: str, cmd: list[str], env_extra: dict[str, str]) -> subprocess.Popen[bytes]:
        cwd = self.workdir / name
        cwd.mkdir(parents=True, exist_ok=True)
        logf = cwd / "output.log"
        env = {**os.environ, **env_extra}
        with logf.open("wb") as out:
            p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append((name, p, logf))
        return p

    def stop(self, p: subprocess.Popen[bytes], timeout: float = 30.0) -> int | None:
        """SIGTERM (after SIGCONT in case it is paused), wait, SIGKILL if needed."""
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
                os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                name = next((n for n, q, _ in self.procs if q is p), "?")
                log(f"{name} (pid {p.pid}) ignored SIGTERM for {timeout:.0f}s: SIGKILL")
                p.kill()
                p.wait(10)
        return p.returncode

    def tail(self, p: subprocess.Popen[bytes], lines: int = 30) -> str:
        for _, q, logf in self.procs:
            if q is p and logf.exists():
                return "\n".join(logf.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop_all(self) -> None:
        for _, p, _ in self.procs:
            try:
                self.stop(p, timeout=20.0)
            except Exception as exc:
                log(f"could not stop pid {p.pid}: {exc!r}")


class Kafka:
    """Admin and metadata helpers (kafka-python)."""

    def __init__(self, settings: Any) -> None:
        from kafka import KafkaAdminClient, KafkaConsumer

        from streams.kafka import client_config, consumer_config

        self.kafka = settings.kafka
        self.admin = KafkaAdminClient(**client_config(settings.kafka, "bench-stream-admin"))
        self.meta = KafkaConsumer(**consumer_config(settings.kafka, "bench-stream-meta"), enable_auto_commit=False)

    def close(self) -> None:
        self.meta.close()
        self.admin.close()

    def tps(self, topic: str) -> list[Any]:
        from kafka import TopicPartition

        deadline = time.monotonic() + 30
        while True:
            parts = self.meta.partitions_for_topic(topic)
            if parts:
                return [TopicPartition(topic, p) for p in sorted(parts)]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no metadata for topic {topic}")
            self.meta.poll(timeout_ms=100)  # refresh metadata
            time.sleep(0.2)

    def end_total(self, topic: str) -> int:
        return sum(self.meta.end_offsets(self.tps(topic)).values())

    def committed_total(self, group: str, topic: str) -> int:
        res = self.admin.list_group_offsets({group: None}).get(group, {})
        return sum(o.offset for tp, o in res.items() if tp.topic == topic and o.offset is not None and o.offset > 0)

    def group_state(self, group: str) -> tuple[str, int]:
        try:
            info = self.admin.describe_groups([group]).get(group, {})
        except Exception:
            return "?", 0
        state = info.get("group_state") or info.get("state") or "?"
        return str(state), len(info.get("members") or [])

    def wait_group(self, group: str, members: int, timeout: float, procs: list[subprocess.Popen[bytes]]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"worker pid {p.pid} exited with {p.returncode} while starting")
            state, n = self.group_state(group)
            if state == "Stable" and n == members:
                return
            time.sleep(0.25)
        raise TimeoutError(f"group {group} not Stable with {members} members in {timeout:.0f}s")

    def wait_committed(
        self, group: str, topic: str, expect: int, timeout: float, procs: list[subprocess.Popen[bytes]]
    ) -> tuple[float | None, float]:
        """Poll committed offsets until ``expect``; returns (wall time first > 0, wall time == expect)."""
        deadline = time.monotonic() + timeout
        first: float | None = None
        last_seen, last_change = -1, time.monotonic()
        while True:
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"worker pid {p.pid} exited with {p.returncode}")
            done = self.committed_total(group, topic)
            now = time.time()
            if done > 0 and first is None:
                first = now
            if done != last_seen:
                last_seen, last_change = done, time.monotonic()
            if done >= expect:
                return first, now
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {group}: {done:,}/{expect:,} committed after {timeout:.0f}s")
            if time.monotonic() - last_change > 60:
                raise TimeoutError(f"group {group}: stuck at {done:,}/{expect:,} committed for 60 s")
            time.sleep(0.2)

    def log_append_time(self, topics: list[str]) -> None:
        """Have the broker stamp the records of ``topics`` with their append time."""
        from kafka.admin import ConfigResource, ConfigResourceType

        self.admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t, configs={"message.timestamp.type": "LogAppendTime"})
             for t in topics]
        )  # fmt: skip

    def cleanup(self, namespaces: list[str], groups: list[str]) -> None:
        if groups:
            try:
                existing = {g.get("group_id") for g in self.admin.list_groups()}
                mine = [g for g in groups if g in existing]
                if mine:
                    self.admin.delete_groups(mine)
                log(f"deleted consumer groups: {mine}")
            except Exception as exc:
                log(f"could not delete consumer groups: {exc!r}")
        mine_t = [t for t in self.admin.list_topics() if any(t.startswith((f"{ns}.", f"{ns}-")) for ns in namespaces)]
        if mine_t:
            self.admin.delete_topics(mine_t)
        log(f"deleted {len(mine_t)} topics: {sorted(mine_t)}")


def worker_env(settings: Any) -> dict[str, str]:
    return {
        "DEALTRAIL_NAMESPACE": settings.namespace,
        "DEALTRAIL_PARTITIONS": str(settings.partitions),
        "DEALTRAIL_KAFKA_BOOTSTRAP": settings.kafka.bootstrap,
    }


def output_window(k: Kafka, settings: Any) -> tuple[float, float, int]:
    """(first, last) CreateTime in seconds over everything the worker wrote, and the record count.

    Only the first and the last record of each partition are read: each partition has one
    writer (the worker owning it) appending in time order, and the changelog alone can hold
    gigabytes (each record is a whole table state).
    """
    from kafka import KafkaConsumer

    from streams.kafka import consumer_config
    from streams.worker import TABLE_NAME

    t = settings.topics
    existing = set(k.admin.list_topics())
    names = [f"{t.app_id}-{TABLE_NAME}-changelog", t.rounds.name, t.findings.name]
    tps = [tp for n in names if n in existing for tp in k.tps(n)]
    c = KafkaConsumer(**consumer_config(k.kafka, "bench-stream-window"), enable_auto_commit=False, max_poll_records=1)
    try:
        begins, ends = c.beginning_offsets(tps), c.end_offsets(tps)
        stamps: list[int] = []
        count = 0
        for tp in tps:
            if ends[tp] <= begins[tp]:
                continue
            count += ends[tp] - begins[tp]
            for off in {begins[tp], ends[tp] - 1}:
                c.assign([tp])
                c.seek(tp, off)
                deadline = time.monotonic() + 30
                got = False
                while not got and time.monotonic() < deadline:
                    for recs in c.poll(timeout_ms=500).values():
                        stamps.append(recs[0].timestamp)
                        got = True
                        break
                if not got:
                    raise TimeoutError(f"could not read {tp} at {off}")
    finally:
        c.close()
    if not stamps:
        raise RuntimeError("the worker wrote nothing")
    return min(stamps) / 1000, max(stamps) / 1000, count


def time_workers(
    k: Kafka, procs: Procs, workers: list[subprocess.Popen[bytes]], settings: Any, expect: int, timeout: float
) -> float:
    """Wait until the group has committed ``expect``, stop the workers, return events/s."""
    t = settings.topics
    first_commit, all_commit = k.wait_committed(t.app_id, t.events.name, expect, timeout, workers)
    for w in workers:
        rc = procs.stop(w)
        if rc != 0:
            log(f"worker pid {w.pid} exited {rc}:\n{procs.tail(w)}")
    t0, t1, nrec = output_window(k, settings)
    rate = expect / (t1 - t0)
    lag_window = all_commit - (first_commit or all_commit)
    log(
        f"  {expect:,} events; output records {nrec:,}, first->last {t1 - t0:.2f}s = {rate:,.0f} events/s; "
        f"committed-offset window {lag_window:.1f}s (commit interval 2.8 s) = "
        f"{expect / lag_window if lag_window > 0 else float('nan'):,.0f} events/s"
    )
    return rate


# ----------------------------------------------------------------------------------------------
# phases
# ----------------------------------------------------------------------------------------------
def phase_publish(settings: Any, path: Path) -> tuple[float, int]:
    from streams.publish import Publisher, publish_file

    publisher = Publisher(settings.kafka, settings.topics)
    try:
        t0 = time.perf_counter()
        summary = publish_file(path, publisher, max_record_bytes=settings.max_record_bytes)
        secs = time.perf_counter() - t0
    finally:
        publisher.close()
    if summary.rejected:
        log(f"  publisher rejected {dict(summary.rejected)}")
    return summary.sent / secs, summary.sent


def phase_bare(k: Kafka, procs: Procs, settings: Any, mode: str, expect: int, timeout: float) -> dict[str, Any]:
    result = procs.workdir / f"bare-{mode}.json"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "_bare",
        "--namespace",
        settings.namespace,
        "--partitions",
        str(settings.partitions),
        "--mode",
        mode,
        "--expect",
        str(expect),
        "--result",
        str(result),
    ]
    p = procs.start(f"bare-{mode}", cmd, worker_env(settings))
    try:
        deadline = time.monotonic() + timeout
        while not result.exists():
            if p.poll() is not None:
                raise RuntimeError(f"bare agent exited {p.returncode}:\n{procs.tail(p)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"bare agent ({mode}) did not count {expect:,} in {timeout:.0f}s")
            time.sleep(0.2)
        time.sleep(0.1)
        res = json.loads(result.read_text())
    finally:
        rc = procs.stop(p)
    if rc != 0:
        log(f"  bare agent exit {rc}:\n{procs.tail(p)}")
    res["rate"] = res["n"] / res["seconds"]
    log(
        f"  bare agent ({mode}): {res['n']:,} in {res['seconds']:.2f}s = {res['rate']:,.0f} events/s; "
        f"CPU of the agent's thread {res['cpu']:.2f}s, of which the pure work in the agent {res['pure']:.2f}s "
        f"and garbage collection {res['gc']:.2f}s"
    )
    return res


def phase_latency(
    k: Kafka, procs: Procs, settings: Any, path: Path, rate: float, seconds: float, timeout: float, stages: bool
) -> tuple[float, float]:
    from schemas.events import RoundCompleted
    from streams.kafka import create_topics
    from streams.publish import Publisher

    t = settings.topics
    create_topics(settings.kafka, t)
    # the broker stamps each record of these two topics with its append time: the reader's and
    # the worker's record timestamps then tell when the event and its round record were appended
    k.log_append_time([t.events.name, t.rounds.name])
    events = load_events(path, int(rate * seconds))
    staged = procs.workdir / "latency-stages.json"
    if stages:
        cmd = [sys.executable, str(Path(__file__).resolve()), "_stage_worker", "--result", str(staged)]
    else:
        cmd = [str(DEALTRAIL), "worker"]
    w = procs.start("latency-worker", cmd, worker_env(settings))
    k.wait_group(t.app_id, 1, 90, [w])
    time.sleep(2.0)  # let it finish its (empty) table recovery

    # The reader is a process of its own: as a thread beside the publisher it waited for the GIL,
    # and up to 200 ms of its own delay went into the figures (arrival - CreateTime p99).
    folder = procs.workdir / "latency-reader"
    folder.mkdir(parents=True, exist_ok=True)
    ready, expect, result = folder / "ready", folder / "expect.json", folder / "result.json"
    reader = procs.start(
        "latency-reader",
        [sys.executable, str(Path(__file__).resolve()), "_latency_reader", "--namespace", settings.namespace,
         "--partitions", str(settings.partitions), "--dir", str(folder)],
        {},
    )  # fmt: skip
    published: dict[str, float] = {}
    publisher = Publisher(settings.kafka, t)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            if reader.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the latency reader did not start:\n{procs.tail(reader)}")
            time.sleep(0.05)
        step = 1.0 / rate
        t0 = time.perf_counter()
        behind = 0.0
        for i, event in enumerate(events):
            target = t0 + i * step
            now = time.perf_counter()
            if now < target:
                time.sleep(target - now)
            else:
                behind = max(behind, now - target)
            if isinstance(event, RoundCompleted):
                published[event.event_id] = time.time()
            publisher.send(event)
        pub_secs = time.perf_counter() - t0
        publisher.flush(60)
        log(
            f"  published {len(events):,} events in {pub_secs:.1f}s ({len(events) / pub_secs:,.0f}/s, "
            f"max {behind * 1000:.0f} ms behind schedule), {len(published):,} RoundCompleted"
        )
        # wait for the worker to finish (committed == end), then for the reader to see the last
        # round records (it stops when it has them all, or 10 s after it is told which they are)
        k.wait_committed(t.app_id, t.events.name, len(events), timeout, [w])
        expect.write_text(json.dumps(sorted(published)))
        if reader.wait(40) != 0 or not result.exists():
            raise RuntimeError(f"the latency reader failed (exit {reader.returncode}):\n{procs.tail(reader)}")
        seen = json.loads(result.read_text())
    finally:
        publisher.close()
        procs.stop(reader)
        procs.stop(w)
    if stages:
        clocked = json.loads(staged.read_text()) if staged.exists() else {"stages": {}, "long_fetches": []}
        stage_figures(published, seen, clocked["stages"])
        slowest_rounds(published, seen, clocked)
        long_fetches = clocked["long_fetches"]
        log(f"  fetches the broker held over 0.3 s: {len(long_fetches)}")
        for _, took, asked in long_fetches[:8]:
            log(f"    {took * 1000:.0f} ms, partitions asked: {asked}")
    # completed_event_id -> (arrival wall time, CreateTime); RoundCompleted event_id -> when the
    # reader got it back from the events topic, and its partition there
    arrivals: dict[str, tuple[float, float]] = {e: (a, c) for e, (a, c) in seen["arrivals"].items()}
    in_topic: dict[str, float] = seen["in_topic"]
    partition_of: dict[str, int] = seen["partition_of"]
    matched = [(arrivals[e][0] - p, arrivals[e][1] - p) for e, p in published.items() if e in arrivals]
    if not matched:
        raise RuntimeError("no round record matched a published RoundCompleted")
    recv = sorted(m[0] * 1000 for m in matched)
    created = sorted(m[1] * 1000 for m in matched)
    # when this reader gets the event back tells how long the publisher's producer and the broker
    # took; the worker's share is from then to the round record's append (LogAppendTime)
    queued = sorted((in_topic[e] - p) * 1000 for e, p in published.items() if e in in_topic)
    # the worker's share of each round, in publish order
    both = [e for e in published if e in in_topic and e in arrivals]
    shares = [(arrivals[e][1] - in_topic[e]) * 1000 for e in both]
    worker = sorted(shares)

    log(
        f"  {len(matched):,} RoundCompleted matched to round records ({len(published) - len(matched):,} made none); "
        f"arrival latency ms p50 {pct(recv, 0.5):.0f} p90 {pct(recv, 0.9):.0f} p99 {pct(recv, 0.99):.0f} "
        f"max {recv[-1]:.0f} mean {statistics.fmean(recv):.0f}; "
        f"to the round record's append ms p50 {pct(created, 0.5):.0f} p99 {pct(created, 0.99):.0f}"
    )
    if queued and worker:
        log(
            f"  of which: publish call -> event read from its topic ms p50 {pct(queued, 0.5):.0f} "
            f"p99 {pct(queued, 0.99):.0f}; event read -> round record appended ms p50 {pct(worker, 0.5):.0f} "
            f"p99 {pct(worker, 0.99):.0f}"
        )
        # is a slow worker slow from the start and catching up, all along, or on some partitions?
        by_time = [sorted(shares[len(shares) * i // 4 : len(shares) * (i + 1) // 4]) for i in range(4)]
        by_time = [q for q in by_time if q]
        log("  worker's share by quarter of the phase, p50 ms: " + ", ".join(f"{pct(q, 0.5):.0f}" for q in by_time))
        parts: dict[int, list[float]] = {}
        for e, share in zip(both, shares, strict=True):
            parts.setdefault(partition_of[e], []).append(share)
        log(
            "  worker's share by events partition, p50 ms: "
            + ", ".join(f"{p}: {pct(sorted(v), 0.5):.0f}" for p, v in sorted(parts.items()))
        )
    return pct(recv, 0.5), pct(recv, 0.99)


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of the sorted ``xs`` (nearest rank)."""
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


STAGES = (
    ("publish call -> event appended by the broker", "published", "appended"),
    ("appended -> in a fetch response to the worker's Kafka consumer", "appended", "response"),
    ("fetch response -> the consumer returns it to Faust (aiokafka getmany)", "response", "polled"),
    ("returned -> Faust's consumer loop takes it (_to_message)", "polled", "fetched"),
    ("handed to Faust -> the agent hands its batch to the judge process", "fetched", "handed"),
    ("handed -> the judge's answer is back", "handed", "judged"),
    ("answer back -> round row sent to the producer (carried out in order)", "judged", "sent"),
    ("sent -> round record appended by the broker", "sent", "round_appended"),
    ("round record appended -> the downstream reader has it", "round_appended", "arrived"),
)
"""The latency phase's stages with ``--stages``: (label, from, to) clocks of a RoundCompleted."""


def stage_figures(published: dict[str, float], seen: dict[str, Any], stages: dict[str, dict[str, float]]) -> None:
    """Log p50/p90/p99 of each stage in :data:`STAGES` (ms) over the RoundCompleted events with
    every clock: the publish call, the stage worker's (``run_stage_worker``) and the reader's."""
    clocks = []
    for event_id, at in published.items():
        got = seen["arrivals"].get(event_id)
        st = stages.get(event_id)
        if got is None or st is None:
            continue
        clocks.append({**st, "published": at, "arrived": got[0], "round_appended": got[1]})
    if not clocks:
        log("  stages: no RoundCompleted has every clock (did the stage worker write its file?)")
        return
    log(f"  stages of {len(clocks):,} RoundCompleted, ms p50 / p90 / p99 / max:")
    for label, a, b in STAGES:
        xs = sorted((c[b] - c[a]) * 1000 for c in clocks if a in c and b in c)
        if xs:
            figures = f"{pct(xs, 0.5):.1f} / {pct(xs, 0.9):.1f} / {pct(xs, 0.99):.1f} / {xs[-1]:.1f}"
            log(f"    {label}: {figures} ({len(xs)})")


def slowest_rounds(published: dict[str, float], seen: dict[str, Any], clocked: dict[str, Any], n: int = 8) -> None:
    """Log the ``n`` slowest RoundCompleted (publish -> round record appended) with each stage in
    ms, and what the stage worker did meanwhile: state writes (entries, KB, ms) and calls to the
    judge that took over 50 ms (method, records, ms)."""
    rows = []
    for event_id, at in published.items():
        got, st = seen["arrivals"].get(event_id), clocked["stages"].get(event_id)
        if got is not None and st is not None:
            rows.append({**st, "published": at, "round_appended": got[1]})
    rows.sort(key=lambda c: c["round_appended"] - c["published"], reverse=True)
    if not rows:
        return
    log(f"  the {min(n, len(rows))} slowest RoundCompleted (ms from the publish call at each stage):")
    marks = ("appended", "response", "polled", "fetched", "handed", "judged", "sent", "round_appended")
    for c in rows[:n]:
        t0, t1 = c["published"], c["round_appended"]
        at = " ".join(f"{m} {(c[m] - t0) * 1000:.0f}" for m in marks if m in c)
        log(f"    {at}")
        for start, end, entries, size in clocked.get("writes", ()):
            if end >= t0 and start <= t1:
                log(
                    f"      state write at {(start - t0) * 1000:.0f}: {entries:.0f} entries, "
                    f"{size / 1024:.0f} KB, {(end - start) * 1000:.0f} ms"
                )
        for start, end, size, names in clocked.get("produced", ()):
            if end - start > 0.03 and end >= t0 and start <= t1:
                log(
                    f"      produce request at {(start - t0) * 1000:.0f}: {size / 1024:.0f} KB "
                    f"({names}), {(end - start) * 1000:.0f} ms"
                )
        for method, handed, answered, records in clocked.get("calls", ()):
            if answered - handed > 0.05 and answered >= t0 and handed <= t1:
                took = (answered - handed) * 1000
                log(f"      judge {method} ({records} records) at {(handed - t0) * 1000:.0f}: {took:.0f} ms")


def phase_profile(k: Kafka, procs: Procs, settings: Any, path: Path, out: Path, timeout: float) -> None:
    import pstats

    from streams.kafka import create_topics

    create_topics(settings.kafka, settings.topics)
    _, sent = phase_publish(settings, path)
    cmd = [sys.executable, str(Path(__file__).resolve()), "_profile_worker", "--result", str(out)]
    w = procs.start("profiled-worker", cmd, worker_env(settings))
    try:
        rate = time_workers(k, procs, [w], settings, sent, timeout)
    finally:
        procs.stop(w)
    log(f"  profiled worker: {rate:,.0f} events/s (under cProfile); stats in {out}")
    st = pstats.Stats(str(out), stream=sys.stderr)
    st.sort_stats("tottime").print_stats(30)
    st.sort_stats("cumulative").print_stats(45)


# ----------------------------------------------------------------------------------------------
def main(args: argparse.Namespace) -> int:
    from streams.kafka import create_topics
    from streams.publish import Publisher

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)  # run the finally: stop subprocesses, delete topics

    signal.signal(signal.SIGTERM, on_term)
    if args.quick:
        args.events = args.events or 20_000
        args.seconds = args.seconds or 8.0
    args.events = args.events or 200_000
    args.seconds = args.seconds or 25.0
    env_ns = os.environ.get("DEALTRAIL_NAMESPACE", "")
    base = env_ns if env_ns.startswith("bench-") else f"bench-{uuid.uuid4().hex[:8]}"
    path = ensure_events(args.events)
    # seconds allowed for a consumer to get through the events (the worker slows down as its
    # table states grow: about 500 events/s near 200,000 events)
    wait = 60 + args.events / 250

    one = make_settings(f"{base}-one", args.partitions)
    two = make_settings(f"{base}-two", args.partitions)
    lat = make_settings(f"{base}-lat", args.partitions)
    prof = make_settings(f"{base}-prof", args.partitions)
    namespaces = [s.namespace for s in (one, two, lat, prof)]
    groups = [f"{one.namespace}-bare-{mode}" for mode in ("take", "iter", "engine", "offload")] + [
        s.topics.app_id for s in (one, two, lat, prof)
    ]
    log(f"namespaces {base}-*, {args.events:,} events from {path.name}, {args.partitions} partitions")
    t_start = time.monotonic()
    k = Kafka(one)
    procs = Procs(Path(tempfile.mkdtemp(prefix="bench-stream-")))
    ok = False
    figures: dict[str, Any] = {}
    try:
        if args.latency_only:
            log(f"latency at {args.rate:,.0f} events/s for {args.seconds:.0f}s (latency only) ...")
            p50, p99 = phase_latency(k, procs, lat, path, args.rate, args.seconds, wait, args.stages)
            print(f"p50 latency ms: {p50:.0f}")
            print(f"p99 latency ms: {p99:.0f}", flush=True)
            ok = True
            return 0
        # 1. publisher
        create_topics(one.kafka, one.topics)
        log("publisher ...")
        figures["publisher"], sent = phase_publish(one, path)
        expect = k.end_total(one.topics.events.name)
        log(f"  {sent:,} sent, {expect:,} on {one.topics.events.name}: {figures['publisher']:,.0f} events/s")

        if args.designs:
            # the bare agent against the worker's pure work in the agent and in a child process
            log("designs (bare, engine in the agent, engine in a child process) ...")
            rates = {m: phase_bare(k, procs, one, m, expect, wait)["rate"] for m in ("take", "engine", "offload")}
            print(f"bare agent events/s: {rates['take']:.0f}")
            print(f"engine in the agent events/s: {rates['engine']:.0f}")
            print(f"engine in a child process events/s: {rates['offload']:.0f}")
            print(f"engine in the agent/bare ratio: {rates['engine'] / rates['take']:.2f}")
            print(f"engine in a child process/bare ratio: {rates['offload'] / rates['take']:.2f}", flush=True)
            ok = True
            return 0
        # 2. bare agent, both ways
        log("bare agent ...")
        bare = [phase_bare(k, procs, one, mode, expect, wait) for mode in ("take", "iter")]
        best = max(bare, key=lambda r: r["rate"])
        figures["bare"] = best["rate"]
        figures["bare_mode"] = (
            f"stream.take_events({one.worker.batch}, within={one.worker.within})"
            if best["mode"] == "take"
            else "plain iteration (async for value in stream)"
        )
        log(f"  faster: {figures['bare_mode']}")

        # 3. one worker on the pre-filled topic
        log("one worker ...")
        w = procs.start("worker-one", [str(DEALTRAIL), "worker"], worker_env(one))
        figures["worker"] = time_workers(k, procs, [w], one, expect, wait)

        # 4. two workers, one group
        log("two workers ...")
        create_topics(two.kafka, two.topics)
        ws = [procs.start(f"worker-two-{i}", [str(DEALTRAIL), "worker"], worker_env(two)) for i in (1, 2)]
        k.wait_group(two.topics.app_id, 2, 120, ws)
        time.sleep(2.0)
        k.wait_group(two.topics.app_id, 2, 60, ws)
        events2 = load_events(path, args.events)  # decoded before the pause, to keep it short
        publisher2 = Publisher(two.kafka, two.topics)
        for p in ws:
            os.kill(p.pid, signal.SIGSTOP)
        try:
            # The workers' session timeout is 12 s (streams.worker.faust_settings): a pause longer
            # than that makes the broker drop both members, and the phase would time a rebalance.
            t_pause = time.monotonic()
            sent2 = 0
            for event in events2:
                publisher2.send(event)
                sent2 += 1
                if not sent2 % 1000 and time.monotonic() - t_pause > PAUSE_SECONDS:
                    break
            publisher2.flush(120)
            log(f"  sent {sent2:,} pre-decoded events with both workers paused in {time.monotonic() - t_pause:.1f}s")
            if sent2 < len(events2):
                log(f"  (stopped at {PAUSE_SECONDS:.0f} s of pause, under the workers' 12 s session timeout)")
            if time.monotonic() - t_pause > 11:
                log("  WARNING: paused longer than 11 s (session timeout 12 s); the group may have rebalanced")
        finally:
            for p in ws:
                os.kill(p.pid, signal.SIGCONT)
            publisher2.close()
        del events2
        figures["two"] = time_workers(k, procs, ws, two, sent2, wait)

        # 5. latency at a steady rate
        log(f"latency at {args.rate:,.0f} events/s for {args.seconds:.0f}s ...")
        figures["p50"], figures["p99"] = phase_latency(k, procs, lat, path, args.rate, args.seconds, wait, args.stages)

        print(f"publisher events/s: {figures['publisher']:.0f}")
        print(f"bare agent events/s: {figures['bare']:.0f}")
        print(f"worker events/s: {figures['worker']:.0f}")
        print(f"worker/bare ratio: {figures['worker'] / figures['bare']:.2f}")
        print(f"two workers events/s: {figures['two']:.0f}")
        print(f"p50 latency ms: {figures['p50']:.0f}")
        print(f"p99 latency ms: {figures['p99']:.0f}", flush=True)
        log(f"bare agent mode reported: {figures['bare_mode']}")

        if args.profile:
            log("profiled worker ...")
            phase_profile(k, procs, prof, path, Path(args.profile).resolve(), wait * 3)
        log(f"done in {time.monotonic() - t_start:.0f}s")
        ok = True
        return 0
    finally:
        procs.stop_all()
        try:
            k.cleanup(namespaces, groups)
        finally:
            k.close()
            if ok and not args.keep_logs:  # the subprocesses' logs stay for a run that failed
                shutil.rmtree(procs.workdir, ignore_errors=True)
            else:
                log(f"logs of the subprocesses kept in {procs.workdir}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    sub = argv[0] if argv and argv[0].startswith("_") else None
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    if sub == "_bare":
        p.add_argument("--namespace", required=True)
        p.add_argument("--partitions", type=int, required=True)
        p.add_argument("--mode", choices=["take", "iter", "engine", "offload"], required=True)
        p.add_argument("--expect", type=int, required=True)
        p.add_argument("--result", required=True)
    elif sub in ("_profile_worker", "_stage_worker"):
        p.add_argument("--result", required=True)
    elif sub == "_latency_reader":
        p.add_argument("--namespace", required=True)
        p.add_argument("--partitions", type=int, required=True)
        p.add_argument("--dir", required=True)
    else:
        p.add_argument("--events", type=int, default=None, help="events to publish and consume (200,000)")
        p.add_argument("--quick", action="store_true", help="20,000 events and an 8 s latency phase")
        p.add_argument("--partitions", type=int, default=8, help="partitions of every bench namespace")
        p.add_argument("--rate", type=float, default=1000.0, help="events/s of the latency phase")
        p.add_argument("--seconds", type=float, default=None, help="length of the latency phase (25; 8 with --quick)")
        p.add_argument(
            "--stages", action="store_true", help="time the latency phase per stage (an in-process, clocked worker)"
        )
        p.add_argument("--latency-only", action="store_true", help="only the latency phase (no worker/bare ratio)")
        p.add_argument(
            "--designs",
            action="store_true",
            help="only the bare agent against the engine in the agent and in a child process (no worker)",
        )
        p.add_argument("--keep-logs", action="store_true", help="keep the subprocesses' logs (their folder is named)")
        p.add_argument("--profile", default=None, help="also profile a worker with cProfile; stats to this file")
    ns = p.parse_args(argv[1:] if sub else argv)
    ns.sub = sub
    return ns


if __name__ == "__main__":
    ns = parse_args(sys.argv[1:])
    if ns.sub == "_bare":
        run_bare(ns)
    elif ns.sub == "_profile_worker":
        run_profiled_worker(ns)
    elif ns.sub == "_stage_worker":
        run_stage_worker(ns)
    elif ns.sub == "_latency_reader":
        run_latency_reader(ns)
    else:
        sys.exit(main(ns))
