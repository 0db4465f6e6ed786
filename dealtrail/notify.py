"""Notifications: findings that match a rule are sent to a webhook (JSON with a Slack-compatible
``text``) or by email (SMTP, STARTTLS when configured).

Delivery is at-least-once and de-duplicated by finding ID and target: every attempt is a row of
the append-only ``notifications`` table (written by the store's one writer), a finding is sent to
a target until one attempt succeeds, a failed attempt is retried after a backoff that doubles
each time, and after the last attempt the delivery is recorded as ``gave_up`` and shown on the
console, never dropped silently. Only findings stored after notifications were first switched on
for a store are sent (the store keeps that mark), so turning them on does not mail the backlog.
"""

from __future__ import annotations

import json
import smtplib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import duckdb
import httpx

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


def message(finding: Mapping[str, Any], console_url: str | None) -> str:
    """The one-paragraph text of a notification (the webhook's ``text``, the email's body)."""
    spec = RULES_BY_ID.get(str(finding["rule_id"]))
    when = finding["observed_at"].astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S+00:00")
    lines = [
        f"{str(finding['severity']).capitalize()} finding at table {finding['table_id']}"
        + (f", round {finding['round_id']}" if finding.get("round_id") else "")
        + f" ({when}): {finding['message']}",
        f"Rule: {finding['citation']}" + (f" ({spec.summary})" if spec else ""),
    ]
    if finding.get("required_remedy"):
        lines.append(f"Required remedy: {finding['required_remedy']}")
    if console_url:
        lines.append(f"{console_url.rstrip('/')}/findings/{finding['finding_id']}")
    return "\n".join(lines)


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
    ) -> None:
        self.con, self.rules, self.smtp, self.console_url = con, list(rules), smtp, console_url
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

    def run_once(self) -> int:
        """Attempt every due delivery once; returns how many were delivered.

        The attempts of a round are recorded together, in one write under the lock, after the
        round (the projector's batches hold the same lock); a crash before that write sends
        them again (at-least-once: a receiver de-duplicates by finding ID).
        """
        delivered = 0
        rows: list[list[Any]] = []
        for finding, target, attempt in self.due():
            error = self._send(finding, target)
            outcome = "delivered" if error is None else ("gave_up" if attempt >= self.max_attempts else "failed")
            delivered += error is None
            rows.append([finding["finding_id"], target, attempt, outcome, self.clock(), error])
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

    def _send(self, finding: Mapping[str, Any], target: str) -> str | None:
        kind, _, where = target.partition(":")
        text = message(finding, self.console_url)
        try:
            if kind == "webhook":
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
                    },
                }
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
            mail["Subject"] = (
                f"[dealtrail] {finding['severity']} finding at {finding['table_id']}: {finding['rule_id']}"
            )
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
