"""The access log leaves the building: each stored entry is forwarded, as the log grows, to the
casino's SIEM as syslog (RFC 5424 over TCP with octet-counting framing, RFC 6587; TLS when
configured, RFC 5425), over RELP (rsyslog's Reliable Event Logging Protocol, which acknowledges
each message: :class:`RelpSender`) and/or as JSON lines appended to a file that any log shipper
tails.

Delivery is at-least-once and in chain order, per target: the forwarder reads the entries after
the last one it sent (``seq`` above its cursor, :func:`projections.access_log.after`), sends them
in order, and only then moves that target's cursor. The cursor is a small owner-only file (the
last forwarded ``seq`` and that entry's hash), replaced atomically; the log itself is only read,
never rewritten. After an outage of the receiver (refused, reset, closed by its peer, a timeout)
the forwarder says so in one line, retries with a backoff that doubles up to a cap, and resumes
from the entry after its cursor, so nothing written meanwhile is lost. An entry may be sent twice
(a crash between a send and the cursor's move, a connection that died under a batch): each
carries its ``seq`` and ``entry_id`` (and names its property and store), by which a SIEM
de-duplicates. What counts as delivered depends on the transport (docs/operating.md, "What each
transport can lose or repeat"): RELP moves the cursor past an entry only once the receiver
answered ``rsp 200`` for it; the file, once the line is fsynced. Plain syslog over TCP has no
acknowledgement: an entry the receiver's kernel accepted and the receiver never read (a receiver
that stalls, then is replaced) is not seen by the sender, so after every new connection the last
``resend_window`` entries before the cursor are sent again (at-least-once within that window).

The forwarder runs as a background thread of the store's writer process (``dealtrail serve``,
``dealtrail project``), which alone may open the store while it runs, and never blocks a request:
it reads through its own cursor of the store's connection and holds no write lock. ``dealtrail
access-log forward`` runs the same loop on its own while no other process holds the store.
Nothing secret is logged: the lines name the target (host and port, or the file) and the error.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import socket
import ssl
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Protocol

import duckdb

from projections.records import access_log
from schemas.access import AccessRecord
from streams.metrics import FORWARD_PENDING, FORWARD_SENT

SD_ID = "dealtrail@32473"
"""The structured-data ID of the entry's fields. 32473 is the private enterprise number that RFC
5612 reserves for documentation and examples: dealtrail has none of its own, and the name part
makes the ID unique enough for a SIEM's parser."""

FACILITY = 10
"""authpriv (RFC 5424 table 1: security/authorization messages): the entries name users."""

SEVERITY = {"ok": 6, "refused": 5, "throttled": 5, "expired": 5, "locked": 4}
"""RFC 5424 severities by outcome: informational, notice, warning."""

_CONTROLS = frozenset(
    [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
)
"""Code points never forwarded as they are: C0 and DEL, C1 (NEL among them), the line and
paragraph separators, and the bidirectional embeddings, overrides and isolates (U+202A-202E,
U+2066-2069) that would make a line read otherwise than it is."""
_ESCAPES = {c: f"\\u{c:04x}" for c in _CONTROLS}


def escape_controls(text: str) -> str:
    r"""``text`` with each control character of :data:`_CONTROLS` written as ``\\uXXXX`` (six
    printable characters: a SIEM shows that a name held one, and the line stays one line that
    reads as it is)."""
    return text.translate(_ESCAPES)


@dataclass(frozen=True)
class Origin:
    """Where forwarded entries come from, named in every message so that a SIEM that receives the
    logs of several stores tells their ``seq`` apart.

    Attributes:
        property: the casino property (``DEALTRAIL_PROPERTY``; ``-`` when unset).
        store: the store (its file's absolute path; with the message's HOSTNAME it names the store).
    """

    property: str
    store: str


class PartialDelivery(OSError):
    """A send that failed after the receiver acknowledged the first :attr:`delivered` records.

    Args:
        delivered: records acknowledged, in order, before the failure.
        message: what failed.
    """

    def __init__(self, delivered: int, message: str) -> None:
        super().__init__(message)
        self.delivered = delivered


class Sender(Protocol):
    """Where forwarded entries go; :meth:`send` raises ``OSError`` when they did not get there
    (:class:`PartialDelivery` when the first ones did)."""

    name: str
    kind: str

    def send(self, records: Sequence[AccessRecord]) -> None:
        """Send ``records`` in order (all of them, or raise)."""

    def close(self) -> None:
        """Let go of the connection or file."""


def _sd_value(text: str) -> str:
    """``text`` as an RFC 5424 PARAM-VALUE: backslash, double quote and closing bracket escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def _printable(text: str, limit: int) -> str:
    """``text`` as an RFC 5424 header field: printable US-ASCII, at most ``limit``; ``-`` if empty."""
    kept = "".join(c for c in text if 33 <= ord(c) <= 126)[:limit]
    return kept or "-"


def syslog_message(
    record: AccessRecord, hostname: str, app_name: str = "dealtrail", origin: Origin | None = None
) -> bytes:
    r"""One entry as an RFC 5424 message (UTF-8), without framing.

    ``<PRI>1 TIMESTAMP HOSTNAME dealtrail - KIND [dealtrail@32473 seq=... entry_id=... user=...
    client=... outcome=... hash=... prev_hash=...] BOM user kind outcome: detail``: the facility is
    authpriv, the severity follows the outcome (:data:`SEVERITY`), the time is the entry's in UTC
    with microseconds, the MSGID its kind; ``property`` and ``store`` close the structured data
    when ``origin`` is given. Control characters (C0, C1, U+2028/2029, bidirectional overrides and
    isolates) in the fields and the text are written as ``\\uXXXX`` (:func:`escape_controls`), so one
    message is one line that reads as it is.

    Args:
        record: the stored entry (with its ``seq`` and hashes).
        hostname: the HOSTNAME field (printable ASCII, at most 255; ``-`` when empty).
        app_name: the APP-NAME field.
        origin: the property and store the entry comes from.
    """
    pri = FACILITY * 8 + SEVERITY.get(record.outcome, 5)
    stamp = record.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    params = {
        "seq": str(record.seq),
        "entry_id": record.entry_id,
        "user": record.user,
        "client": record.client,
        "outcome": record.outcome,
        "hash": record.hash or "",
        "prev_hash": record.prev_hash or "",
    }
    if origin is not None:
        params["property"], params["store"] = origin.property, origin.store
    sd = "[" + SD_ID + "".join(f' {k}="{_sd_value(escape_controls(v))}"' for k, v in params.items()) + "]"
    header = f"<{pri}>1 {stamp} {_printable(hostname, 255)} {_printable(app_name, 48)} - {_printable(record.kind, 32)}"
    text = f"{record.user or '-'} {record.kind} {record.outcome}" + (f": {record.detail}" if record.detail else "")
    text = escape_controls(text)
    return f"{header} {sd} ".encode() + b"\xef\xbb\xbf" + text.encode("utf-8")


def octet_counted(message: bytes) -> bytes:
    """``message`` framed by octet counting (RFC 6587 3.4.1): its length in bytes, a space, itself."""
    return str(len(message)).encode() + b" " + message


@dataclass(frozen=True)
class SyslogTarget:
    """A syslog receiver over TCP (RFC 5424 messages, RFC 6587 octet-counting framing).

    Attributes:
        host: the receiver's name or address.
        port: its TCP port (514 is usual without TLS, 6514 with it).
        tls: wrap the connection in TLS (RFC 5425), the receiver's certificate checked against
            ``ca`` (else the system's trusted CAs) and its name against ``host``.
        ca: a PEM file of the CA(s) that sign the receiver's certificate.
        cert: a PEM client certificate, for a receiver that asks for one (mutual TLS).
        key: the PEM private key of ``cert`` (unencrypted; keep it owner-only); None: in ``cert``.
        hostname: the HOSTNAME field of each message; None: this machine's name.
        timeout: seconds a connection or a send may take before it counts as failed.
        resend_window: entries before the cursor sent again after every new connection (0:
            none), since plain TCP cannot tell which of them the receiver read (entries).
    """

    host: str
    port: int
    tls: bool = False
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    hostname: str | None = None
    timeout: float = 10.0
    resend_window: int = 0


class SyslogSender:
    """Sends entries to a :class:`SyslogTarget` over one kept-open connection (reconnected when it
    breaks). Before each batch, and after it, the connection is checked: a receiver that closed it
    (stopped, restarted) makes :meth:`send` raise, so the batch is not counted as sent. A batch
    is counted as sent once the local kernel took it: the forwarder sends the last
    ``target.resend_window`` entries again after every new connection (:meth:`will_reconnect`).

    Args:
        target: the receiver.
        origin: the property and store named in each message.
    """

    kind = "syslog"

    def __init__(self, target: SyslogTarget, origin: Origin | None = None) -> None:
        self.target, self.origin = target, origin
        self.name = f"syslog {target.host}:{target.port}" + (" (TLS)" if target.tls else "")
        self.resend_window = target.resend_window
        self._hostname = target.hostname or socket.gethostname()
        self._sock: socket.socket | None = None

    def will_reconnect(self) -> bool:
        """True if the next send opens a new connection (none yet, or the receiver closed it)."""
        if self._sock is not None and self._closed_by_peer(self._sock):
            self.close()
        return self._sock is None

    def _connect(self) -> socket.socket:
        t = self.target
        sock = socket.create_connection((t.host, t.port), timeout=t.timeout)
        if not t.tls:
            return sock
        context = ssl.create_default_context(cafile=str(t.ca) if t.ca else None)
        if t.cert is not None:
            context.load_cert_chain(str(t.cert), str(t.key) if t.key else None)
        try:
            return context.wrap_socket(sock, server_hostname=t.host)
        except BaseException:
            sock.close()
            raise

    def _closed_by_peer(self, sock: socket.socket) -> bool:
        """True if the receiver closed the connection (or it failed): a syslog receiver never
        sends, so a readable socket holds an end of file or an error (a TLS 1.3 session ticket
        is read and ignored)."""
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        sock.setblocking(False)
        try:
            return sock.recv(4096) == b""
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except OSError:
            return True
        finally:
            sock.settimeout(self.target.timeout)

    def send(self, records: Sequence[AccessRecord]) -> None:
        """Send ``records`` in order over the connection (opened if need be).

        Raises:
            OSError: the receiver is unreachable, refused, closed the connection or timed out
                (``ssl.SSLError`` included); the connection is dropped and made again next time.
        """
        if not records:
            return
        data = b"".join(octet_counted(syslog_message(r, self._hostname, origin=self.origin)) for r in records)
        try:
            if self._sock is not None and self._closed_by_peer(self._sock):
                self.close()
            if self._sock is None:
                self._sock = self._connect()
            self._sock.sendall(data)
            if self._closed_by_peer(self._sock):
                raise ConnectionResetError("the receiver closed the connection during the batch")
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        """Close the connection, if open."""
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None


@dataclass(frozen=True)
class RelpTarget:
    """A RELP receiver (rsyslog's ``imrelp``): plain TCP, each message acknowledged.

    Attributes:
        host: the receiver's name or address.
        port: its TCP port (rsyslog's examples use 2514).
        hostname: the HOSTNAME field of each message; None: this machine's name.
        timeout: seconds a connection, a send or an answer may take before it counts as failed.
        window: messages sent before their answers are awaited (RELP's window; 128 as in
            librelp's default).
    """

    host: str
    port: int
    hostname: str | None = None
    timeout: float = 10.0
    window: int = 128


_RELP_HEAD = re.compile(rb"([0-9]{1,9}) ([A-Za-z]{1,32}) ([0-9]{1,9})([ \n])")
"""A RELP frame's header (``TXNR SP COMMAND SP DATALEN``) and the byte after it (SP before
data, LF for a frame without data)."""
_RELP_PREFIX = re.compile(rb"[0-9]{0,9}( [A-Za-z]{0,32}( [0-9]{0,9})?)?$")
"""What a header not yet whole may look like."""


class RelpError(OSError):
    """The RELP receiver answered something other than ``200`` or broke the protocol."""


RELP_OFFER = b"relp_version=0\nrelp_software=dealtrail\ncommands=syslog"
"""What the ``open`` command offers (librelp's ``relp_version=0``, the ``syslog`` command only)."""


class RelpSender:
    """Sends entries over RELP, the Reliable Event Logging Protocol of rsyslog and librelp: each
    frame is ``TXNR SP COMMAND SP DATALEN [SP DATA] LF``; the session opens with ``open`` (the
    offer :data:`RELP_OFFER`), each entry is a ``syslog`` command whose message is the RFC 5424
    text of :func:`syslog_message`, and the receiver answers each transaction number with ``rsp``
    and a status (``200 OK`` once it has taken the message). :meth:`send` returns only when every
    record has its ``200``; when the answers stop (a receiver that never reads, a timeout, a
    closed connection) or one is not ``200``, it raises :class:`PartialDelivery` with how many of
    the first records were acknowledged, so the cursor moves past those and no further.

    A ``serverclose`` from the receiver (rsyslog stopping) ends the session: what it has not
    acknowledged is sent again on a new one. An entry is repeated only when its answer is lost
    with the connection after the receiver took it.

    Args:
        target: the receiver.
        origin: the property and store named in each message.
    """

    kind = "relp"

    def __init__(self, target: RelpTarget, origin: Origin | None = None) -> None:
        self.target, self.origin = target, origin
        self.name = f"relp {target.host}:{target.port}"
        self._hostname = target.hostname or socket.gethostname()
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._txnr = 0

    def _next_txnr(self) -> int:
        self._txnr = self._txnr % 999_999_999 + 1  # RELP's transaction numbers: 1..999999999, then 1 again
        return self._txnr

    @staticmethod
    def frame(txnr: int, command: str, data: bytes = b"") -> bytes:
        """One RELP frame: ``TXNR SP COMMAND SP DATALEN [SP DATA] LF``."""
        head = f"{txnr} {command} {len(data)}".encode()
        return head + (b" " + data if data else b"") + b"\n"

    def _read_frame(self) -> tuple[int, str, bytes]:
        """The next frame from the receiver: ``(txnr, command, data)``.

        Raises:
            OSError: the connection closed or timed out; :class:`RelpError` for a malformed frame.
        """
        assert self._sock is not None
        while True:
            head = _RELP_HEAD.match(self._buffer)
            if head is not None:
                length, start = int(head[3]), head.end()
                if length == 0 or head[4] == b"\n":
                    if length or head[4] != b"\n":
                        raise RelpError(f"a malformed RELP frame from the receiver: {self._buffer[:60]!r}")
                    self._buffer = self._buffer[start:]
                    return int(head[1]), head[2].decode("ascii"), b""
                if len(self._buffer) >= start + length + 1:
                    data, trailer = self._buffer[start : start + length], self._buffer[start + length]
                    if trailer != 0x0A:
                        raise RelpError("a RELP frame from the receiver without its trailer")
                    self._buffer = self._buffer[start + length + 1 :]
                    return int(head[1]), head[2].decode("ascii"), data
            elif len(self._buffer) > 64 or not _RELP_PREFIX.match(self._buffer):
                raise RelpError(f"a malformed RELP frame from the receiver: {self._buffer[:60]!r}")
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("the RELP receiver closed the connection")
            self._buffer += chunk

    def _answer(self, txnr: int) -> bytes:
        """The data of the ``rsp`` to ``txnr`` (a ``serverclose`` or another answer first fails)."""
        got, command, data = self._read_frame()
        if command == "serverclose":
            raise ConnectionResetError("the RELP receiver closed the session (serverclose)")
        if command != "rsp" or got != txnr:
            raise RelpError(f"the RELP receiver answered {command} {got}, not rsp {txnr}")
        return data

    def _open(self) -> None:
        t = self.target
        self._sock = socket.create_connection((t.host, t.port), timeout=t.timeout)
        self._buffer, self._txnr = b"", 0
        txnr = self._next_txnr()
        self._sock.sendall(self.frame(txnr, "open", RELP_OFFER))
        status = self._answer(txnr)
        if not status.startswith(b"200"):
            raise RelpError(f"the RELP receiver refused the session: {status[:200]!r}")

    def send(self, records: Sequence[AccessRecord]) -> None:
        """Send ``records`` in order and wait for each one's ``rsp 200``.

        Raises:
            PartialDelivery: the receiver is unreachable, refused, closed the session, timed out
                or answered other than ``200`` after acknowledging the first ``delivered``
                records; the connection is dropped and made again next time.
        """
        delivered = 0
        try:
            if self._sock is None:
                self._open()
            assert self._sock is not None
            pending: deque[int] = deque()
            for record in records:
                txnr = self._next_txnr()
                message = syslog_message(record, self._hostname, origin=self.origin)
                self._sock.sendall(self.frame(txnr, "syslog", message))
                pending.append(txnr)
                if len(pending) >= self.target.window:
                    delivered += self._acknowledged(pending.popleft())
            while pending:
                delivered += self._acknowledged(pending.popleft())
        except OSError as exc:
            self._drop()
            raise PartialDelivery(delivered, f"{type(exc).__name__}: {exc}") from exc

    def _acknowledged(self, txnr: int) -> int:
        status = self._answer(txnr)
        if not status.startswith(b"200"):
            raise RelpError(f"the RELP receiver did not take message {txnr}: {status[:200]!r}")
        return 1

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock, self._buffer = None, b""

    def close(self) -> None:
        """End the session (``close``, its answer awaited briefly) and the connection."""
        if self._sock is None:
            return
        try:
            self._sock.settimeout(min(2.0, self.target.timeout))
            txnr = self._next_txnr()
            self._sock.sendall(self.frame(txnr, "close"))
            with contextlib.suppress(OSError):
                self._answer(txnr)
        except OSError:
            pass
        finally:
            self._drop()


class JsonLinesSender:
    r"""Appends entries to a file, one JSON object per line (the stored record: ``seq``,
    ``entry_id``, ``at``, ``user``, ``client``, ``kind``, ``outcome``, ``detail``, ``prev_hash``,
    ``hash``, ``schema_version``), flushed to disk before the cursor moves. A file it creates is
    owner-only (make it beforehand, readable by the shipper's group, to share it: its mode is
    kept); it is only ever appended to, and a last line cut short by a crash is ended before the
    next one is written. With an ``origin``, each line also holds ``property`` and ``store``.
    Control characters are JSON escapes (``\\u2028`` ...), so a line reads as it is.

    Args:
        path: the file.
        origin: the property and store named in each line.
    """

    kind = "jsonl"

    def __init__(self, path: Path, origin: Origin | None = None) -> None:
        self.path, self.origin = path, origin
        self.name = f"file {path}"

    def _line(self, record: AccessRecord) -> str:
        data = record.model_dump(mode="json")
        if self.origin is not None:
            data["property"], data["store"] = self.origin.property, self.origin.store
        # ensure_ascii=False keeps names readable; the controls JSON leaves raw are escaped
        return "".join(f"\\u{ord(c):04x}" if ord(c) in _CONTROLS else c for c in json.dumps(data, ensure_ascii=False))

    def send(self, records: Sequence[AccessRecord]) -> None:
        """Append ``records`` as lines, then fsync.

        Raises:
            OSError: the file cannot be written (a full disk, no permission).
        """
        if not records:
            return
        data = "".join(self._line(r) + "\n" for r in records).encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size:
                with open(self.path, "rb") as f:
                    f.seek(size - 1)
                    if f.read(1) != b"\n":
                        data = b"\n" + data  # a line cut short: the next one starts on its own
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Nothing held open."""


class CursorError(ValueError):
    """A cursor that does not belong to this store's log (the hash it recorded differs)."""


@dataclass(frozen=True)
class Cursor:
    """The last entry forwarded to one target, kept in an owner-only file (JSON: ``seq`` and
    ``hash``), replaced atomically (a new file, fsynced, renamed over the old one)."""

    path: Path

    def read(self) -> tuple[int, str | None]:
        """``(seq, hash)`` of the last forwarded entry; ``(0, None)`` before the first."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return 0, None
        except (OSError, ValueError) as exc:
            raise CursorError(f"the forwarding cursor {self.path} cannot be read: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("seq"), int) or data["seq"] < 0:
            raise CursorError(f"the forwarding cursor {self.path} is not a cursor")
        digest = data.get("hash")
        return int(data["seq"]), str(digest) if digest else None

    def write(self, seq: int, digest: str | None) -> None:
        """Record ``(seq, hash)`` as the last forwarded entry (mode 0600 whatever the umask)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, json.dumps({"seq": seq, "hash": digest}).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)


@dataclass
class _Route:
    sender: Sender
    cursor: Cursor
    failing: bool = False


class AccessForwarder:
    """Forwards the store's access log to each target after its cursor (see the module text).

    Args:
        con: a connection of the store (each round reads through its own cursor of it).
        routes: ``(sender, cursor)`` per target.
        batch: entries read and sent at a time.
        say: where the one-line notices go (an outage, a resumption); default standard error.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        routes: Sequence[tuple[Sender, Cursor]],
        batch: int = 500,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.con, self.batch = con, batch
        self.routes = [_Route(s, c) for s, c in routes]
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))

    def run_once(self) -> tuple[int, bool]:
        """Forward every stored entry each target has not had yet.

        Returns:
            ``(forwarded, ok)``: how many entries were sent (all targets together) and whether
            every target is caught up (False: one failed, and is retried by the next round).
        """
        sent, ok = 0, True
        cur = self.con.cursor()
        try:
            for route in self.routes:
                try:
                    sent += self._forward(cur, route)
                    if route.failing:
                        route.failing = False
                        seq, _ = route.cursor.read()
                        self.say(f"access log: forwarding to {route.sender.name} resumed (up to entry {seq})")
                except (OSError, CursorError) as exc:
                    ok = False
                    if not route.failing:
                        route.failing = True
                        seq, _ = _safe_read(route.cursor)
                        self.say(
                            f"access log: forwarding to {route.sender.name} failed ({type(exc).__name__}: {exc}); "
                            f"entries after {seq} are kept in the store and sent when it answers"
                        )
            self._pending(cur)
        finally:
            cur.close()
        return sent, ok

    def _forward(self, cur: duckdb.DuckDBPyConnection, route: _Route) -> int:
        seq, digest = route.cursor.read()
        if seq and digest is not None:
            stored = access_log.hash_at(cur, seq)
            if stored is not None and stored != digest:
                raise CursorError(
                    f"entry {seq} of this store is not the one {route.cursor.path} last forwarded "
                    "(another store's cursor?): move the cursor file away to forward this log from its start"
                )
        window = int(getattr(route.sender, "resend_window", 0) or 0)
        if window and seq and route.sender.will_reconnect():  # type: ignore[attr-defined]
            # plain TCP: what the last receiver's kernel took may never have been read
            again = access_log.after(cur, max(0, seq - window), min(window, seq))
            if again:
                route.sender.send(again)
                self.say(
                    f"access log: sent entries {again[0].seq}-{again[-1].seq} to {route.sender.name} again "
                    "(a new connection; plain TCP does not say which of them the last one read)"
                )
        sent = 0
        while records := access_log.after(cur, seq, self.batch):
            try:
                route.sender.send(records)
            except PartialDelivery as exc:
                if exc.delivered:
                    last = records[exc.delivered - 1]
                    route.cursor.write(last.seq, last.hash)
                    sent += exc.delivered
                    FORWARD_SENT.labels(route.sender.kind).inc(exc.delivered)
                raise
            seq, digest = records[-1].seq, records[-1].hash
            route.cursor.write(seq, digest)
            sent += len(records)
            FORWARD_SENT.labels(route.sender.kind).inc(len(records))
        return sent

    def _pending(self, cur: duckdb.DuckDBPyConnection) -> None:
        """Set each target's ``dealtrail_access_forward_pending_entries``: entries after its cursor."""
        try:
            head = access_log.head(cur)
        except duckdb.Error:
            return
        last = head[0] if head is not None else 0
        for route in self.routes:
            seq, _ = _safe_read(route.cursor)
            FORWARD_PENDING.labels(route.sender.kind).set(max(0, last - seq))

    def close(self) -> None:
        """Close every target's connection."""
        for route in self.routes:
            route.sender.close()


def _safe_read(cursor: Cursor) -> tuple[int, str | None]:
    try:
        return cursor.read()
    except CursorError:
        return 0, None


class ForwardLoop:
    """Runs an :class:`AccessForwarder` in a daemon thread: a round every ``every`` seconds (at
    once when :attr:`wake` is set); after a failed round the wait doubles, up to ``retry_max``.

    Args:
        forwarder: what to run.
        every: seconds between rounds while the targets answer.
        retry_max: the longest wait between retries of a failing target (seconds).
    """

    def __init__(self, forwarder: AccessForwarder, every: float = 1.0, retry_max: float = 30.0) -> None:
        self.forwarder, self.every, self.retry_max = forwarder, every, retry_max
        self.wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dealtrail-access-forward", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        wait = self.every
        while not self._stopped.is_set():
            try:
                _, ok = self.forwarder.run_once()
            except Exception as exc:  # a store read failed: one line, and go on
                self.forwarder.say(f"access log: forwarding round failed ({type(exc).__name__}: {exc})")
                ok = False
            wait = self.every if ok else min(max(wait * 2, self.every), self.retry_max)
            self.wake.wait(wait)
            self.wake.clear()

    def stop(self) -> None:
        """Let the round in progress finish (one more round first: what was written last goes
        out), then end the thread and close the connections."""
        self._stopped.set()
        self.wake.set()
        self._thread.join(timeout=30)
        try:
            self.forwarder.run_once()
        finally:
            self.forwarder.close()
