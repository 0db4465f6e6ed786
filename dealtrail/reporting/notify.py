"""Notifications: findings that match a rule are sent to a webhook (JSON with a Slack-compatible
``text``) or by email (SMTP, STARTTLS when configured).

Delivery is at-least-once and de-duplicated by finding ID and target: every attempt is a row of
the append-only ``notifications`` table (written by the store's one writer), a finding is sent to
a target until one attempt succeeds, a failed attempt is retried after a backoff that doubles
each time, and after the last attempt the delivery is recorded as ``gave_up`` and shown on the
console, never dropped silently. Only findings stored after notifications were first switched on
for a store are sent (the store keeps that mark), so turning them on does not mail the backlog.

Control-chart signals (:class:`SignalConfig`, issue 50) go the same way, when asked for: each
signal of a dealer's chart (by the dealers' slot) or a table's (by day), judged against the
baseline in force, whose slot ends after notifications were switched on, is sent once to each
target, keyed ``signal:<signal ID>``. A signal asks for a look, and its message says so.

The daily digest of late reviews (:class:`DigestConfig`) goes the same way: once a local day, at
a wall-clock time in a configured zone, one message per target lists the findings whose review
is late (not disposed within its due time), or says that none is. It is sent every day, late
reviews or not, so that a missing digest means a broken notifier, never a quiet day. Its
deliveries are rows of the same table keyed ``digest:<local date>`` per target: de-duplicated per
(day, target), retried with the same backoff, given up and shown like any other delivery. A
digest missed while the notifier was down is sent when it next runs (the latest day only).
"""

from __future__ import annotations

import json
import smtplib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from email.message import EmailMessage
from typing import Any
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

import duckdb
import httpx

from projections.display.timefmt import show
from projections.models import incidents, reviews
from projections.models.control import ControlArgs
from projections.records import staff
from streams.engine.catalog import RULES_BY_ID

NOTIFY_SQL = """
-- Grain: one row per delivery attempt (finding_id, target, attempt). Upstream: the notifier.
CREATE TABLE IF NOT EXISTS notifications (
    finding_id  VARCHAR NOT NULL,
    target      VARCHAR NOT NULL,   -- webhook:<url> or email:<address>
    attempt     INTEGER NOT NULL,
    outcome     VARCHAR NOT NULL,   -- delivered, failed, gave_up
    attempted_at TIMESTAMPTZ NOT NULL,
    error       VARCHAR
);
-- Grain: one row: the rowid of findings up to which nothing is sent (set once).
CREATE TABLE IF NOT EXISTS notify_mark (findings_rowid BIGINT NOT NULL, set_at TIMESTAMPTZ NOT NULL);
-- dim_notifications: each delivery's latest attempt (grain: finding_id, target).
CREATE OR REPLACE VIEW dim_notifications AS
SELECT * EXCLUDE (rn) FROM (
    SELECT n.*, row_number() OVER (PARTITION BY finding_id, target ORDER BY attempt DESC) AS rn FROM notifications n
) WHERE rn = 1;
"""


@dataclass(frozen=True)
class NotifyRule:
    """Which findings go where. An empty filter matches everything.

    Attributes:
        severities: voiding / integrity / procedural.
        rules: rule IDs.
        games: TCP / C691 / PGP.
        tables: table IDs.
        webhook: URL that receives a JSON POST, or None.
        emails: addresses that receive an email.
    """

    severities: frozenset[str] = frozenset()
    rules: frozenset[str] = frozenset()
    games: frozenset[str] = frozenset()
    tables: frozenset[str] = frozenset()
    webhook: str | None = None
    emails: tuple[str, ...] = ()

    def matches(self, finding: Mapping[str, Any]) -> bool:
        """True if ``finding`` (a row with severity, rule_id, game, table_id) passes every filter."""
        return all(
            not allowed or finding[key] in allowed
            for allowed, key in (
                (self.severities, "severity"),
                (self.rules, "rule_id"),
                (self.games, "game"),
                (self.tables, "table_id"),
            )
        )

    def targets(self) -> list[str]:
        """The rule's targets as ``webhook:<url>`` and ``email:<address>``."""
        return ([f"webhook:{self.webhook}"] if self.webhook else []) + [f"email:{a}" for a in self.emails]


@dataclass(frozen=True)
class SmtpConfig:
    """The mail server. ``password`` is a secret: never logged or stored.

    Attributes:
        host: SMTP server.
        port: its port.
        sender: the From address.
        starttls: upgrade the connection with STARTTLS before sending.
        username: login name, or None for no login.
        password: login password.
        timeout: seconds for each network step (seconds).
    """

    host: str
    port: int
    sender: str
    starttls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 10.0


DIGEST = "digest:"
"""Prefix of a digest delivery's key in ``notifications.finding_id`` (``digest:<local date>``)."""


SIGNAL = "signal:"
"""Prefix of a control-chart signal's delivery key in ``notifications.finding_id`` (``signal:<signal ID>``)."""
SIGNALS_EVERY = timedelta(minutes=1)
"""How often the charts are drawn again to look for new signals (each look charts the whole floor;
the notifier's rounds, every second or so, retry deliveries from the latest look)."""


@dataclass(frozen=True)
class SignalConfig:
    """Control-chart signals sent as they appear (resolved from the settings by the entry point).

    Attributes:
        targets: ``webhook:<url>`` and ``email:<address>``.
        control: minimum rounds of a point, CUSUM k and h, the dealers' slot (``DEALTRAIL_CONTROL__*``).
        zone: the IANA zone whose wall clock bounds shifts, days and weeks (``DEALTRAIL_TIMEZONE``).
        lookback: how much history each look charts (days): the limits and runs need it.
        property_name: the casino property the message names, or None.
    """

    targets: tuple[str, ...]
    control: ControlArgs
    zone: str = "UTC"
    lookback: int = 35
    property_name: str | None = None


def signal_text(sig: Mapping[str, Any], console_url: str | None, property_name: str | None = None) -> str:
    """The message of one control-chart signal: whose chart, which slot, the rules, the rate
    against its limit, that it asks for a look, and a link to the chart when the console's address
    is known."""
    where = f" at {property_name}" if property_name else ""
    ucl = f"{sig['ucl']:.1f}" if sig["ucl"] is not None else "none"
    lines = [
        f"Control-chart signal{where}: {sig['kind']} {sig['subject_id']}, {sig['slot']} from "
        f"{sig['slot_start']:%Y-%m-%d %H:%M} ({sig['zone']})",
        f"Rules: {'; '.join(sig['rules'])}",
        f"{sig['errors']} incidents in {sig['rounds']:,} rounds: {sig['u']:.1f} per 1,000 rounds "
        f"(centre {sig['u_bar']:.1f}, upper limit {ucl}); {sig['baseline']}",
        "A signal asks for a look at the rate, not for discipline: see the findings behind it.",
    ]
    if console_url:
        path = "dealers" if sig["kind"] == "dealer" else "tables"
        query = urlencode({"period": "90d", "slot": sig["slot"]})
        lines.append(f"{console_url.rstrip('/')}/{path}/{quote(str(sig['subject_id']), safe='')}?{query}#control")
    return "\n".join(lines)


@dataclass(frozen=True)
class DigestConfig:
    """The daily digest of late reviews (resolved from the settings by the entry point).

    Attributes:
        at: the local wall-clock time it is sent at.
        zone: the zone of ``at`` and of the day (a day has 23, 24 or 25 hours).
        targets: ``webhook:<url>`` and ``email:<address>``.
        due: review due times per severity (hours).
        property_name: the casino property the message names, or None.
    """

    at: time
    zone: ZoneInfo
    targets: tuple[str, ...]
    due: reviews.ReviewDue
    property_name: str | None = None

    def send_instant(self, day: date) -> datetime:
        """When ``day``'s digest is due (UTC): ``at`` on ``day`` in ``zone``. A time the clocks
        skip (spring forward) is taken with the offset before the change, so it falls just after
        the gap; a time that occurs twice (fall back) is the first one."""
        return datetime.combine(day, self.at, tzinfo=self.zone).astimezone(UTC)

    def latest_day(self, now: datetime) -> date | None:
        """The latest local day whose digest time has passed at ``now`` (None: none yet, which
        cannot happen after the first day)."""
        today = now.astimezone(self.zone).date()
        for day in (today, today - timedelta(days=1)):
            if self.send_instant(day) <= now:
                return day
        return None


def digest_target(value: str) -> str:
    """A digest target as given in the settings (a webhook URL or an email address) as a
    delivery target, ``webhook:<url>`` or ``email:<address>``.

    Raises:
        ValueError: neither an http(s) URL nor an address with one ``@``.
    """
    v = value.strip()
    if v.startswith(("http://", "https://")):
        return f"webhook:{v}"
    local, at, domain = v.partition("@")
    if at and local and domain and "@" not in domain and not any(c.isspace() for c in v):
        return f"email:{v}"
    raise ValueError(f"digest target {value!r} is neither an http(s) URL nor an email address")


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    return (f"{days} d " if days else "") + f"{hours} h {mins:02d} min"


def digest_text(
    day: date,
    late: Sequence[Mapping[str, Any]],
    config: DigestConfig,
    now: datetime,
    console_url: str | None,
    names: Mapping[str, str] | None = None,
) -> str:
    """The digest's text (the webhook's ``text``, the email's body): one line per late review,
    most overdue first, with the finding, rule, table, dealer (``Name (ID)`` when the roster
    ``names`` it, :func:`projections.records.staff.label`), due time, how late and the assignee."""
    where = f" at {config.property_name}" if config.property_name else ""
    head = f"dealtrail: late reviews{where} for {day.isoformat()}, as of {show(now, config.zone)}"
    if not late:
        return f"{head}\nNo review is late."
    lines = [
        f"{head}\n{len(late)} review{'s' if len(late) != 1 else ''} late (incidents not disposed within the due time):"
    ]
    for f in late:
        spec = RULES_BY_ID.get(str(f["rule_id"]))
        line = (
            f"- {f['severity']} at table {f['table_id']}"
            + (f", round {f['round_id']}" if f.get("round_id") else "")
            + (f", dealer {staff.label(f['dealer_id'], names or {})}" if f.get("dealer_id") else "")
            + f": {spec.summary.rstrip('.') if spec else f['rule_id']} ({f['rule_id']});"
            + f" due {show(f['review_due_at'], config.zone)}, {_duration((now - f['review_due_at']).total_seconds())}"
            + " late;"
            + f" {('assigned to ' + str(f['assignee'])) if f.get('assignee') else 'unassigned'}"
            + f" ({f['review_status']})"
        )
        if console_url:
            line += f"\n  {console_url.rstrip('/')}/findings/{f['finding_id']}"
        lines.append(line)
    return "\n".join(lines)


def late_reviews(con: duckdb.DuckDBPyConnection, due: reviews.ReviewDue, now: datetime) -> list[dict[str, Any]]:
    """Incidents whose review is late at ``now`` and not disposed yet, most overdue first (the
    incidents read model: as many as its ``late_not_disposed``, the floor's "review late"; a
    consequence is reviewed with its cause and not listed again)."""
    rows, _ = incidents.records(con, reviews.FindingFilter(incident=True), due, now, sort="due", descending=False)
    return [r for r in rows if r["review_late"] and r["review_status"] != "disposed"]


def message(finding: Mapping[str, Any], console_url: str | None, dealer: str | None = None, tz: tzinfo = UTC) -> str:
    """The one-paragraph text of a notification (the webhook's ``text``, the email's body);
    ``dealer`` is the round's dealer as shown everywhere (``Name (ID)``, :func:`projections.records.staff.label`);
    ``tz`` the casino's zone its time is shown in, with the offset and the zone's name."""
    spec = RULES_BY_ID.get(str(finding["rule_id"]))
    when = show(finding["observed_at"], tz)
    lines = [
        f"{str(finding['severity']).capitalize()} finding at table {finding['table_id']}"
        + (f", round {finding['round_id']}" if finding.get("round_id") else "")
        + (f", dealer {dealer}" if dealer else "")
        + f" ({when}): {finding['message']}",
        f"Rule: {finding['citation']}" + (f" ({spec.summary})" if spec else ""),
    ]
    if finding.get("required_remedy"):
        lines.append(f"Required remedy: {finding['required_remedy']}")
    if console_url:
        lines.append(f"{console_url.rstrip('/')}/findings/{finding['finding_id']}")
    return "\n".join(lines)


def _latest_attempts(cur: duckdb.DuckDBPyConnection, prefix: str) -> dict[tuple[str, str], tuple[str, int, datetime]]:
    """Each delivery keyed ``prefix...``'s latest attempt: ``(key, target) -> (outcome, attempt, when)``."""
    rows = cur.execute(
        "SELECT finding_id, target, outcome, attempt, attempted_at FROM dim_notifications"
        " WHERE starts_with(finding_id, ?)",
        [prefix],
    ).fetchall()
    return {(key, target): (outcome, attempt, at) for key, target, outcome, attempt, at in rows}


class Notifier:
    """Sends the notifications that are due, through the store's writer connection.

    Args:
        con: the store's writer connection.
        rules: the notification rules.
        smtp: the mail server (None: email targets fail and are recorded so).
        console_url: the console's address for links in messages, or None.
        lock: held while writing (the console's write lock).
        clock: the current time (timezone-aware).
        max_attempts: attempts per delivery before it is given up (attempts).
        backoff: the wait after the first failed attempt; it doubles after each (seconds).
        http_timeout: seconds a webhook may take (seconds).
        digest: the daily digest of late reviews, or None.
        tz: the casino's zone the messages show times in (``DEALTRAIL_TIMEZONE``).
        signals: control-chart signals to send as they appear, or None.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        rules: Sequence[NotifyRule],
        smtp: SmtpConfig | None,
        console_url: str | None,
        lock: threading.Lock,
        clock: Callable[[], datetime],
        max_attempts: int,
        backoff: float,
        http_timeout: float = 5.0,
        digest: DigestConfig | None = None,
        tz: tzinfo = UTC,
        signals: SignalConfig | None = None,
    ) -> None:
        self.con, self.rules, self.smtp, self.console_url = con, list(rules), smtp, console_url
        self.tz = tz
        self.signals = signals
        self._signals_seen: tuple[datetime, dict[str, dict[str, Any]]] | None = None  # the latest look
        self.digest = digest
        self.lock, self.clock = lock, clock
        self.max_attempts, self.backoff, self.http_timeout = max_attempts, backoff, http_timeout
        # one client for every webhook call: a new one per call rebuilt its TLS context each time
        # (about a second per delivery on a loaded host, bench/bench_console.py)
        self._http = httpx.Client(timeout=http_timeout)
        with self.lock:
            con.execute(NOTIFY_SQL).fetchall()
            con.execute(
                """INSERT INTO notify_mark SELECT coalesce((SELECT max(rowid) FROM findings), -1), ?
                   WHERE NOT EXISTS (SELECT 1 FROM notify_mark)""",
                [clock()],
            ).fetchall()

    def close(self) -> None:
        """Close the webhook client's connections (the notifier sends nothing afterwards)."""
        self._http.close()

    def due(self) -> list[tuple[dict[str, Any], str, int]]:
        """The deliveries to attempt now: ``(finding row, target, attempt number)``."""
        cur = self.con.cursor()
        try:
            q = cur.execute(
                """SELECT f.* FROM findings f
                   WHERE f.revision = 0 AND f.rowid > (SELECT min(findings_rowid) FROM notify_mark)
                   ORDER BY f.rowid"""
            )
            cols = [d[0] for d in q.description]
            findings = [dict(zip(cols, r, strict=True)) for r in q.fetchall()]
            state = {
                (fid, target): (outcome, attempt, at)
                for fid, target, outcome, attempt, at in cur.execute(
                    "SELECT finding_id, target, outcome, attempt, attempted_at FROM dim_notifications"
                ).fetchall()
            }
        finally:
            cur.close()
        now = self.clock()
        out = []
        for f in findings:
            targets = {t for rule in self.rules if rule.matches(f) for t in rule.targets()}
            for target in sorted(targets):
                last = state.get((f["finding_id"], target))
                if last is None:
                    out.append((f, target, 1))
                    continue
                outcome, attempt, at = last
                wait = timedelta(seconds=self.backoff * 2 ** (attempt - 1))
                if outcome == "failed" and now >= at + wait:
                    out.append((f, target, attempt + 1))
        return out

    def _retry_due(self, last: tuple[str, int, datetime] | None, now: datetime) -> int | None:
        """The attempt number to make now for a delivery whose latest attempt is ``last``
        (None: never attempted), or None when it is delivered, given up or backing off."""
        if last is None:
            return 1
        outcome, attempt, at = last
        wait = timedelta(seconds=self.backoff * 2 ** (attempt - 1))
        return attempt + 1 if outcome == "failed" and now >= at + wait else None

    def digests_due(self) -> list[tuple[str, str, int]]:
        """The digest deliveries to attempt now: ``(key, target, attempt number)``, ``key``
        being ``digest:<local date>``: the latest day whose digest time has passed, and any
        earlier day's digest still being retried."""
        if self.digest is None or not self.digest.targets:
            return []
        now = self.clock()
        cur = self.con.cursor()
        try:
            state = _latest_attempts(cur, DIGEST)
        finally:
            cur.close()
        day = self.digest.latest_day(now)
        keys = {key for key, _ in state} | ({f"{DIGEST}{day.isoformat()}"} if day else set())
        out = []
        for key in sorted(keys):
            for target in self.digest.targets:
                attempt = self._retry_due(state.get((key, target)), now)
                if attempt is not None and (attempt > 1 or key == f"{DIGEST}{day}"):
                    out.append((key, target, attempt))
        return out

    def signals_due(self) -> list[tuple[str, dict[str, Any], str, int]]:
        """The signal deliveries to attempt now: ``(key, signal, target, attempt number)``: each
        signal of the charts over the last ``lookback`` days whose slot ends after notifications
        were switched on for the store (no backlog is sent), not yet delivered or given up. The
        charts are drawn again at most every :data:`SIGNALS_EVERY`; retries use the latest look."""
        if self.signals is None or not self.signals.targets:
            return []
        now = self.clock()
        cur = self.con.cursor()
        try:
            state = _latest_attempts(cur, SIGNAL)
            if self._signals_seen is None or now - self._signals_seen[0] >= SIGNALS_EVERY:
                self._signals_seen = (now, self._look_for_signals(cur, now))
        finally:
            cur.close()
        found = self._signals_seen[1]
        out = []
        for key in sorted(found):
            for target in self.signals.targets:
                attempt = self._retry_due(state.get((key, target)), now)
                if attempt is not None:
                    out.append((key, found[key], target, attempt))
        return out

    def _look_for_signals(self, cur: duckdb.DuckDBPyConnection, now: datetime) -> dict[str, dict[str, Any]]:
        """The signals of the charts over the last ``lookback`` days whose slot ends after
        notifications were switched on, by delivery key (empty: a store without the incidents
        summary yet)."""
        from projections.models.control import ChartSpec, chart, rules_of, signal_id, slots_for
        from projections.records import baselines

        assert self.signals is not None
        min_rounds, k, h, dealer_slot = self.signals.control
        steps = {"shift": timedelta(hours=8), "day": timedelta(days=1), "week": timedelta(days=7)}
        mark = cur.execute("SELECT min(set_at) FROM notify_mark").fetchone()
        since = mark[0] if mark and mark[0] else now
        found: dict[str, dict[str, Any]] = {}
        for kind in ("dealer", "table"):
            slot = slots_for(kind, dealer_slot)[0]
            spec = ChartSpec(kind, slot, "all", min_rounds, k, h, self.signals.zone)
            try:
                baseline = baselines.in_force(cur, spec)
                points = chart(cur, spec, now - timedelta(days=self.signals.lookback), now, None, baseline)
            except duckdb.CatalogException:
                return {}
            for p in points:
                if p["signal"] and p["slot_start_utc"] + steps[slot] > since:
                    found[SIGNAL + signal_id(spec, p)] = {
                        **p, "kind": kind, "slot": slot, "zone": self.signals.zone, "rules": rules_of(p),
                        "baseline": baselines.label(baseline),
                    }  # fmt: skip
        return found

    def _send_signal(self, sig: Mapping[str, Any], target: str) -> str | None:
        assert self.signals is not None
        text = signal_text(sig, self.console_url, self.signals.property_name)
        subject = f"[dealtrail] control-chart signal: {sig['kind']} {sig['subject_id']}, {sig['slot']} from " + (
            f"{sig['slot_start']:%Y-%m-%d %H:%M}"
        )
        body = {
            "text": text,
            "signal": {
                "signal_id": sig["key"].removeprefix(SIGNAL),
                "kind": sig["kind"],
                "subject_id": sig["subject_id"],
                "slot": sig["slot"],
                "slot_start_utc": sig["slot_start_utc"].astimezone(UTC).isoformat(),
                "rules": sig["rules"],
                "incidents": int(sig["errors"]),
                "rounds": int(sig["rounds"]),
                "per_1000_rounds": sig["u"],
                "centre": sig["u_bar"],
                "upper_limit": sig["ucl"],
                "baseline": sig["baseline"],
            },
        }
        return self._deliver(target, text, subject, body)

    def run_once(self) -> int:
        """Attempt every due delivery once (findings, the digest, then control-chart signals);
        returns how many were delivered.

        The attempts of a round are recorded together, in one write under the lock, after the
        round (the projector's batches hold the same lock); a crash before that write sends
        them again (at-least-once: a receiver de-duplicates by finding ID, or by digest day).
        """
        delivered = 0
        rows: list[list[Any]] = []
        for finding, target, attempt in self.due():
            error = self._send(finding, target)
            delivered += error is None
            rows.append(self._row(finding["finding_id"], target, attempt, error))
        for key, target, attempt in self.digests_due():
            error = self._send_digest(key, target)
            delivered += error is None
            rows.append(self._row(key, target, attempt, error))
        for key, sig, target, attempt in self.signals_due():
            error = self._send_signal({**sig, "key": key}, target)
            delivered += error is None
            rows.append(self._row(key, target, attempt, error))
        if rows:
            with self.lock:
                self.con.execute("BEGIN TRANSACTION")
                try:
                    for row in rows:  # a handful per round, never a hot path
                        self.con.execute("INSERT INTO notifications VALUES (?, ?, ?, ?, ?, ?)", row).fetchall()
                    self.con.execute("COMMIT")
                except BaseException:
                    self.con.execute("ROLLBACK")
                    raise
        return delivered

    def _row(self, key: str, target: str, attempt: int, error: str | None) -> list[Any]:
        """The ``notifications`` row of one attempt (``error`` None: delivered)."""
        outcome = "delivered" if error is None else ("gave_up" if attempt >= self.max_attempts else "failed")
        return [key, target, attempt, outcome, self.clock(), error]

    def _send_digest(self, key: str, target: str) -> str | None:
        assert self.digest is not None
        day = date.fromisoformat(key.removeprefix(DIGEST))
        now = self.clock()
        cur = self.con.cursor()
        try:
            late = late_reviews(cur, self.digest.due, now)
            names = staff.names(cur)
        finally:
            cur.close()
        text = digest_text(day, late, self.digest, now, self.console_url, names)
        where = f" at {self.digest.property_name}" if self.digest.property_name else ""
        subject = f"[dealtrail] late reviews{where}, {day.isoformat()}: " + (
            f"{len(late)} late" if late else "none late"
        )
        body = {
            "text": text,
            "digest": {
                "day": day.isoformat(),
                "as_of": now.astimezone(UTC).isoformat(),
                "late": [
                    {
                        "finding_id": f["finding_id"],
                        "rule_id": f["rule_id"],
                        "severity": f["severity"],
                        "table_id": f["table_id"],
                        "round_id": f["round_id"],
                        "review_status": f["review_status"],
                        "assignee": f["assignee"],
                        "review_due_at": f["review_due_at"].astimezone(UTC).isoformat(),
                        "late_seconds": round((now - f["review_due_at"]).total_seconds()),
                    }
                    for f in late
                ],
            },
        }
        return self._deliver(target, text, subject, body)

    def _dealer(self, finding: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """The dealer of the finding's round: ``(ID, as shown)``, or ``(None, None)``."""
        if not finding.get("round_id"):
            return None, None
        cur = self.con.cursor()
        try:
            row = cur.execute(
                "SELECT dealer_id FROM rounds WHERE table_id = ? AND round_id = ? LIMIT 1",
                [finding["table_id"], finding["round_id"]],
            ).fetchone()
            if row is None or row[0] is None:
                return None, None
            return str(row[0]), staff.label(str(row[0]), staff.names(cur))
        finally:
            cur.close()

    def _send(self, finding: Mapping[str, Any], target: str) -> str | None:
        dealer_id, dealer = self._dealer(finding)
        text = message(finding, self.console_url, dealer, self.tz)
        body = {
            "text": text,
            "finding": {
                k: finding[k].isoformat() if isinstance(finding[k], datetime) else finding[k]
                for k in (
                    "finding_id",
                    "rule_id",
                    "citation",
                    "severity",
                    "game",
                    "table_id",
                    "round_id",
                    "message",
                    "required_remedy",
                    "observed_at",
                )
            }
            | {"dealer_id": dealer_id, "dealer": dealer},
        }
        subject = f"[dealtrail] {finding['severity']} finding at {finding['table_id']}: {finding['rule_id']}"
        return self._deliver(target, text, subject, body)

    def _deliver(self, target: str, text: str, subject: str, body: Mapping[str, Any]) -> str | None:
        """Send one message to ``target``; None on success, else the error (type and text)."""
        kind, _, where = target.partition(":")
        try:
            if kind == "webhook":
                r = self._http.post(
                    where,
                    content=json.dumps(body),
                    headers={"Content-Type": "application/json"},
                )
                return None if 200 <= r.status_code < 300 else f"HTTP {r.status_code}"
            if self.smtp is None:
                return "no SMTP server configured"
            mail = EmailMessage()
            mail["From"], mail["To"] = self.smtp.sender, where
            mail["Subject"] = subject
            mail.set_content(text)
            with smtplib.SMTP(self.smtp.host, self.smtp.port, timeout=self.smtp.timeout) as smtp:
                if self.smtp.starttls:
                    smtp.starttls()
                if self.smtp.username:
                    smtp.login(self.smtp.username, self.smtp.password or "")
                smtp.send_message(mail)
            return None
        except (httpx.HTTPError, OSError, smtplib.SMTPException) as exc:
            # the error's type and text; an SMTP password is never part of either
            return f"{type(exc).__name__}: {exc}"[:500]


def failures(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Deliveries that were given up or are still failing, newest first (for the console)."""
    cur = con.execute(
        """SELECT finding_id, target, attempt, outcome, attempted_at, error FROM dim_notifications
           WHERE outcome <> 'delivered' ORDER BY attempted_at DESC"""
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
