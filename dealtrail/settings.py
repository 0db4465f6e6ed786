"""Settings: one frozen pydantic-settings object, read by entry points only and passed down.

Environment variables use the ``DEALTRAIL_`` prefix with ``__`` between section and name
(``DEALTRAIL_KAFKA__SECURITY_PROTOCOL``); the bootstrap servers also have the short form
``DEALTRAIL_KAFKA_BOOTSTRAP``.

The bootstrap servers resolve once, here, in this order (first set wins): a command's
``--bootstrap`` flag (:meth:`Settings.with_bootstrap`), ``DEALTRAIL_KAFKA_BOOTSTRAP``,
``DEALTRAIL_KAFKA__BOOTSTRAP``, the default ``127.0.0.1:9092``. The result is
``settings.kafka.bootstrap``, which every Kafka client reads (admin, producer, consumers, Faust,
the worker's re-read, replay and verify); no other component holds a default of its own.
"""

from __future__ import annotations

import os
import tempfile
from datetime import time, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.bounds import DEFAULT_MAX_CLOCK_SKEW, DEFAULT_MAX_SEQ_JUMP, MAX_SEQ
from streams.engine.reorder import DEFAULT_EVENTS, DEFAULT_SECONDS, ReorderLimits
from streams.topics import Topics

if TYPE_CHECKING:
    from streams.engine.engine import Plausibility


Compression = Literal["zstd", "lz4", "snappy", "gzip", "none"]
"""The codecs Kafka defines, as the ``compression`` setting names them."""


class KafkaSettings(BaseModel):
    """How to reach the Kafka cluster (both the kafka-python and the aiokafka/Faust clients).

    Attributes:
        bootstrap: comma-separated ``host:port`` list.
        security_protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
        sasl_mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with SASL_*).
        sasl_username / sasl_password: SASL credentials (the password is never printed).
        ssl_cafile / ssl_certfile / ssl_keyfile: PEM files for SSL.
        connect_timeout: how long ``project --once`` and ``replay``/``verify --source kafka``
            wait for the cluster (seconds, default 5; kafka-python's ``bootstrap_timeout_ms``):
            when no broker has answered for this long, they stop with one error line. A
            long-running ``project``, the workers and the publisher wait for the cluster instead,
            so that they ride out an outage of any length (the publisher up to 15 minutes).
        compression: the codec dealtrail's producers compress their record batches with
            (``publish`` and the worker): zstd (default), lz4, snappy, gzip or none. A batch is
            compressed as a whole, so the many small events of a batch compress well, and a
            single record costs a few bytes more. Every
            consumer of dealtrail reads each of them whatever this says (docs/streaming.md,
            "Producer contract").
    """

    model_config = ConfigDict(frozen=True)

    bootstrap: str = "127.0.0.1:9092"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    connect_timeout: float = Field(default=5.0, gt=0, le=600)
    compression: Compression = "zstd"


def default_datadir() -> Path:
    """Where Faust's data folders go by default: ``$XDG_STATE_HOME/dealtrail/faust``, else
    ``~/.local/state/dealtrail/faust`` (in the container ``/data/.local/state/dealtrail/faust``),
    else (no home folder) ``dealtrail-<uid>/faust`` under the system temp folder."""
    state = os.environ.get("XDG_STATE_HOME", "")
    if state and Path(state).is_absolute():
        return Path(state) / "dealtrail" / "faust"
    try:
        return Path.home() / ".local" / "state" / "dealtrail" / "faust"
    except RuntimeError:  # no HOME and no password entry
        return Path(tempfile.gettempdir()) / f"dealtrail-{os.getuid()}" / "faust"


class WorkerSettings(BaseModel):
    """Faust worker tuning.

    Attributes:
        batch: events per ``stream.take`` batch (events).
        within: seconds to wait for a batch to fill (seconds).
        state_interval: seconds between two writes of the changed tables' states to the
            worker's table and its changelog (seconds; ``DEALTRAIL_WORKER__STATE_INTERVAL``,
            default 1.0). The events applied in between stay unacknowledged until their
            tables' states are written, so no offset is committed before the state that holds
            it; findings and rounds are sent as soon as each event is applied, whatever this is.
        fetch_max_wait: seconds the broker may hold one of the worker's fetches waiting for
            records (seconds; ``DEALTRAIL_WORKER__FETCH_MAX_WAIT``, default 0.05). The consumer
            has one fetch out at a time, and one that names only quiet partitions is held this
            long while records of the busy ones wait: it bounds that delay (Faust's own 1.5 s
            put about a second into the time from an event to its round record at 1,000
            events/s). A lower value means more fetches while the stream is quiet.
        loglevel: the worker's log level.
        datadir: the folder under which each worker process keeps its own Faust data folder
            (``<app id>-<pid>``, owner-only, removed when the worker stops cleanly);
            ``DEALTRAIL_WORKER__DATADIR``, default :func:`default_datadir`.
        alive_file: a file the worker touches every few seconds while its event loop runs,
            through broker outages too (``DEALTRAIL_WORKER__ALIVE_FILE``; a liveness check
            compares its age with a bound, as docker-compose.yml does); unset: none.
    """

    model_config = ConfigDict(frozen=True)

    batch: int = Field(default=500, ge=1, le=100_000)
    within: float = Field(default=0.02, gt=0, le=60)
    state_interval: float = Field(default=1.0, gt=0, le=60)
    fetch_max_wait: float = Field(default=0.05, gt=0, le=60)
    loglevel: str = "warning"
    datadir: Path = Field(default_factory=default_datadir)
    alive_file: Path | None = None


DEFAULT_MAX_RECORD_BYTES = 1024 * 1024
"""The default longest event record (bytes): 1 MiB, as Kafka's default record limit."""


class HealthSettings(BaseModel):
    """The health endpoints (``/healthz``: alive; ``/readyz``: connected to Kafka and caught up).

    The console serves them on its own port (``dealtrail serve``, ``dealtrail project --serve``);
    a projector without the console serves them on ``host:port`` when ``port`` is set.

    Attributes:
        host: the address the projector's health server listens on (``DEALTRAIL_HEALTH__HOST``,
            default 127.0.0.1).
        port: its port (``DEALTRAIL_HEALTH__PORT``); unset: no health server of its own.
        max_lag_seconds: ``/readyz`` answers 503 once the process has had records left to read
            for longer than this (seconds; ``DEALTRAIL_HEALTH__MAX_LAG_SECONDS``, default 60).
    """

    model_config = ConfigDict(frozen=True)

    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=1, le=65535)
    max_lag_seconds: float = Field(default=60.0, gt=0, le=86_400)


class MetricsSettings(BaseModel):
    """The Prometheus metrics endpoint (``/metrics``, the text format) of the worker, the
    projector and the console: events judged, dead letters, findings, latencies, the reorder
    window, consumer lag per partition, the forwarder's backlog, the store's size and free disk
    (docs/operating.md, "Metrics"). Served without authentication: it holds no user, table or
    finding, only counts by rule, severity, reason, group, topic and partition.

    Attributes:
        host: the address the endpoint listens on (``DEALTRAIL_METRICS__HOST``, default 127.0.0.1).
        port: its port (``DEALTRAIL_METRICS__PORT``); unset: no metrics endpoint. Each process
            run needs its own port (set it per process: worker, projector, console).
    """

    model_config = ConfigDict(frozen=True)

    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=1, le=65535)


class ReorderSettings(BaseModel):
    """The reorder window (rulebook decision 10.1.2; :mod:`streams.engine.reorder`): within a
    table, events are applied in seq order, whatever order they arrive in, by the audit, the
    worker and the re-audit alike.

    Attributes:
        events: events a table's window holds at most (``DEALTRAIL_REORDER__EVENTS``, default
            500); once more are held, the lowest missing seq is given up on (a
            ``DT-sequence-gap``) and it is judged as a late arrival if it comes after all.
            0 applies events in arrival order.
        seconds: event-time seconds the window waits for a missing seq
            (``DEALTRAIL_REORDER__SECONDS``, default 30), from the lowest held event's
            ``occurred_at`` to that of the newest arrival. See the module for why these defaults.
        idle: wall-clock seconds after which the worker releases what a table's window holds
            when no event of that table nor of its partition has arrived since and the worker
            has taken every message of the partition up to the high watermark its consumer has
            seen (``DEALTRAIL_REORDER__IDLE``, default 5): the stream's "end of input" (the
            audit and the re-audit release everything at the end of their input); a missing
            event still queued behind other tables' messages is waited for.
    """

    model_config = ConfigDict(frozen=True)

    events: int = Field(default=DEFAULT_EVENTS, ge=0, le=100_000)
    seconds: float = Field(default=DEFAULT_SECONDS, ge=0, le=86_400)
    idle: float = Field(default=5.0, gt=0, le=3600)

    @property
    def limits(self) -> ReorderLimits:
        """The window's bounds as the engine module takes them."""
        return ReorderLimits(self.events, self.seconds)


DispositionField = Literal["corrective_action", "note"]
"""What a disposition can be required to carry besides its cause."""


class ReviewSettings(BaseModel):
    """When a finding's review (its disposition) is due, and what a disposition must carry,
    per severity.

    Attributes:
        due_hours_voiding: hours after detection for a voiding finding (hours).
        due_hours_integrity: hours after detection for an integrity finding (hours).
        due_hours_procedural: hours after detection for a procedural finding (hours).
        disposition_needs_voiding: what a disposition of a voiding finding must carry besides
            its cause, as JSON: ``["corrective_action", "note"]`` (a cause is always required).
        disposition_needs_integrity: the same for an integrity finding.
        disposition_needs_procedural: the same for a procedural finding (``[]``: the cause only).
    """

    model_config = ConfigDict(frozen=True)

    due_hours_voiding: float = Field(default=24, gt=0, le=24 * 365)
    due_hours_integrity: float = Field(default=24, gt=0, le=24 * 365)
    due_hours_procedural: float = Field(default=72, gt=0, le=24 * 365)
    disposition_needs_voiding: list[DispositionField] = ["corrective_action", "note"]
    disposition_needs_integrity: list[DispositionField] = ["corrective_action", "note"]
    disposition_needs_procedural: list[DispositionField] = []


class ReportSettings(BaseModel):
    """Scheduled period reports (``dealtrail schedule``, ``dealtrail project --report-every``).

    Attributes:
        grace_minutes: a period's report is final once every table that dealt in it has an
            event at or after its end, or once the newest dealing event stored (at any table) is
            this many minutes of *event time* (``occurred_at``) past the period's end; until then
            it is provisional (minutes).
        check_seconds: how often ``dealtrail project --report-every`` looks for closed periods
            and stale reports (seconds), and once more when ``--once`` has caught
            up.
        chromium: the Chromium (or Chrome) program that prints a report to PDF (``report
            --pdf``, ``sign-report --pdf``): a path or a name on ``PATH``; unset: the first of
            ``chromium``, ``chromium-browser``, ``google-chrome`` found on ``PATH``.
        max_listed: how many individual voiding and integrity incidents a report's page lists
            (the most serious first, then by time); the page says how many more there are and
            links its ``findings.csv`` and ``findings.parquet`` (every finding record) and the
            console's list of the period, so a month's page stays small.
    """

    model_config = ConfigDict(frozen=True)

    grace_minutes: float = Field(default=15, ge=0, le=7 * 24 * 60)
    check_seconds: float = Field(default=30, gt=0, le=86_400)
    chromium: str | None = Field(default=None, min_length=1, max_length=4096)
    max_listed: int = Field(default=2_000, ge=1, le=1_000_000)


class ControlSettings(BaseModel):
    """Control charts of dealers and tables (issue 50): incidents per 1,000 rounds against the
    floor's centre line, with Laney u' limits, run rules and a Poisson CUSUM.

    Attributes:
        min_rounds: a point (a dealer's shift, a table's day or week) with fewer rounds than this
            is drawn hollow and never signals: too few rounds to judge (rounds).
        cusum_k: the Poisson CUSUM's reference value as a multiple of the expected incidents
            (``u_bar`` times the point's thousands of rounds); the default 1.4427 (= 1/ln 2) is the
            value that detects a doubling of the rate fastest.
        cusum_h: the CUSUM's decision interval (incidents): a dealer's CUSUM above it signals.
        dealer_slot: the slot a dealer's chart is drawn and judged by first (the console's dealer
            page, the period report's dealer charts, ``dealtrail chart`` and ``baseline freeze``):
            ``week`` (default), ``day`` or ``shift``. By shift, a dealer's few incidents a shift make
            chance signals common (about 0.7 % of in-control points, a sixth of dealers a month);
            the other slots stay one click away on the page.
    """

    model_config = ConfigDict(frozen=True)

    min_rounds: int = Field(default=100, ge=1, le=1_000_000)
    cusum_k: float = Field(default=1.4427, gt=1.0, le=10.0)
    cusum_h: float = Field(default=8.0, gt=0, le=1000.0)
    dealer_slot: Literal["shift", "day", "week"] = "week"

    @property
    def report_args(self) -> tuple[int, float, float, Literal["shift", "day", "week"]]:
        """What a period report's control charts need: minimum rounds, CUSUM k and h, the dealers' slot."""
        return (self.min_rounds, self.cusum_k, self.cusum_h, self.dealer_slot)


class SigningSettings(BaseModel):
    """The property's signing key (issue 35): evidence packages, sign-offs and period report
    revisions are signed with it.

    Attributes:
        key_file: the file holding the property's Ed25519 private key (PEM, PKCS #8), readable
            by its owner only (``dealtrail keys create`` writes it 0600 and a key file others
            can read is refused); unset: nothing is signed, and packages, sign-offs and report
            revisions (``UNSIGNED.txt``) say so.
            The key never goes into the store or a log; its public key is recorded in the store
            with its validity period (``dealtrail keys show``).
        pdf_cert_file: the X.509 certificate (PEM) the casino had issued for signing its report
            PDFs, followed by any intermediate certificates of its chain; set together with
            ``pdf_key_file``, the signed PDF (``sign-report --pdf``, the console's Sign button) is
            signed with this certificate and key instead of the certificate the property's key
            issues itself. Unset: the self-issued certificate.
        pdf_key_file: the private key (PEM, unencrypted; ECDSA or RSA) of ``pdf_cert_file``,
            readable by its owner only (a file others can read is refused, as the key file is).
    """

    model_config = ConfigDict(frozen=True)

    key_file: Path | None = None
    pdf_cert_file: Path | None = None
    pdf_key_file: Path | None = None

    @model_validator(mode="after")
    def _pdf_pair(self) -> SigningSettings:
        if (self.pdf_cert_file is None) != (self.pdf_key_file is None):
            raise ValueError("DEALTRAIL_SIGNING__PDF_CERT_FILE and DEALTRAIL_SIGNING__PDF_KEY_FILE are set together")
        return self


class ConsoleSettings(BaseModel):
    """The compliance console (``dealtrail serve``).

    Attributes:
        session_secret: key that signs session cookies; unset: a random key per start (everyone
            logs in again after a restart). Never printed.
        reports_dir: folder of scheduled reports (``dealtrail schedule --out``) the Reports page
            lists; unset: none listed.
        poll_seconds: how often the floor page refreshes itself (seconds).
        url: the console's public address (``DEALTRAIL_CONSOLE__URL``, e.g.
            ``https://console.example``): reports link findings, dealers and tables to its pages,
            notifications link findings; unset: reports carry no console links (see
            :attr:`Settings.console_url`).
    """

    model_config = ConfigDict(frozen=True)

    url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    session_secret: SecretStr | None = None
    reports_dir: Path | None = None
    poll_seconds: float = Field(default=1.0, ge=0.2, le=600)


class VideoSettings(BaseModel):
    """Links from a finding to the table's surveillance video (the casino's video management
    system, VMS): one clip link per camera of the table, for the finding's evidence window.

    Attributes:
        cameras: table ID -> the IDs of its cameras, as JSON
            (``DEALTRAIL_VIDEO__CAMERAS='{"TCP-01": ["CAM-11", "CAM-12"], "PGP-02": ["CAM-21"]}'``);
            a table without an entry has no clip links (the finding page says so).
        url_template: the VMS's address of a clip, with the placeholders ``{camera}``,
            ``{start}``, ``{end}`` (and optionally ``{table}``), each filled in URL-encoded, e.g.
            ``https://vms.local/play?camera={camera}&start={start}&end={end}``; http or https
            only; unset: no clip links.
        timezone: the IANA zone the VMS expects times in (``{start}``, ``{end}``), default UTC.
        time_format: the strftime format of ``{start}`` and ``{end}``, default
            ``%Y-%m-%dT%H:%M:%S`` (add ``%z`` for the offset).
        margin_before_seconds: the clip starts this long before the finding's first evidence
            event (seconds).
        margin_after_seconds: the clip ends this long after its last evidence event (seconds).
    """

    model_config = ConfigDict(frozen=True)

    cameras: dict[str, list[str]] = {}
    url_template: str | None = None
    timezone: str = "UTC"
    time_format: str = Field(default="%Y-%m-%dT%H:%M:%S", min_length=1, max_length=100)
    margin_before_seconds: float = Field(default=30, ge=0, le=86_400)
    margin_after_seconds: float = Field(default=30, ge=0, le=86_400)

    @field_validator("cameras")
    @classmethod
    def _camera_ids(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for table, ids in value.items():
            if not table or any(not i or len(i) > 128 or not i.isprintable() for i in ids):
                raise ValueError(f"cameras of {table!r}: each camera ID is 1 to 128 printable characters")
        return value

    @field_validator("url_template")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        from dealtrail.investigate.video import check_template

        check_template(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as Europe/Malta)") from None
        return value


class SecuritySettings(BaseModel):
    """Console sessions, sign-in throttling, second factor and API token lifetime.

    Attributes:
        session_idle_minutes: a session not used for this long ends (minutes).
        session_max_hours: a session ends this long after sign-in, used or not (hours).
        token_days: an API token stops working this long after it was issued; unset: tokens
            work until revoked (days).
        login_slow_after: consecutive failed sign-ins (of one account, or from one address)
            after which each further attempt must wait, the wait doubling with each failure.
        login_delay_seconds: the first such wait; answered 429 with ``Retry-After`` (seconds).
        login_max_delay_seconds: the longest such wait (seconds).
        login_lock_after: consecutive failed sign-ins of one account that lock it.
        login_lock_minutes: how long a lock lasts unless an admin unlocks the account (minutes).
        totp_roles: roles that must sign in with a one-time code (TOTP) as a second factor, e.g.
            ``["admin"]``; a user of such a role without a code enrolled is sent to enrol one
            after the password. Users of other roles may enrol one.
        trusted_proxies: addresses of reverse proxies whose ``X-Forwarded-For`` and
            ``X-Forwarded-Proto`` headers the console believes (the client address of the sign-in
            throttle and the access log is then the one the proxy names); empty (the default):
            none, the address is always the connection's peer, whatever a header says.
        totp_key: the Fernet key (32 bytes, URL-safe base64: ``python -c "from
            cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"``) that
            encrypts the one-time-code secrets in the store; unset: the key file. Keep it apart
            from the store and its backups: the store alone then does not give the secrets away.
        totp_key_file: an owner-only file holding that key (made with a new key when absent; one
            readable by group or others is refused); unset: ``<store>.totp.key`` beside the store.
            Losing the key means every user enrols a one-time code again.
    """

    model_config = ConfigDict(frozen=True)

    session_idle_minutes: float = Field(default=30, gt=0, le=7 * 24 * 60)
    session_max_hours: float = Field(default=12, gt=0, le=30 * 24)
    token_days: float | None = Field(default=None, gt=0, le=3650)
    login_slow_after: int = Field(default=5, ge=1, le=1000)
    login_delay_seconds: float = Field(default=2, ge=0, le=3600)
    login_max_delay_seconds: float = Field(default=300, ge=0, le=86_400)
    login_lock_after: int = Field(default=10, ge=1, le=1000)
    login_lock_minutes: float = Field(default=15, gt=0, le=7 * 24 * 60)
    totp_roles: list[str] = Field(default_factory=list)
    trusted_proxies: list[str] = Field(default_factory=list)
    totp_key: SecretStr | None = None
    totp_key_file: Path | None = None


class DirectorySettings(BaseModel):
    """Signing in with the casino's directory through OpenID Connect (issue 48): Entra ID, Okta,
    AD FS, Keycloak; see docs/operating.md, "Signing in with your directory".

    Attributes:
        issuer: the directory's issuer URL (its ``/.well-known/openid-configuration`` is read
            from it); unset: no directory, local accounts only.
        client_id: the console's client ID at the directory.
        client_secret: the console's client secret (a confidential client; PKCE as well).
        redirect_url: the console's callback as the browser reaches it, e.g.
            ``https://dealtrail.casino.example/auth/callback``; unset: ``DEALTRAIL_CONSOLE__URL``
            + ``/auth/callback``, else the URL of the request.
        scopes: the scopes asked for (``openid`` is always asked).
        groups_claim: the ID token claim that lists the person's directory groups (Entra ID:
            ``groups``, object IDs; Okta: a groups claim you add; AD FS: ``group``; Keycloak: a
            group membership mapper's claim).
        viewer_groups: directory groups whose members are viewers.
        reviewer_groups: directory groups whose members are reviewers.
        manager_groups: directory groups whose members are managers.
        admin_groups: directory groups whose members are admins (none unless named: the other
            mappings grant at most manager). A person in several mapped groups gets the highest
            role; one in none is refused, with a page that says why.
        mfa_amr: ``amr`` values (RFC 8176) that show the directory checked a second factor; a
            sign-in with one of them is not asked for the console's own one-time code.
        mfa_acr: ``acr`` values that show the same (e.g. Keycloak's level of authentication
            ``2``); empty: none.
        local_accounts: whether local (password) accounts may sign in beside the directory: the
            break-glass account. Unset: off once ``issuer`` is set, on without a directory. Each
            local sign-in while a directory is set is an access-log entry flagged for review.
        timeout_seconds: how long a call to the directory (discovery, keys, token) may take.
    """

    model_config = ConfigDict(frozen=True)

    issuer: str | None = Field(default=None, pattern=r"^https?://[^\s]+$", max_length=500)
    client_id: str = Field(default="dealtrail", min_length=1, max_length=255)
    client_secret: SecretStr | None = None
    redirect_url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    scopes: list[str] = ["openid", "profile", "email"]
    groups_claim: str = Field(default="groups", min_length=1, max_length=200)
    viewer_groups: list[str] = []
    reviewer_groups: list[str] = []
    manager_groups: list[str] = []
    admin_groups: list[str] = []
    mfa_amr: list[str] = ["mfa", "otp", "hwk", "swk", "sms", "fpt", "face", "iris", "retina", "vbm"]
    mfa_acr: list[str] = []
    local_accounts: bool | None = None
    timeout_seconds: float = Field(default=10, gt=0, le=120)


class NotifyRuleSettings(BaseModel):
    """One notification rule: which findings (empty list: any) go to which webhook and addresses.

    Attributes:
        severities: voiding / integrity / procedural.
        rules: rule IDs.
        games: TCP / C691 / PGP.
        tables: table IDs.
        webhook: URL that receives a JSON POST with a Slack-compatible ``text``.
        emails: addresses that receive an email (needs ``smtp_host``).
    """

    model_config = ConfigDict(frozen=True)

    severities: list[str] = []
    rules: list[str] = []
    games: list[str] = []
    tables: list[str] = []
    webhook: str | None = None
    emails: list[str] = []


class NotifySettings(BaseModel):
    """Notifications sent by the console's process (``dealtrail serve``).

    Attributes:
        rules: the rules, as JSON in ``DEALTRAIL_NOTIFY__RULES`` (none: nothing is sent).
        smtp_host / smtp_port: the mail server.
        smtp_starttls: upgrade to TLS with STARTTLS before sending.
        smtp_username / smtp_password: login (the password is never printed).
        smtp_sender: the From address.
        max_attempts: attempts per delivery before it is given up and shown (attempts).
        backoff_seconds: wait after the first failed attempt, doubled after each (seconds).
        console_url: the console's public address, for links in messages (the older name of
            ``DEALTRAIL_CONSOLE__URL``, which wins when both are set).
        digest_at: the local time of the daily digest of late reviews
            (``DEALTRAIL_NOTIFY__DIGEST_AT=08:00``); unset: no digest.
        digest_tz: the IANA zone of ``digest_at`` and of the digest's day
            (``DEALTRAIL_NOTIFY__DIGEST_TZ``; unset: the casino's ``DEALTRAIL_TIMEZONE``).
        digest_to: where the digest goes, as JSON: webhook URLs and email addresses
            (``DEALTRAIL_NOTIFY__DIGEST_TO='["https://hooks.example/x", "compliance@casino.example"]'``).
        signals_to: where control-chart signals go as they appear (issue 50), as JSON like
            ``digest_to``: each signal of a dealer's chart (by ``DEALTRAIL_CONTROL__DEALER_SLOT``)
            or a table's (by day) whose slot ends after notifications were switched on, once per
            target; empty (default): signals are only shown on the pages.
        signals_lookback_days: how many days each look at the charts covers (days): the limits,
            runs and CUSUM need that history.
    """

    model_config = ConfigDict(frozen=True)

    rules: list[NotifyRuleSettings] = []
    smtp_host: str | None = None
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_starttls: bool = True
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_sender: str = "dealtrail@localhost"
    max_attempts: int = Field(default=5, ge=1, le=100)
    backoff_seconds: float = Field(default=30, gt=0, le=86_400)
    console_url: str | None = None
    digest_at: time | None = None
    digest_tz: str | None = None
    digest_to: list[str] = []
    signals_to: list[str] = []
    signals_lookback_days: int = Field(default=35, ge=7, le=366)

    @field_validator("digest_tz")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as America/New_York)") from None
        return value

    @field_validator("digest_to", "signals_to")
    @classmethod
    def _targets(cls, value: list[str]) -> list[str]:
        from dealtrail.reporting.notify import digest_target

        for v in value:
            digest_target(v)
        return value

    @field_validator("digest_at")
    @classmethod
    def _naive(cls, value: time | None) -> time | None:
        if value is not None and value.tzinfo is not None:
            raise ValueError("digest_at is a wall-clock time without an offset; the zone is digest_tz")
        return value


class ReplicaSettings(BaseModel):
    """The read replica that ``project`` and ``audit`` keep of the store (``--replica``, ``--replica-every``).

    Attributes:
        path: the replica file (a read-only copy of the store, replaced atomically; readers such
            as ``report``, ``verify``, ``replay``, ``schedule`` or a BI tool open it while the
            writer runs); unset: no replica (the ``--replica`` option wins).
        every: seconds between two copies (seconds, default 300; ``--replica-every`` takes
            ``30s``, ``5m``, ``1h`` and wins).
    """

    model_config = ConfigDict(frozen=True)

    path: Path | None = None
    every: float = Field(default=300, ge=1, le=86_400)


class ArchiveSettings(BaseModel):
    """Where ``dealtrail archive`` put the cold months (Parquet) that ``replay``, ``verify``,
    ``reaudit`` and the reports (``report``, ``schedule``, the projector's and the console's)
    read beside the store.

    Attributes:
        dir: the archive folder (``--archive`` wins); unset: the folder the store's archive
            manifest names (the ``--to`` of the latest ``dealtrail archive``).
    """

    model_config = ConfigDict(frozen=True)

    dir: Path | None = None


class ExportSettings(BaseModel):
    """The property's daily export (``dealtrail export``): its gaming days as signed Parquet in a
    shared folder or an S3-compatible bucket, for the group view (docs/operating.md, "A group of
    properties"). Signed with ``signing.key_file``; S3 credentials come from the usual AWS
    variables or files, never from these settings.

    Attributes:
        property_id: the property's ID in the export layout (``property=<id>``): 1 to 63
            lower-case letters, digits or hyphens, the same for every export of the property.
        to: where the exports go: a folder, or ``s3://bucket/prefix`` (``--to`` wins).
        s3_endpoint: the address of an S3-compatible server (``http(s)://host:port``); unset:
            the provider's own.
    """

    model_config = ConfigDict(frozen=True)

    property_id: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    to: str | None = Field(default=None, min_length=1, max_length=4096)
    s3_endpoint: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")


class GroupSettings(BaseModel):
    """The group view (``dealtrail group report``, ``group serve``): every property's exports, read-only.

    Attributes:
        source: where the properties export to: a folder, or ``s3://bucket/prefix`` (``--source`` wins).
        keys_dir: a folder of the properties' registered public keys, ``<property_id>.pem`` each
            (``dealtrail keys show`` prints a property's); ``--keys`` wins.
        s3_endpoint: the address of an S3-compatible server (``http(s)://host:port``); unset:
            the provider's own.
        users_file: the group view's accounts (``dealtrail group serve``): a JSON file, owner-only,
            of names, roles (``director``: every property; ``manager``: the properties listed for
            her) and argon2 password hashes (``dealtrail group hash-password``); see
            docs/operating.md, "The group view served".
        refresh_seconds: how long ``group serve`` uses one reading (and verification) of the
            exports before it reads them again (seconds).
        director_groups: with the directory sign-in (``DEALTRAIL_DIRECTORY__ISSUER``, the
            console's client), the directory groups whose members are directors in ``group serve``.
        manager_groups: with the directory sign-in, per property ID the directory groups whose
            members manage that property in ``group serve`` (JSON, e.g. ``{"north":
            ["north-compliance"]}``). No group named here or above: no directory sign-in.
    """

    model_config = ConfigDict(frozen=True)

    source: str | None = Field(default=None, min_length=1, max_length=4096)
    keys_dir: Path | None = None
    s3_endpoint: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    users_file: Path | None = None
    refresh_seconds: float = Field(default=60.0, ge=0, le=86400)
    director_groups: list[str] = []
    manager_groups: dict[str, list[str]] = {}


class AccessForwardSettings(BaseModel):
    """Forwarding of the access log to the casino's SIEM, as it is written, by the store's writer
    process (``dealtrail serve``, ``dealtrail project``; ``dealtrail access-log forward`` while
    neither runs). At-least-once and in order per target, resumed after an outage of the receiver
    from the last entry sent (docs/operating.md, "Forwarding the access log").

    Attributes:
        syslog_host: the syslog receiver's name or address (RFC 5424 over TCP, octet-counting
            framing of RFC 6587); unset: no syslog forwarding.
        syslog_port: its TCP port (514 is usual without TLS, 6514 with it).
        syslog_tls: connect with TLS (RFC 5425): the receiver's certificate is checked against
            ``syslog_ca`` (else the system's trusted CAs) and its name against ``syslog_host``.
        syslog_ca: a PEM file of the CA that signs the receiver's certificate.
        syslog_cert: a PEM client certificate, for a receiver that asks for one (mutual TLS).
        syslog_key: the unencrypted PEM key of ``syslog_cert`` (keep it owner-only); unset: in
            ``syslog_cert``.
        syslog_hostname: the HOSTNAME field of each message; unset: this machine's name (in a
            container, set it to the host's name).
        syslog_resend_window: entries before the cursor sent again to the syslog receiver after
            every new connection (entries, default 10,000; 0: none): plain TCP does not say which
            entries a receiver read, so one that stalled and was replaced, or lost what its kernel
            had taken, gets them again (duplicates carry the same ``seq`` and ``entry_id``).
        relp_host: the RELP receiver's name or address (rsyslog's ``imrelp``): each entry counts
            as delivered only once the receiver acknowledged it (``rsp 200``); unset: no RELP.
        relp_port: its TCP port (default 2514).
        jsonl_path: a file to which each entry is appended as one JSON line (for a log shipper
            that tails it); made owner-only if absent (create it beforehand, readable by the
            shipper's group, to share it); unset: none.
        cursor_dir: the folder of the forwarding cursors (owner-only files holding the last entry
            sent to each target: ``<store name>.access-forward.syslog.cursor``,
            ``...relp.cursor``, ``...jsonl.cursor``); unset: the store's folder.
        poll_seconds: how often the writer looks for new entries (seconds).
        retry_max_seconds: the longest wait between two attempts at a receiver that does not
            answer; the wait starts at ``poll_seconds`` and doubles (seconds).
        timeout_seconds: how long a connection or a send to the syslog receiver (or an answer of
            the RELP receiver) may take before it counts as failed (seconds).
    """

    model_config = ConfigDict(frozen=True)

    syslog_host: str | None = Field(default=None, min_length=1, max_length=253)
    syslog_port: int = Field(default=514, ge=1, le=65535)
    syslog_tls: bool = False
    syslog_ca: Path | None = None
    syslog_cert: Path | None = None
    syslog_key: Path | None = None
    syslog_hostname: str | None = Field(default=None, min_length=1, max_length=255)
    syslog_resend_window: int = Field(default=10_000, ge=0, le=10_000_000)
    relp_host: str | None = Field(default=None, min_length=1, max_length=253)
    relp_port: int = Field(default=2514, ge=1, le=65535)
    jsonl_path: Path | None = None
    cursor_dir: Path | None = None
    poll_seconds: float = Field(default=1.0, gt=0, le=3600)
    retry_max_seconds: float = Field(default=30.0, gt=0, le=86_400)
    timeout_seconds: float = Field(default=10.0, gt=0, le=600)

    @model_validator(mode="after")
    def _tls_files_need_tls(self) -> Self:
        if not self.syslog_tls and any(p is not None for p in (self.syslog_ca, self.syslog_cert, self.syslog_key)):
            raise ValueError("syslog_ca, syslog_cert and syslog_key are for TLS: set syslog_tls=true too")
        if self.syslog_key is not None and self.syslog_cert is None:
            raise ValueError("syslog_key is the key of syslog_cert: set syslog_cert too")
        return self

    @property
    def enabled(self) -> bool:
        """True if there is a target (a syslog or RELP receiver, or a file)."""
        return self.syslog_host is not None or self.relp_host is not None or self.jsonl_path is not None


class Settings(BaseSettings):
    """All dealtrail settings.

    Attributes:
        kafka: see :class:`KafkaSettings`; ``kafka.bootstrap`` is the resolved address (see the
            module docstring for the order).
        kafka_bootstrap: the short form ``DEALTRAIL_KAFKA_BOOTSTRAP`` as given (wins over
            ``DEALTRAIL_KAFKA__BOOTSTRAP`` when set); read ``kafka.bootstrap``, not this.
        db: default DuckDB file of ``audit``/``report``/``project``.
        out: default output folder of ``report`` and ``demo``.
        namespace: prefix of the topic names and the Faust application ID.
        partitions: partitions of the events, findings and rounds topics.
        replication: replication factor of the topics dealtrail creates.
        worker: see :class:`WorkerSettings` (``DEALTRAIL_WORKER__BATCH`` ...).
        reorder: see :class:`ReorderSettings` (``DEALTRAIL_REORDER__EVENTS`` ...).
        review: see :class:`ReviewSettings` (``DEALTRAIL_REVIEW__DUE_HOURS_VOIDING`` ...).
        console: see :class:`ConsoleSettings` (``DEALTRAIL_CONSOLE__SESSION_SECRET`` ...).
        security: see :class:`SecuritySettings` (``DEALTRAIL_SECURITY__SESSION_IDLE_MINUTES`` ...).
        directory: see :class:`DirectorySettings` (``DEALTRAIL_DIRECTORY__ISSUER`` ...).
        reports: see :class:`ReportSettings` (``DEALTRAIL_REPORTS__GRACE_MINUTES`` ...).
        control: see :class:`ControlSettings` (``DEALTRAIL_CONTROL__MIN_ROUNDS`` ...).
        notify: see :class:`NotifySettings` (``DEALTRAIL_NOTIFY__RULES`` ...).
        health: see :class:`HealthSettings` (``DEALTRAIL_HEALTH__PORT`` ...).
        metrics: see :class:`MetricsSettings` (``DEALTRAIL_METRICS__PORT`` ...).
        video: see :class:`VideoSettings` (``DEALTRAIL_VIDEO__CAMERAS`` ...).
        replica: see :class:`ReplicaSettings` (``DEALTRAIL_REPLICA__PATH`` ...).
        archive: see :class:`ArchiveSettings` (``DEALTRAIL_ARCHIVE__DIR``).
        export: see :class:`ExportSettings` (``DEALTRAIL_EXPORT__PROPERTY_ID`` ...).
        group: see :class:`GroupSettings` (``DEALTRAIL_GROUP__SOURCE`` ...).
        signing: see :class:`SigningSettings` (``DEALTRAIL_SIGNING__KEY_FILE``).
        access_forward: see :class:`AccessForwardSettings` (``DEALTRAIL_ACCESS_FORWARD__SYSLOG_HOST`` ...).
        duckdb_memory_limit: DuckDB's memory limit for a process that writes the store
            (``audit``, ``demo``, ``project``), default ``1GB``: DuckDB keeps a cache of the
            file's blocks up to this size (without a limit, up to 80 % of the machine's memory)
            and spills larger operations to disk. The cache itself gains an append-only writer
            little (the 1,000,000-event benchmark ran as fast with 192MB as with 1GB), but a
            checkpoint needs room: with 200MB, auditing 30 days of 8 tables failed a checkpoint
            ("failed to pin block") once the store reached 2.3 GB (about 14 million events),
            and with 1GB the whole 4.3 GB store (22 million events) was built.
        max_record_bytes: the longest line of an event file (or Kafka record of the events
            topic) taken as an event (bytes), ``DEALTRAIL_MAX_RECORD_BYTES``, default 1 MiB; a
            longer one is dead-lettered as ``too_large`` with its first 256 KiB, its length
            and its SHA-256, read without ever holding it whole. The longest real event is
            under 2 KB.
        property_name: the casino property the reports and the console name
            (``DEALTRAIL_PROPERTY``); unset: the name an admin recorded in the console, else
            "property not named". A name recorded in the console wins over this setting.
        timezone: the casino's time zone (``DEALTRAIL_TIMEZONE``, an IANA name such as
            ``America/New_York``; default ``UTC``): shift and day boundaries of the scheduled
            reports, and the times the console, the reports, their PDFs and the CLI's text show,
            each labelled with the zone. Stored instants stay UTC. A command's ``--tz`` wins.
        snapshot_every: the audit keeps a table's engine state every this many of its events
            (events; ``DEALTRAIL_SNAPSHOT_EVERY``, default 1000), and at each UTC day boundary,
            so that a replay re-applies at most about this many events before its window.
        max_seq_jump: an event whose seq is more than this ahead of its table's last seq is
            refused, dead-lettered as ``implausible_seq_jump`` (seqs; ``DEALTRAIL_MAX_SEQ_JUMP``,
            default 100,000; rulebook 10.3.4). A real gap smaller than this is a DT-sequence-gap.
        max_clock_skew: an event whose ``occurred_at`` is more than this after its own
            ``recorded_at`` is refused, dead-lettered as ``implausible_clock_skew``
            (``DEALTRAIL_MAX_CLOCK_SKEW``, seconds or an ISO 8601 duration such as ``PT1H``,
            default 1 hour; rulebook 10.3.4). The time between two events is never a limit. An
            event whose ``recorded_at`` is more than this after the intake's clock is refused too,
            dead-lettered as ``recorded_in_future``: the audit's and the publisher's own clock;
            for the worker and the projector, the timestamp of the Kafka record that carried it
            (the broker's time of append), so both decide alike. A worker or projector whose
            clock is more than this off from the broker's record timestamps says so.
        remedy_window: how long after its round ended an owed remedy is awaited (event time;
            ``DEALTRAIL_REMEDY_WINDOW``, seconds or an ISO 8601 duration such as ``PT24H``,
            default 24 hours; rulebook 10.3.5). The obligation then leaves the table's state and
            its finding stays overdue; if no next round had started, DT-remedy-overdue is raised at
            the table's first event past the window (rulebook 10.4.2). A remedy recorded later is
            stored and shown beside the finding as "remedy recorded after the window", without
            changing the verdict.
    """

    # populate_by_name: Settings(kafka_bootstrap=...) is read too (an ignored keyword once made
    # the Kafka tests dial the default address)
    model_config = SettingsConfigDict(
        env_prefix="DEALTRAIL_", env_nested_delimiter="__", frozen=True, extra="ignore", populate_by_name=True
    )

    kafka: KafkaSettings = KafkaSettings()
    kafka_bootstrap: str | None = Field(default=None, validation_alias=AliasChoices("DEALTRAIL_KAFKA_BOOTSTRAP"))
    db: Path = Path("out/dealtrail.duckdb")
    out: Path = Path("out")
    property_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        validation_alias=AliasChoices("DEALTRAIL_PROPERTY", "property_name"),
    )
    timezone: str = Field(default="UTC", validation_alias=AliasChoices("DEALTRAIL_TIMEZONE", "timezone"))
    namespace: str = Field(default="dealtrail", pattern=r"^[A-Za-z0-9._-]{1,100}$")
    partitions: int = Field(default=6, ge=1, le=1000)
    replication: int = Field(default=1, ge=1, le=10)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    reorder: ReorderSettings = ReorderSettings()
    review: ReviewSettings = ReviewSettings()
    console: ConsoleSettings = ConsoleSettings()
    security: SecuritySettings = SecuritySettings()
    directory: DirectorySettings = DirectorySettings()
    reports: ReportSettings = ReportSettings()
    control: ControlSettings = ControlSettings()
    notify: NotifySettings = NotifySettings()
    health: HealthSettings = HealthSettings()
    metrics: MetricsSettings = MetricsSettings()
    video: VideoSettings = VideoSettings()
    replica: ReplicaSettings = ReplicaSettings()
    archive: ArchiveSettings = ArchiveSettings()
    export: ExportSettings = ExportSettings()
    group: GroupSettings = GroupSettings()
    signing: SigningSettings = SigningSettings()
    access_forward: AccessForwardSettings = AccessForwardSettings()
    duckdb_memory_limit: str = Field(default="1GB", pattern=r"^[0-9]{1,6}(\.[0-9]+)?\s?(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
    snapshot_every: int = Field(default=1000, ge=100, le=10_000_000)

    max_record_bytes: int = Field(default=DEFAULT_MAX_RECORD_BYTES, ge=1024, le=64 * 1024 * 1024)
    max_seq_jump: int = Field(default=DEFAULT_MAX_SEQ_JUMP, ge=1, le=MAX_SEQ)
    max_clock_skew: timedelta = Field(default=DEFAULT_MAX_CLOCK_SKEW, ge=timedelta(0), le=timedelta(days=366))
    remedy_window: timedelta = Field(default=timedelta(hours=24), gt=timedelta(0), le=timedelta(days=366))

    @property
    def plausibility(self) -> Plausibility:
        """The engine's limits of rulebook 10.3.4 (``max_seq_jump``, ``max_clock_skew``) and its
        remedy window of 10.3.5 (``remedy_window``)."""
        from streams.engine.engine import Plausibility

        return Plausibility(self.max_seq_jump, self.max_clock_skew, self.remedy_window)

    @field_validator("timezone")
    @classmethod
    def _casino_zone(cls, value: str) -> str:
        from projections.display.timefmt import zone

        zone(value)  # ValueError: not an IANA name
        return value

    @property
    def zone(self) -> tzinfo:
        """The casino's time zone (``timezone``) as a ``tzinfo``: ``datetime.UTC`` or a ``ZoneInfo``."""
        from projections.display.timefmt import zone

        return zone(self.timezone)

    @property
    def console_url(self) -> str | None:
        """The console's address links use: ``console.url``, else the older
        ``notify.console_url``; None when neither is set."""
        return self.console.url or self.notify.console_url

    @property
    def topics(self) -> Topics:
        """The topics of this namespace."""
        return Topics(self.namespace, self.partitions, self.replication)

    @model_validator(mode="after")
    def _resolve_bootstrap(self) -> Self:
        """Fold the short form into ``kafka.bootstrap``, the one address every client reads."""
        if self.kafka_bootstrap and self.kafka_bootstrap != self.kafka.bootstrap:
            # frozen: set the resolved section once, while the object is being built
            object.__setattr__(self, "kafka", self.kafka.model_copy(update={"bootstrap": self.kafka_bootstrap}))
        return self

    def with_bootstrap(self, bootstrap: str | None) -> Settings:
        """These settings with a command's ``--bootstrap`` flag applied (it wins over the
        environment); unchanged when ``bootstrap`` is None or empty."""
        if not bootstrap:
            return self
        return self.model_copy(
            update={"kafka_bootstrap": bootstrap, "kafka": self.kafka.model_copy(update={"bootstrap": bootstrap})}
        )


def load() -> Settings:
    """Read the settings from the environment."""
    return Settings()
