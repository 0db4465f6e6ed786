"""The Faust worker: a thin adapter around the pure engine.

One agent consumes the dealing-events topic in batches (``stream.take_events``), decodes each
message at the edge, applies :func:`streams.engine.apply` to the table's state, sends findings
and completed rounds to their topics, and writes each touched table's state to a Faust table
(backed by its changelog) once per batch. A message that fails validation goes to the
dead-letter topic with its reason; the agent goes on. Delivery is at-least-once: findings have
deterministic IDs and the engine ignores exact duplicates, so a redelivered batch is harmless.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from schemas import events as ev
from schemas.codec import DecodeError, decode
from streams.engine import EventRejected, TableState, apply
from streams.engine.summaries import round_row
from streams.kafka import faust_credentials
from streams.publish import dead_letter_value

if TYPE_CHECKING:
    import faust

    from dealtrail.settings import Settings

log = logging.getLogger("dealtrail.worker")
TABLE_NAME = "table-states"


def round_json(row: dict[str, Any]) -> bytes:
    """A ``rounds`` row as JSON bytes (timestamps in ISO 8601)."""
    return json.dumps({k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}).encode()


@dataclass(frozen=True)
class Stored:
    """A Faust table entry: a table's engine state, the offset of the last message applied,
    and the outbox: the findings and rounds that the last batch of this table produced.

    Messages of a table (one partition) at or below ``offset`` are redeliveries and are skipped,
    so at-least-once delivery never applies an event twice. Because a skipped message does not
    produce its findings again, the entry keeps them: a worker that loads an entry from the
    table (after a restart or a rebalance) sends its outbox again, so a crash between writing
    the state and delivering the findings loses nothing; the copies are absorbed downstream
    (deterministic finding IDs).
    """

    offset: int
    state: TableState
    findings: tuple[bytes, ...] = ()
    rounds: tuple[bytes, ...] = ()


STORED = TypeAdapter(Stored)


class StateCache:
    """Decoded table entries, valid while the Faust table still holds the same stored bytes.

    Decoding a state costs more than applying a batch, so the worker keeps the decoded entry
    and checks by identity that the table still holds the bytes it wrote (after a rebalance or
    a recovery it does not, and the entry is decoded again from the table).
    """

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[object, Stored]] = {}

    def get(self, key: bytes, stored: bytes | dict[str, Any] | None) -> tuple[Stored | None, bool]:
        """The entry for ``key`` given the table's current value ``stored`` (the JSON bytes this
        worker wrote, or the decoded JSON a changelog recovery put back), and whether it was
        just loaded from the table (so its outbox may not have been delivered)."""
        if stored is None:
            self._entries.pop(key, None)
            return None, False
        hit = self._entries.get(key)
        if hit is not None and hit[0] is stored:
            return hit[1], False
        entry = STORED.validate_python(stored) if isinstance(stored, dict) else STORED.validate_json(stored)
        self._entries[key] = (stored, entry)
        return entry, True

    def put(self, key: bytes, stored: bytes, entry: Stored) -> None:
        """Remember the entry just written to the table as ``stored``."""
        self._entries[key] = (stored, entry)


def faust_settings(settings: Settings) -> dict[str, Any]:
    """The ``faust.App`` settings of the worker (the benchmark's bare agent uses them too)."""
    topics = settings.topics
    datadir = os.path.join(tempfile.gettempdir(), "dealtrail-faust", f"{topics.app_id}-{os.getpid()}")
    os.makedirs(os.path.dirname(datadir), exist_ok=True)
    return {
        # Faust's partition assignor tells workers apart by URL: each worker needs its own,
        # even with the web server off, or a second worker on the same host gets nothing.
        "canonical_url": f"http://{socket.gethostname()}-{os.getpid()}:6066",
        "broker": [f"kafka://{b}" for b in settings.bootstrap.split(",")],
        "broker_credentials": faust_credentials(settings.kafka),
        "store": "memory://",
        # Faust keeps a small data folder per worker (the table state lives in memory and in
        # its changelog); keep it out of the working directory.
        "datadir": datadir,
        "web_enabled": False,
        "topic_partitions": topics.partitions,
        "topic_replication_factor": topics.replication,
        "consumer_auto_offset_reset": "earliest",
        "processing_guarantee": "at_least_once",
        "producer_linger": 0.05,
        "producer_acks": -1,
        "table_cleanup_interval": 3600.0,
        # A crashed worker's partitions move to the others after this many seconds (Faust's
        # default is 60 s); heartbeats run in the background, so long batches do not matter.
        "broker_session_timeout": 12.0,
        "broker_heartbeat_interval": 3.0,
        # Standby replicas stalled a second worker's recovery in our tests (faust-streaming
        # 0.15.3); the changelog alone restores a table's state when its partition moves.
        "table_standby_replicas": 0,
    }


def create_app(settings: Settings) -> faust.App:
    """Build the Faust application of the dealtrail worker.

    Args:
        settings: cluster, namespace (topic names, application ID) and worker tuning.

    Returns:
        The app, with the ``audit`` agent and the ``table-states`` table registered.
    """
    import faust

    topics = settings.topics
    app = faust.App(topics.app_id, **faust_settings(settings))
    source = app.topic(
        topics.events.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    findings_topic = app.topic(
        topics.findings.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    rounds_topic = app.topic(
        topics.rounds.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    dead_topic = app.topic(
        topics.dead_letter.name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    states = app.Table(
        TABLE_NAME,
        key_type=bytes,
        partitions=topics.partitions,
        use_partitioner=True,
    )
    # Keys are the table ID's bytes, unencoded, so the producer's partitioner puts each
    # changelog record in the partition of its key in the events topic (co-partitioning,
    # which state recovery after a rebalance relies on); values are JSON bytes made by
    # pydantic-core (several times faster than Faust's json codec on these states).
    states.key_serializer = "raw"  # type: ignore[attr-defined]
    states.value_serializer = "raw"  # type: ignore[attr-defined]
    cache = StateCache()
    batch, within = settings.worker.batch, settings.worker.within

    @app.agent(source)
    async def audit(stream: Any) -> None:
        async for events in stream.take_events(batch, within=within):
            touched: dict[bytes, Stored] = {}
            outbox: dict[bytes, tuple[list[bytes], list[bytes]]] = {}
            for event in events:
                msg = event.message
                raw: bytes = msg.value if isinstance(msg.value, bytes) else bytes(msg.value or b"")
                position = f"{msg.topic}[{msg.partition}]@{msg.offset}"
                try:
                    dealing = decode(raw)
                    key = dealing.table_id.encode()
                    entry = touched.get(key)
                    if entry is None:
                        entry, loaded = cache.get(key, states.get(key))
                        if loaded and entry is not None:  # maybe undelivered before a crash: send again
                            for value in entry.findings:
                                await findings_topic.send(key=key, value=value)
                            for value in entry.rounds:
                                await rounds_topic.send(key=key, value=value)
                    if entry is not None and msg.offset <= entry.offset:
                        continue  # a redelivery of a message this state already holds
                    before = entry.state if entry is not None else None
                    state, found = apply(before, dealing, raw)
                except (DecodeError, EventRejected) as exc:
                    await dead_topic.send(
                        key=msg.key, value=dead_letter_value(msg.topic, position, exc.reason, exc.detail, raw)
                    )
                    continue
                except Exception as exc:
                    log.exception("engine error at %s", position)
                    detail = f"{type(exc).__name__}: {exc}"[:500]
                    await dead_topic.send(
                        key=msg.key, value=dead_letter_value(msg.topic, position, "engine_error", detail, raw)
                    )
                    continue
                box = outbox.setdefault(key, ([], []))
                for f in found:
                    value = f.model_dump_json().encode()
                    box[0].append(value)
                    await findings_topic.send(key=key, value=value)
                if (
                    isinstance(dealing, ev.RoundCompleted)
                    and before is not None
                    and before.round is not None
                    and state.last_event_id == dealing.event_id
                ):
                    row = round_json(round_row(before.round, state, dealing))
                    box[1].append(row)
                    await rounds_topic.send(key=key, value=row)
                touched[key] = Stored(msg.offset, state, tuple(box[0]), tuple(box[1]))
            for key, entry in touched.items():
                stored = STORED.dump_json(entry)
                states[key] = stored
                cache.put(key, stored, entry)
            # Faust flushes its producer before it commits offsets (at-least-once), so these
            # changelog records are on the broker before any offset of this batch is committed.

    return app


def run_worker(settings: Settings) -> None:
    """Run the worker until it is stopped (SIGTERM or SIGINT); exits the process."""
    import faust

    app = create_app(settings)
    worker = faust.Worker(app, loglevel=settings.worker.loglevel, quiet=settings.worker.loglevel != "debug")
    worker.spinner = None
    worker.execute_from_commandline()
