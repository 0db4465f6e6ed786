"""The access log leaves the building (issue 34, item 6): forwarded to a real syslog receiver,
Debian's rsyslogd listening on a loopback port (imtcp, octet-counted RFC 5424 messages written to
a file in the test's folder), and to a JSON-lines file; the receiver stopped for 30 s while entries
are written, then restarted, receives every entry once, in order.

Skips without rsyslogd (``apt-get install rsyslog``) unless ``CI=true``, where it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dealtrail.reporting.access_forward import (
    AccessForwarder,
    Cursor,
    ForwardLoop,
    JsonLinesSender,
    SyslogSender,
    SyslogTarget,
)
from projections.records import access_log
from projections.store.store import Store
from schemas.access import AccessEntry

T0 = datetime(2026, 12, 3, 17, 0, tzinfo=UTC)
OUTAGE_SECONDS = 30.0  # the outage: the receiver is away this long while entries are written


def _rsyslogd() -> str:
    found = shutil.which("rsyslogd") or next(
        (p for p in ("/usr/sbin/rsyslogd", "/sbin/rsyslogd") if os.access(p, os.X_OK)), None
    )
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("rsyslogd is missing: .ci/run installs Debian's rsyslog (apt-get install rsyslog)")
        pytest.skip("rsyslogd is missing (apt-get install rsyslog): no real syslog receiver to forward to")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    """rsyslogd in the foreground (``-n``) as an imtcp listener on 127.0.0.1:``port``, writing each
    message as received (``%rawmsg%``) to ``out``; started and stopped by the test."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary, self.folder = binary, folder
        self.port = _free_port()
        self.out = folder / "received.log"
        self.conf = folder / "rsyslog.conf"
        self.pidfile = folder / "rsyslogd.pid"
        (folder / "work").mkdir()
        self.conf.write_text(
            f'global(workDirectory="{folder / "work"}")\n'
            'module(load="imtcp")\n'
            'template(name="raw" type="string" string="%rawmsg%\\n")\n'
            f'input(type="imtcp" address="127.0.0.1" port="{self.port}")\n'
            f'action(type="omfile" file="{self.out}" template="raw" flushOnTXEnd="on" asyncWriting="off")\n'
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with (self.folder / "rsyslogd.stderr").open("ab") as stderr:
            self.proc = subprocess.Popen(
                [self.binary, "-n", "-f", str(self.conf), "-i", str(self.pidfile)],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.folder / "rsyslogd.stderr").read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("rsyslogd did not listen within 20 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)
        self.proc = None

    def seqs(self) -> list[int]:
        """The ``seq`` of each message received, in the order written."""
        if not self.out.exists():
            return []
        return [int(m) for m in re.findall(r'\[dealtrail@32473 seq="(\d+)"', self.out.read_text(encoding="utf-8"))]


@pytest.fixture()
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    r = Receiver(_rsyslogd(), tmp_path)
    r.start()
    yield r
    r.stop()


def _entries(n: int, start: int) -> list[AccessEntry]:
    return [
        AccessEntry(
            entry_id=f"E{start + i:06d}",
            at=T0 + timedelta(seconds=start + i),
            user="rita",
            client="10.0.0.7",
            kind="finding_viewed",
            outcome="ok",
            detail=f'finding {start + i:04x} "quoted" [bracketed]',
        )
        for i in range(n)
    ]


def _wait_for(check: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return bool(check())  # type: ignore[operator]


@pytest.mark.slow
def test_a_syslog_receiver_stopped_for_30_s_and_restarted_receives_every_entry_once_in_order(
    receiver: Receiver, tmp_path: Path
) -> None:
    old = os.umask(0o077)  # as deployed: dealtrail's main sets it
    try:
        store = Store(tmp_path / "forward.duckdb")
        access_log.append(store.con, _entries(20, 0))
        jsonl = tmp_path / "siem" / "access.jsonl"
        jsonl.parent.mkdir()
        forwarder = AccessForwarder(
            store.con,
            [
                (
                    SyslogSender(SyslogTarget("127.0.0.1", receiver.port, hostname="pit-1")),
                    Cursor(tmp_path / "syslog.cursor"),
                ),
                (JsonLinesSender(jsonl), Cursor(tmp_path / "jsonl.cursor")),
            ],
            batch=7,  # several batches per round
        )
        loop = ForwardLoop(forwarder, every=0.2, retry_max=2.0)
        try:
            assert _wait_for(lambda: receiver.seqs() == list(range(1, 21)), 20), receiver.seqs()
            receiver.stop()
            written = 20
            outage_end = time.monotonic() + OUTAGE_SECONDS
            while time.monotonic() < outage_end:  # entries keep coming while the receiver is away
                access_log.append(store.con, _entries(3, written))
                written += 3
                loop.wake.set()
                time.sleep(min(3.0, max(0.0, outage_end - time.monotonic())))
            assert receiver.seqs() == list(range(1, 21))  # nothing arrived meanwhile
            receiver.start()
            access_log.append(store.con, _entries(2, written))
            written += 2
            assert _wait_for(lambda: len(receiver.seqs()) >= written, 30), receiver.seqs()
            time.sleep(1.0)  # a duplicate would arrive now
        finally:
            loop.stop()
        assert receiver.seqs() == list(range(1, written + 1))  # every entry once, in chain order
        lines = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
        assert [x["seq"] for x in lines] == list(range(1, written + 1))  # the file target had no outage
        assert lines[0]["hash"] == access_log.hash_at(store.con, 1)
        text = receiver.out.read_text(encoding="utf-8")
        assert "detail" not in text.split("\n")[0].split("]")[0]  # the detail is the message, not a parameter
        assert 'finding 0000 "quoted" [bracketed]' in text and "pit-1 dealtrail - finding_viewed" in text
        for cursor in ("syslog.cursor", "jsonl.cursor"):
            path = tmp_path / cursor
            assert path.stat().st_mode & 0o777 == 0o600
            assert json.loads(path.read_text())["seq"] == written
        store.close()
    finally:
        os.umask(old)


def test_the_file_target_appends_lines_ends_a_line_cut_short_and_makes_owner_only_files(tmp_path: Path) -> None:
    old = os.umask(0o022)  # even under a lax umask
    try:
        store = Store(tmp_path / "file.duckdb")
        access_log.append(store.con, _entries(3, 0))
        out = tmp_path / "access.jsonl"
        out.write_bytes(b'{"seq": 0, "cut sh')  # a line a crash cut short
        cursor = Cursor(tmp_path / "file.cursor")
        forwarder = AccessForwarder(store.con, [(JsonLinesSender(out), cursor)])
        assert forwarder.run_once() == (3, True)
        access_log.append(store.con, _entries(2, 3))
        assert forwarder.run_once() == (2, True) and forwarder.run_once() == (0, True)
        lines = out.read_text(encoding="utf-8").splitlines()
        assert lines[0] == '{"seq": 0, "cut sh' and [json.loads(x)["seq"] for x in lines[1:]] == [1, 2, 3, 4, 5]
        assert cursor.read() == (5, access_log.hash_at(store.con, 5))
        assert cursor.path.stat().st_mode & 0o777 == 0o600
        assert out.stat().st_mode & 0o777 == 0o644  # a file the operator made keeps its mode (a shipper's group)
        fresh = tmp_path / "fresh.jsonl"
        assert AccessForwarder(store.con, [(JsonLinesSender(fresh), Cursor(tmp_path / "f.cursor"))]).run_once()[0] == 5
        assert fresh.stat().st_mode & 0o777 == 0o600  # one it makes is owner-only
        store.close()
    finally:
        os.umask(old)


def test_a_cursor_of_another_stores_log_is_refused_with_one_line_and_nothing_is_sent(tmp_path: Path) -> None:
    store = Store(tmp_path / "other.duckdb")
    access_log.append(store.con, _entries(3, 0))
    cursor = Cursor(tmp_path / "c.cursor")
    cursor.write(2, "f" * 64)  # forwarded from another log up to its entry 2
    said: list[str] = []
    out = tmp_path / "x.jsonl"
    forwarder = AccessForwarder(store.con, [(JsonLinesSender(out), cursor)], say=said.append)
    assert forwarder.run_once() == (0, False) and forwarder.run_once() == (0, False)
    assert len(said) == 1 and "is not the one" in said[0] and "move the cursor file away" in said[0]
    assert not out.exists()
    store.close()


def test_an_unreachable_receiver_is_said_once_and_the_entries_wait_in_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "away.duckdb")
    access_log.append(store.con, _entries(2, 0))
    said: list[str] = []
    cursor = Cursor(tmp_path / "s.cursor")
    forwarder = AccessForwarder(
        store.con, [(SyslogSender(SyslogTarget("127.0.0.1", _free_port(), timeout=2)), cursor)], say=said.append
    )
    assert forwarder.run_once() == (0, False) and forwarder.run_once() == (0, False)
    assert len(said) == 1 and "forwarding to syslog 127.0.0.1:" in said[0] and "entries after 0 are kept" in said[0]
    assert cursor.read() == (0, None)
    store.close()


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (and its key), PEM files in ``folder``."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "siem.test")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "siem.pem", folder / "siem.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_with_tls_the_receiver_is_verified_against_the_ca_and_gets_octet_counted_messages(tmp_path: Path) -> None:
    import ssl
    import threading

    cert, key = _self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    received: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        data = b""
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                while chunk := tls.recv(65536):
                    data += chunk
        except (ssl.SSLError, OSError):  # the client refused our certificate, or left without close_notify
            pass
        while data:  # octet counting: LEN SP MSG
            size, _, rest = data.partition(b" ")
            received.append(rest[: int(size)])
            data = rest[int(size) :]

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    store = Store(tmp_path / "tls.duckdb")
    access_log.append(store.con, _entries(3, 0))
    untrusted = AccessForwarder(
        store.con,
        [(SyslogSender(SyslogTarget("127.0.0.1", port, tls=True, timeout=5)), Cursor(tmp_path / "u.cursor"))],
        say=lambda line: None,
    )
    assert untrusted.run_once() == (0, False)  # not signed by a CA the system trusts: refused
    untrusted.close()
    thread.join(timeout=5)
    listener.close()
    # the same with the receiver's CA given
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    sender = SyslogSender(SyslogTarget("127.0.0.1", port, tls=True, ca=cert, timeout=5))
    forwarder = AccessForwarder(store.con, [(sender, Cursor(tmp_path / "t.cursor"))])
    assert forwarder.run_once() == (3, True)
    forwarder.close()
    thread.join(timeout=5)
    listener.close()
    assert [re.search(rb'seq="(\d+)"', m).group(1) for m in received] == [b"1", b"2", b"3"]  # type: ignore[union-attr]
    assert all(m.startswith(b"<86>1 2026-12-03T17:00:0") for m in received)
    store.close()


def test_access_log_forward_sends_what_the_settings_name_from_the_cursor_and_says_why_it_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from dealtrail.cli import app as cli

    monkeypatch.setenv("TZ", "America/New_York")
    db = tmp_path / "cli.duckdb"
    with Store(db) as store:
        access_log.append(store.con, _entries(4, 0))
    r = CliRunner().invoke(cli, ["access-log", "forward", "--db", str(db)])
    assert r.exit_code == 2 and "no target" in r.output
    out, cursors = tmp_path / "siem.jsonl", tmp_path / "cursors"
    cursors.mkdir()
    monkeypatch.setenv("DEALTRAIL_ACCESS_FORWARD__JSONL_PATH", str(out))
    monkeypatch.setenv("DEALTRAIL_ACCESS_FORWARD__CURSOR_DIR", str(cursors))
    r = CliRunner().invoke(cli, ["access-log", "forward", "--db", str(db)])
    assert r.exit_code == 0 and "4 entries forwarded" in r.output, r.output
    r = CliRunner().invoke(cli, ["access-log", "forward", "--db", str(db)])
    assert r.exit_code == 0 and "0 entries forwarded" in r.output  # resumed from its cursor
    assert json.loads(out.read_text().splitlines()[0])["at"] == "2026-12-03T17:00:00Z"  # UTC
    assert json.loads((cursors / "cli.duckdb.access-forward.jsonl.cursor").read_text())["seq"] == 4
    monkeypatch.setenv("DEALTRAIL_ACCESS_FORWARD__SYSLOG_HOST", "127.0.0.1")
    monkeypatch.setenv("DEALTRAIL_ACCESS_FORWARD__SYSLOG_PORT", str(_free_port()))
    r = CliRunner().invoke(cli, ["access-log", "forward", "--db", str(db)])
    assert r.exit_code == 1 and "forwarding to syslog 127.0.0.1:" in r.output and "run again" in r.output
    monkeypatch.setenv("DEALTRAIL_ACCESS_FORWARD__SYSLOG_CA", str(tmp_path / "ca.pem"))
    r = CliRunner().invoke(cli, ["access-log", "forward", "--db", str(db)])
    assert r.exit_code != 0 and "set syslog_tls=true too" in " ".join(str(r.output).split()) + str(r.exception)
