"""Prometheus metrics of dealtrail's processes (the worker, the projector, the console), with the
standard client library (``prometheus_client``), served on ``DEALTRAIL_METRICS__HOST``/``PORT``
when set (:func:`serve`).

The metrics are declared once, here, in the client's default registry; each process fills the
ones it has (the worker counts events, findings and dead letters; the projector times its store
writes; a store's writer reports the store's size and the forwarder's backlog) and serves them all
(a metric a process never touches shows no sample, or 0). Names and labels follow Prometheus's
conventions: ``dealtrail_`` prefix, ``_total`` for counters, base units (seconds, bytes) in the
name. Labels carry no data the access log guards: no user, table, client or finding ID, only
rule IDs, severities, dead-letter reasons, consumer groups, topics and partitions, and the kind
of a forwarding target.

Consumer lag is read from the broker at each scrape (:class:`LagCollector`): the committed offset
of each consumer group against the end of each partition, as ``dealtrail status`` prints it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from dealtrail.settings import KafkaSettings

log = logging.getLogger("dealtrail.metrics")

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Upper bounds of the latency histograms (seconds): a round record within milliseconds of its
last event when the worker keeps up, up to minutes behind a backlog or a reorder window."""

EVENTS_JUDGED = Counter(
    "dealtrail_events_judged", "Dealing events the worker's rule engine applied (a redelivered copy is not applied)."
)
DEAD_LETTERS = Counter(
    "dealtrail_dead_letters", "Records the worker sent to the dead-letter topic, by reason.", ["reason"]
)
FINDINGS = Counter(
    "dealtrail_findings",
    "Finding revisions the worker sent to the findings topic, by rule and severity.",
    ["rule", "severity"],
)
ROUNDS = Counter("dealtrail_rounds", "Completed rounds the worker sent to the rounds topic.")
ROUND_LATENCY = Histogram(
    "dealtrail_round_record_latency_seconds",
    "From the broker's timestamp of the newest event of the batch that completed a round (its publish) "
    "to the broker's acknowledgement of the round record.",
    buckets=LATENCY_BUCKETS,
)
REORDER_HELD = Gauge(
    "dealtrail_reorder_window_events", "Events the worker's reorder windows hold, all tables together."
)
STORE_WRITE = Histogram(
    "dealtrail_store_write_seconds",
    "Time of one projector batch's DuckDB transaction (rows and offsets together).",
    buckets=LATENCY_BUCKETS,
)
STORE_RECORDS = Counter("dealtrail_store_records", "Kafka records the projector read and stored, by topic.", ["topic"])
CONSOLE_REQUESTS = Counter(
    "dealtrail_console_requests",
    "Requests the console answered, by method, route template (no IDs) and status class (2xx, 4xx ...).",
    ["method", "route", "status"],
)
CONSOLE_SECONDS = Histogram(
    "dealtrail_console_request_seconds", "Time the console took to answer a request.", buckets=LATENCY_BUCKETS
)
FORWARD_PENDING = Gauge(
    "dealtrail_access_forward_pending_entries",
    "Access-log entries stored and not yet acknowledged by a forwarding target, by target kind.",
    ["target"],
)
FORWARD_SENT = Counter(
    "dealtrail_access_forward_entries",
    "Access-log entries a forwarding target acknowledged (RELP, file) or took (TCP syslog), by target kind.",
    ["target"],
)


class StoreCollector(Collector):
    """The store's size (file and write-ahead log) and its filesystem's free bytes, read at each scrape.

    Args:
        db: the DuckDB file.
    """

    def __init__(self, db: Path) -> None:
        self.db = db

    def collect(self) -> Iterable[GaugeMetricFamily]:
        """The two gauges now (a missing file counts 0 bytes)."""
        size = 0
        for path in (self.db, self.db.with_name(self.db.name + ".wal")):
            with contextlib.suppress(OSError):
                size += os.stat(path).st_size
        yield GaugeMetricFamily("dealtrail_store_size_bytes", "Size of the DuckDB store (file and WAL).", value=size)
        try:
            free = shutil.disk_usage(self.db.parent if str(self.db.parent) else Path(".")).free
        except OSError:
            return
        yield GaugeMetricFamily(
            "dealtrail_store_filesystem_free_bytes",
            "Bytes free (to this user) on the filesystem that holds the store.",
            value=free,
        )


class LagCollector(Collector):
    """Consumer lag per partition, read from the broker at each scrape (:class:`streams.lag.LagReader`).

    ``dealtrail_consumer_group_lag{group,topic,partition}`` (records behind the end),
    ``dealtrail_consumer_group_committed_offset`` (where the group resumes; absent before its first
    commit), ``dealtrail_consumer_group_members{group}`` and ``dealtrail_consumer_group_lag_up``
    (1 when the broker answered this scrape, 0 when it did not; the other series are then absent).

    Args:
        kafka: the cluster settings.
        groups: ``(group, topics)``: each group, and the topics listed for it even before its
            first commit.
    """

    def __init__(self, kafka: KafkaSettings, groups: Sequence[tuple[str, Sequence[str]]]) -> None:
        from streams.lag import LagReader

        self.groups = list(groups)
        self._reader = LagReader(kafka, "dealtrail-metrics-lag")
        self._lock = threading.Lock()

    def collect(self) -> Iterable[GaugeMetricFamily]:
        """The gauges now (the broker asked within :data:`streams.lag.REQUEST_MS`)."""
        up = GaugeMetricFamily(
            "dealtrail_consumer_group_lag_up", "1 if the broker answered the lag query of this scrape."
        )
        lag = GaugeMetricFamily(
            "dealtrail_consumer_group_lag",
            "Records of a partition after the consumer group's committed offset (last stable offset minus committed).",
            labels=["group", "topic", "partition"],
        )
        committed = GaugeMetricFamily(
            "dealtrail_consumer_group_committed_offset",
            "The consumer group's committed offset of a partition (the next record it reads).",
            labels=["group", "topic", "partition"],
        )
        members = GaugeMetricFamily(
            "dealtrail_consumer_group_members", "Consumers in the consumer group now.", labels=["group"]
        )
        with self._lock:
            try:
                read = []
                for group, topics in self.groups:
                    read += self._reader.read([group], topics)
            except Exception as exc:  # the broker is away: say so in the metric, not a failed scrape
                log.debug("lag not read: %s", exc)
                up.add_metric([], 0)
                yield up
                return
        up.add_metric([], 1)
        for g in read:
            members.add_metric([g.group], len(g.members))
            for p in g.partitions:
                labels = [g.group, p.topic, str(p.partition)]
                lag.add_metric(labels, p.lag)
                if p.committed is not None:
                    committed.add_metric(labels, p.committed)
        yield from (up, lag, committed, members)

    def close(self) -> None:
        """Close the reader's clients."""
        with self._lock:
            self._reader.close()


class MetricsServer:
    """The ``/metrics`` HTTP server of a process (prometheus_client's, in a daemon thread).

    Args:
        host: the address to listen on.
        port: the port (0: any free port; :attr:`port` says which).
        collectors: collectors to register for the process's life (unregistered by :meth:`stop`).
        registry: the registry served (the default one).

    Raises:
        OSError: the address cannot be listened on (in use, not local).
    """

    def __init__(
        self, host: str, port: int, collectors: Sequence[Collector] = (), registry: CollectorRegistry = REGISTRY
    ) -> None:
        self.registry = registry
        self.collectors = list(collectors)
        for c in self.collectors:
            registry.register(c)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except BaseException:
            self._unregister()
            raise
        self.host, self.port = host, int(self._server.server_port)

    def _unregister(self) -> None:
        for c in self.collectors:
            with contextlib.suppress(KeyError):
                self.registry.unregister(c)
            close: Callable[[], Any] | None = getattr(c, "close", None)
            if close is not None:
                close()

    def stop(self) -> None:
        """Stop serving and unregister the process's collectors."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._unregister()
