"""The command line: the streaming pipeline: topics, publish, worker and the projector."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dealtrail.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from dealtrail.ingest.projector import Exporter, ProjectSummary
    from projections.store.store import BatchCounts
    from schemas.staff import StaffMemberRecorded
    from streams.publish import PublishSummary

from dealtrail.cli.access import start_access_forward
from dealtrail.cli.common import (
    _DB,
    _PERIODS,
    _TZ,
    _fail,
    _output_file,
    _output_folder,
    _unreachable,
    _zone_name,
    app,
    cannot_write,
    command_line,
    console,
    err,
    load,
    report_grace,
    report_signer,
    review_due,
    serve_metrics,
    writing,
)
from dealtrail.cli.console import _console_config, _host_port, _NotifyLoop, _start_notifier, uvicorn_config
from dealtrail.cli.copies import EVERY_HELP, REPLICA_DEFAULT, REPLICA_HELP, replica_timer
from dealtrail.cli.reports import _progress

topics_app = typer.Typer(help="Kafka topics of this namespace.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")


@topics_app.command("create")
def topics_create() -> None:
    """Create the events, findings, rounds, dead-letter, chain-heads and reviews topics (idempotent)."""
    from streams.kafka import create_topics

    settings = load()
    try:
        done = create_topics(settings.kafka, settings.topics)
    except Exception as exc:
        raise _fail(f"cannot create topics at {settings.kafka.bootstrap}: {type(exc).__name__}: {exc}") from None
    console.print(f"Kafka at {done.bootstrap} (brokers: {', '.join(done.brokers) or 'none listed'})")
    for t in settings.topics.all():
        console.print(
            f"{t.name}: {t.partitions} partitions" + (" (created)" if t.name in done.created else " (exists)")
        )


@topics_app.command("list")
def topics_list() -> None:
    """Print the topic names of this namespace."""
    for t in load().topics.all():
        console.print(t.name)


@app.command()
def publish(
    events: Annotated[Path, typer.Argument(help="Event file (JSON Lines).", exists=True, dir_okay=False)],
    rate: Annotated[
        float | None, typer.Option(min=1, help="Send at most this many lines per second (default: no limit).")
    ] = None,
    chain: Annotated[
        bool, typer.Option("--chain/--no-chain", help="Stamp the per-table hash chain on events that carry none.")
    ] = True,
) -> None:
    """Validate events and publish them to the events topic; invalid lines go to the dead-letter topic."""
    from streams.publish import Publisher, PublishError, publish_file

    settings = load()
    try:
        publisher = Publisher(
            settings.kafka, settings.topics, chain=chain, limits=settings.plausibility, reorder=settings.reorder.limits
        )
    except Exception as exc:
        raise _fail(f"cannot reach Kafka at {settings.kafka.bootstrap}: {type(exc).__name__}") from None
    try:
        with _progress() as progress:
            task = progress.add_task("publishing", total=events.stat().st_size)
            summary = publish_file(
                events,
                publisher,
                lambda n: progress.advance(task, n),
                rate=rate,
                max_record_bytes=settings.max_record_bytes,
            )
    except PublishError as exc:
        raise _fail(str(exc)) from None
    finally:
        publisher.close()
    for line in publish_report(summary, settings.topics.events.name, settings.topics.dead_letter.name):
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def publish_report(summary: PublishSummary, events_topic: str, dead_letter_topic: str) -> list[str]:
    """The lines ``publish`` prints: events sent, events already on the topic and skipped
    (copies of recent events, and older ones found on the topic: nothing recorded for either),
    and rejected lines by reason (each in the dead-letter topic)."""
    rejected = sum(summary.rejected.values())
    reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(summary.rejected.items()))
    return [
        f"published {summary.sent:,} events to {events_topic}",
        f"already on the topic, not sent again: {summary.copies + summary.already_published:,} "
        f"({summary.copies:,} exact copies of recent events; {summary.already_published:,} already_published, "
        "older events found on the topic unchanged)",
        f"rejected: {rejected:,} lines to {dead_letter_topic}" + (f" ({reasons})" if rejected else ""),
    ]


@app.command()
def worker() -> None:
    """Run a Faust worker: events topic -> rule engine -> findings and rounds topics."""
    from streams.worker import run_worker

    run_worker(load())


@app.command()
def project(
    db: Annotated[
        Path | None, typer.Option(help="DuckDB file to write (this process is its only writer).", show_default=_DB)
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Exit when caught up with the end of the topics.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Give up after this many seconds.", show_default="no limit")
    ] = None,
    report_every: Annotated[
        str | None,
        typer.Option(help="Also write each closed period's report: shift, day or cron.", show_default="none"),
    ] = None,
    reports: Annotated[
        Path | None, typer.Option(help="Folder of the scheduled reports.", show_default=_PERIODS)
    ] = None,
    tz: Annotated[str | None, typer.Option(help="Time zone of the report periods.", show_default=_TZ)] = None,
    batch: Annotated[
        int, typer.Option(min=1, max=1_000_000, help="Records per DuckDB transaction at most (records).")
    ] = 20_000,
    serve: Annotated[
        str | None,
        typer.Option(
            "--serve",
            metavar="HOST:PORT",
            help="Also run the compliance console on HOST:PORT in this process (reviews go through the reviews topic).",
            show_default="no console",
        ),
    ] = None,
    replica: Annotated[Path | None, typer.Option(help=REPLICA_HELP, show_default=REPLICA_DEFAULT)] = None,
    replica_every: Annotated[
        str | None, typer.Option(help=EVERY_HELP, show_default="$DEALTRAIL_REPLICA__EVERY seconds, else 5m")
    ] = None,
) -> None:
    """Project the events, findings, rounds, dead-letter and reviews topics into DuckDB.

    With --report-every, the projector (the file's only writer) also writes each closed
    period's report from its own connection, since no other process may open the file then,
    and a new revision of each report that events, reviews or a re-audit made stale (checked
    every DEALTRAIL_REPORTS__CHECK_SECONDS).
    With --serve, it also runs the console (and the notifications, when configured) over the
    same DuckDB database: reviews made there are published to the reviews topic and stored
    by this projector; users are managed on the console's admin page.
    Exit 5 when the store cannot be written (a full disk, a read-only or vanished store): one
    line says what it kept and how to resume (it resumes from the offsets stored with the rows).
    """
    settings = load()
    target = db or settings.db
    tz = _zone_name(tz, settings)
    resume = command_line(
        "dealtrail", "project", "--db", target, "--once" if once else None,
        *(("--report-every", report_every, "--tz", tz) if report_every else ()),
        *(("--reports", reports) if reports else ()), *(("--serve", serve) if serve else ()),
        *(("--replica", replica) if replica else ()),
    )  # fmt: skip
    with writing(target, resume, note="; it goes on from the Kafka offsets stored with them"):
        _project(settings, target, once, timeout, report_every, reports, tz, batch, serve, replica, replica_every)


def _project(
    settings: Settings,
    db: Path,
    once: bool,
    timeout: float | None,
    report_every: str | None,
    reports: Path | None,
    tz: str,
    batch: int,
    serve: str | None,
    replica: Path | None,
    replica_every: str | None,
) -> None:
    """The projector run of :func:`project` into the store ``db`` (its writer closed on return)."""
    from dealtrail.ingest.projector import KafkaUnreachableError
    from dealtrail.ingest.projector import project as run
    from projections.store.discard import remove_if_empty
    from projections.store.failures import write_failure
    from projections.store.store import Store
    from streams.link import KafkaLink

    spec = None
    if report_every is not None:
        from dealtrail.reporting.schedule import Schedule, ScheduleError

        try:
            spec = Schedule(report_every, tz)
        except ScheduleError as exc:
            raise _fail(str(exc)) from None
    address = _host_port(serve) if serve is not None else None
    _output_file(db, "--db")
    copies = replica_timer(settings, replica, replica_every, db)
    if spec is not None:
        _output_folder(reports or settings.out / "periods", "--reports")
    signer = report_signer(settings) if spec is not None else None  # a bad key file: one line, before the store
    exporter = _exporter(settings, tz)  # likewise: a bad export location or key, before the store
    created = not db.exists()
    try:
        store = Store(db, settings.duckdb_memory_limit)
    except Exception as exc:
        if write_failure(exc, db) is not None:
            raise  # a read-only store, a full disk: said by writing()
        raise cannot_write(db, exc) from None

    def say(line: str) -> None:
        # --once is a command a user waits on: a broker that never answered is its one error line
        if not once or link.ever_connected:
            err.print(line, soft_wrap=True, markup=False, highlight=False)

    link = KafkaLink(settings.kafka.bootstrap, say)
    stop = _stop_on_signals()
    lock = threading.Lock()
    hosted: _HostedConsole | None = None
    health: object | None = None
    unreachable: KafkaUnreachableError | None = None
    failed = True
    metrics = None
    try:
        with store:
            metrics = serve_metrics(settings, db, (settings.topics.projector_group,))
            if address is not None:
                own = (reports or settings.out / "periods") if spec is not None else None  # its shift reports
                hosted = _host_console(settings, store, lock, address, db, link, stop, own)
            elif settings.health.port is not None and not once:
                health = _serve_health(settings, link)
            # the access log as the projector stores it, to the SIEM (a thread; a batch never waits)
            forward = start_access_forward(settings.access_forward, store.con, db, settings.property_name)
            try:
                summary = run(
                    settings,
                    store,
                    once=once,
                    max_seconds=timeout,
                    max_records=batch,
                    schedule=spec,
                    reports=reports or settings.out / "periods",
                    write_lock=lock,
                    on_batch=hosted.batch_stored if hosted is not None else None,
                    property_name=settings.property_name,
                    review_due=review_due(settings),
                    console_url=settings.console_url,
                    report_grace=report_grace(settings),
                    report_check_seconds=settings.reports.check_seconds,
                    report_max_listed=settings.reports.max_listed,
                    report_signer=signer,
                    report_control=settings.control.report_args,
                    exporter=exporter,
                    link=link,
                    stop=stop,
                    replica=copies,
                )
            except TimeoutError as exc:
                raise _fail(str(exc), code=1) from None
            except KafkaUnreachableError as exc:
                unreachable = exc
            finally:
                if hosted is not None:
                    hosted.stop()
                if forward is not None:  # its last round, then the store closes
                    forward.stop()
                if health is not None:
                    health.should_exit = True  # type: ignore[attr-defined]
        failed = unreachable is not None
    finally:
        if metrics is not None:
            metrics.stop()
        _restore_signals(stop)
        if created and failed:
            remove_if_empty(db)  # a store this run made and that holds nothing: no empty file left
    if unreachable is not None:
        if link.ever_connected:
            raise _fail(f"lost Kafka at {settings.kafka.bootstrap} ({unreachable}); {db} keeps what was projected")
        raise _unreachable(settings, unreachable) from None
    console.print(project_line(summary, db, stop.is_set()))


def project_line(summary: ProjectSummary, db: Path, stopped: bool) -> str:
    """The projector's closing line: records read, duplicate deliveries skipped (as the audit's
    summary counts them) and the rows each table gained."""
    w = summary.written
    return (
        ("stopped: " if stopped else "")
        + f"projected {summary.records:,} records in {summary.batches} batches into {db}, "
        f"{summary.duplicates:,} duplicate deliveries skipped: "
        f"{w.events:,} events, {w.findings:,} finding revisions, {w.rounds:,} rounds, {w.dead_letters:,} dead letters, "
        f"{w.reviews:,} reviews"
    )


class _Stop(threading.Event):
    """Set by SIGTERM or SIGINT (:func:`_stop_on_signals`); remembers the handlers it replaced."""

    previous: dict[int, object]


def _stop_on_signals() -> _Stop:
    """An event set by the first SIGTERM or SIGINT, so that a long-running command ends its work
    in progress, writes its state and exits within seconds (compose's grace is 10 s), even while
    Kafka is away; a second signal interrupts at once."""
    import signal

    stop = _Stop()

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    stop.previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            stop.previous[sig] = signal.signal(sig, on_signal)
    return stop


def _restore_signals(stop: _Stop) -> None:
    import signal

    for sig, handler in stop.previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


def _publish_staff(settings: Settings) -> Callable[[Sequence[StaffMemberRecorded]], None]:
    """The console's staff sink in the streaming deployment: each roster change is published to
    the staff topic by a producer made for it (changes are rare) and stored by the projector.

    The sink raises when the broker does not take the change (the admin page says so)."""

    def send(events: Sequence[StaffMemberRecorded]) -> None:
        from streams.staff_publish import StaffPublisher

        publisher = StaffPublisher(settings.kafka, settings.topics)
        try:
            publisher.send(events)
        finally:
            publisher.close(timeout=5)

    return send


def _readiness(settings: Settings, link: object) -> Callable[[], dict[str, object]]:
    """The ``/readyz`` body of a process whose Kafka connection ``link`` (a ``KafkaLink``) follows."""
    from streams.link import KafkaLink

    assert isinstance(link, KafkaLink)
    bound = settings.health.max_lag_seconds
    return lambda: link.status().as_json(bound)


def _serve_health(settings: Settings, link: object) -> object:
    """Serve ``/healthz`` and ``/readyz`` on ``health.host:health.port`` (uvicorn in a thread).

    Returns:
        The uvicorn server (set ``should_exit`` to stop it).
    """
    import time

    import uvicorn

    from dealtrail.console.health import health_app

    host, port = settings.health.host, settings.health.port
    assert port is not None
    server = uvicorn.Server(
        uvicorn.Config(health_app(_readiness(settings, link)), host=host, port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="dealtrail-health", daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.05)
    if not server.started:
        raise _fail(f"cannot serve the health endpoints on {host}:{port} (DEALTRAIL_HEALTH__PORT in use?)", code=1)
    return server


class _HostedConsole:
    """The console (uvicorn in a thread), its review producer and its notifier, in the projector's
    process (``dealtrail project --serve``)."""

    def __init__(
        self, server: object, thread: threading.Thread, producer: list[object], notifier: _NotifyLoop | None
    ) -> None:
        self.server, self.thread, self.producer, self.notifier = server, thread, producer, notifier

    def batch_stored(self, added: BatchCounts) -> None:
        """After each projector batch: wake the notifier when the batch stored findings."""
        if self.notifier is not None and added.findings:
            self.notifier.wake.set()

    def stop(self) -> None:
        """Stop serving (requests in flight finish), then the notifier and the producer (within
        seconds, even while Kafka is away)."""
        self.server.should_exit = True  # type: ignore[attr-defined]
        self.thread.join(timeout=5)
        if self.notifier is not None:
            self.notifier.stop()
        for p in self.producer:
            p.close(timeout=1)  # type: ignore[attr-defined]


def _host_console(
    settings: Settings,
    store: object,
    lock: threading.Lock,
    address: tuple[str, int],
    db: Path,
    link: object,
    stop: threading.Event,
    reports: Path | None = None,
) -> _HostedConsole:
    """Start the console over the projector's store: reviews to the reviews topic, users and
    notifications through the store's connection under the projector's write lock; its Reports
    page lists ``reports`` (the projector's scheduled reports) unless the settings name a folder.

    The console serves at once, whether Kafka answers or not: its review producer connects in
    the background (a review is answered 503 until it has, and while the cluster is away), and
    its ``/readyz`` follows the projector's connection (``link``)."""
    import time

    import uvicorn

    from dealtrail.console.app import ConsoleConfig, create_app
    from projections.models.reviews import ReviewEvent
    from projections.store.store import Store
    from schemas.access import AccessEntry
    from streams.access_publish import AccessPublisher, AccessPublishError
    from streams.link import Backoff
    from streams.review_publish import ReviewPublisher, ReviewPublishError

    assert isinstance(store, Store)
    config = _console_config(settings, db, reports=reports, echo_access=True)
    assert isinstance(config, ConsoleConfig)
    producer: list[ReviewPublisher | AccessPublisher] = []  # the review producer, then the access-log one

    def publish(review: ReviewEvent) -> None:
        reviews = [p for p in producer if isinstance(p, ReviewPublisher)]
        if not reviews:
            raise ReviewPublishError("the console is still connecting to Kafka")
        reviews[0].send(review)

    def publish_access(entry: AccessEntry) -> None:
        found = [p for p in producer if isinstance(p, AccessPublisher)]
        if not found:
            raise AccessPublishError("the console is still connecting to Kafka")
        found[0].send(entry)

    def connect() -> None:
        backoff = Backoff(first=0.5, cap=5.0)
        while not stop.is_set():
            try:
                publisher = ReviewPublisher(settings.kafka, settings.topics)
            except Exception:  # the projector's link says that Kafka is away; retry quietly
                stop.wait(backoff.next())
                continue
            try:
                access_publisher = AccessPublisher(settings.kafka, settings.topics)
            except Exception:
                publisher.close(timeout=1)
                stop.wait(backoff.next())
                continue
            if stop.is_set():
                publisher.close(timeout=1)
                access_publisher.close(timeout=1)
            else:
                producer.extend([publisher, access_publisher])
            return

    console_app = create_app(store, config, review_sink=publish, write_lock=lock, access_sink=publish_access)
    console_app.state.staff_sink = _publish_staff(settings)  # roster changes travel as reviews do
    console_app.state.readiness = _readiness(settings, link)
    host, port = address
    server_config = uvicorn_config(console_app, settings, host, port)
    assert isinstance(server_config, uvicorn.Config)
    server = uvicorn.Server(server_config)
    thread = threading.Thread(target=server.run, name="dealtrail-console", daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.05)
    if not server.started:
        raise _fail(f"cannot serve the console on {host}:{port} (is the address in use or not this host's?)", code=1)
    threading.Thread(target=connect, name="dealtrail-review-producer", daemon=True).start()
    notifier = _start_notifier(settings, store, lock, config.poll_seconds)
    shown = f"[{host}]" if ":" in host else host
    err.print(
        f"console: http://{shown}:{port}/ in the projector's process over {db} "
        "(reviews go through the reviews topic; users on its admin page)",
        soft_wrap=True,
    )
    return _HostedConsole(server, thread, producer, notifier)  # type: ignore[arg-type]


def _exporter(settings: Settings, tz: str) -> Exporter | None:
    """What the projector exports each closed gaming day with (``DEALTRAIL_EXPORT__TO``); None
    when unset. A location or key that cannot be used is one ``error:`` line."""
    if not settings.export.to:
        return None
    from dealtrail.ingest.projector import Exporter
    from dealtrail.reporting.objectstore import LocationError, open_location
    from projections.records.signing import SigningError, load_key

    if settings.export.property_id is None:
        raise _fail("DEALTRAIL_EXPORT__TO is set: set DEALTRAIL_EXPORT__PROPERTY_ID too")
    try:
        location = open_location(settings.export.to, settings.export.s3_endpoint)
        key = load_key(settings.signing.key_file)
    except (LocationError, SigningError) as exc:
        raise _fail(f"exporting the gaming days: {exc}") from None
    return Exporter(location, settings.export.property_id, tz, key)
