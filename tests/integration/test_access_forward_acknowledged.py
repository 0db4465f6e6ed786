"""Delivery that means received (issue 49, item 4): the access log forwarded to Debian's rsyslogd
as a RELP receiver (``imrelp``, package rsyslog-relp) and as a plain TCP receiver (``imtcp``), on
loopback ports, across a receiver stopped and restarted mid-stream and a receiver that accepts the
connection and never reads, then is replaced.

RELP: every entry arrives exactly once, and the cursor never passes an entry without its
``rsp 200``. Plain TCP: every entry arrives (at least once: the resend window sends the last
entries again after a new connection), although the cursor moved past entries never read.

Skips without imrelp unless ``DEALTRAIL_REQUIRE_RELP=1`` (set by .ci/run), where it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dealtrail.reporting.access_forward import (
    AccessForwarder,
    Cursor,
    ForwardLoop,
    Origin,
    RelpSender,
    RelpTarget,
    SyslogSender,
    SyslogTarget,
)
from projections.records import access_log
from projections.store.store import Store
from schemas.access import AccessEntry

T0 = datetime(2026, 12, 4, 22, 0, tzinfo=UTC)
MODULES = Path("/usr/lib/x86_64-linux-gnu/rsyslog")


def _rsyslogd(module: str) -> str:
    found = shutil.which("rsyslogd") or next(
        (p for p in ("/usr/sbin/rsyslogd", "/sbin/rsyslogd") if os.access(p, os.X_OK)), None
    )
    has_module = any((folder / f"{module}.so").exists() for folder in (MODULES, Path("/usr/lib/rsyslog")))
    if found is None or not has_module:
        if os.environ.get("DEALTRAIL_REQUIRE_RELP") == "1":
            pytest.fail(f"rsyslogd with {module} is missing: .ci/run installs Debian's rsyslog and rsyslog-relp")
        pytest.skip(f"rsyslogd with {module} is missing (apt-get install rsyslog rsyslog-relp)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    """rsyslogd in the foreground as an ``imrelp`` or ``imtcp`` listener on 127.0.0.1:``port``,
    writing each message as received to ``out`` (appended to across restarts)."""

    def __init__(self, module: str, folder: Path, port: int) -> None:
        self.binary = _rsyslogd(module)
        self.folder, self.port = folder, port
        self.out = folder / "received.log"
        self.conf = folder / "rsyslog.conf"
        (folder / "work").mkdir(exist_ok=True)
        self.conf.write_text(
            f'global(workDirectory="{folder / "work"}")\n'
            f'module(load="{module}")\n'
            'template(name="raw" type="string" string="%rawmsg%\\n")\n'
            f'input(type="{module}" address="127.0.0.1" port="{port}")\n'
            f'action(type="omfile" file="{self.out}" template="raw" flushOnTXEnd="on" asyncWriting="off")\n'
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with (self.folder / "rsyslogd.stderr").open("ab") as stderr:
            self.proc = subprocess.Popen(
                [self.binary, "-n", "-f", str(self.conf), "-i", str(self.folder / "rsyslogd.pid")],
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

    def messages(self) -> list[str]:
        if not self.out.exists():
            return []
        return [line for line in self.out.read_text(encoding="utf-8").splitlines() if line]

    def seqs(self) -> list[int]:
        """The ``seq`` of each message received, in the order written."""
        return [int(m) for m in re.findall(r'\[dealtrail@32473 seq="(\d+)"', "\n".join(self.messages()))]


class NeverReads:
    """A TCP listener on 127.0.0.1:``port`` that accepts connections and never reads (its
    receive buffer kept small), until :meth:`stop` closes them."""

    def __init__(self, port: int) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen()
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        try:
            while True:
                conn, _ = self.listener.accept()
                self.accepted.append(conn)
        except OSError:
            return

    def stop(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # ends the accept
        self.listener.close()
        self._thread.join(timeout=5)
        for conn in self.accepted:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            conn.close()  # a reset: what its buffer held is gone, as with a receiver that died


def _entries(n: int, start: int) -> list[AccessEntry]:
    return [
        AccessEntry(
            entry_id=f"R{start + i:06d}",
            at=T0 + timedelta(seconds=start + i),
            user="rita\u2028\u202eadmin" if i == 0 else "rita",  # a typed name with a separator and an override
            client="10.0.0.7",
            kind="finding_viewed",
            outcome="ok",
            detail=f"finding {start + i:04x} " + "x" * 300,  # about 600 bytes a message
        )
        for i in range(n)
    ]


def _wait_for(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


ORIGIN = Origin("Keystone Downs", "/srv/dealtrail/floor-a.duckdb")


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "forward.duckdb")
    yield s
    s.close()


def test_relp_receiver_stopped_and_restarted_mid_stream_gets_every_entry_exactly_once(
    store: Store, tmp_path: Path
) -> None:
    receiver = Receiver("imrelp", tmp_path, _free_port())
    receiver.start()
    access_log.append(store.con, _entries(40, 0))
    cursor = Cursor(tmp_path / "relp.cursor")
    sender = RelpSender(RelpTarget("127.0.0.1", receiver.port, hostname="pit-1", timeout=2.0), ORIGIN)
    loop = ForwardLoop(AccessForwarder(store.con, [(sender, cursor)], batch=15), every=0.2, retry_max=1.0)
    try:
        assert _wait_for(lambda: receiver.seqs() == list(range(1, 41)), 20), receiver.seqs()
        receiver.stop()
        access_log.append(store.con, _entries(40, 40))  # written while the receiver is away
        loop.wake.set()
        time.sleep(1.5)
        assert cursor.read()[0] == 40  # nothing unacknowledged is counted as delivered
        receiver.start()
        access_log.append(store.con, _entries(20, 80))
        loop.wake.set()
        assert _wait_for(lambda: len(receiver.seqs()) >= 100, 30), receiver.seqs()
        time.sleep(1.0)  # a duplicate would arrive now
    finally:
        loop.stop()
        receiver.stop()
    assert receiver.seqs() == list(range(1, 101))  # exactly once, in chain order
    assert cursor.read()[0] == 100
    first = receiver.messages()[0]
    assert 'property="Keystone Downs" store="/srv/dealtrail/floor-a.duckdb"' in first
    assert "rita\\u2028\\u202eadmin" in first and "\u2028" not in first and "\u202e" not in first


def test_relp_receiver_that_never_reads_moves_no_cursor_and_its_replacement_gets_every_entry_once(
    store: Store, tmp_path: Path
) -> None:
    port = _free_port()
    stalled = NeverReads(port)
    access_log.append(store.con, _entries(300, 0))
    cursor = Cursor(tmp_path / "relp.cursor")
    sender = RelpSender(RelpTarget("127.0.0.1", port, timeout=1.0), ORIGIN)
    forwarder = AccessForwarder(store.con, [(sender, cursor)], batch=100, say=lambda line: None)
    try:
        assert forwarder.run_once() == (0, False)  # no answer: nothing counted as delivered
        assert cursor.read() == (0, None)
    finally:
        stalled.stop()
    receiver = Receiver("imrelp", tmp_path, port)
    receiver.start()
    try:
        assert forwarder.run_once() == (300, True)
        assert _wait_for(lambda: len(receiver.seqs()) >= 300, 20)
        time.sleep(0.5)
    finally:
        forwarder.close()
        receiver.stop()
    assert receiver.seqs() == list(range(1, 301))


def test_tcp_receiver_that_never_reads_then_replaced_gets_every_entry_through_the_resend_window(
    store: Store, tmp_path: Path
) -> None:
    port = _free_port()
    stalled = NeverReads(port)
    access_log.append(store.con, _entries(400, 0))
    cursor = Cursor(tmp_path / "syslog.cursor")
    target = SyslogTarget("127.0.0.1", port, timeout=1.0, resend_window=10_000)
    lines: list[str] = []
    forwarder = AccessForwarder(store.con, [(SyslogSender(target, ORIGIN), cursor)], batch=50, say=lines.append)
    try:
        forwarder.run_once()
        taken = cursor.read()[0]
        assert taken > 0  # plain TCP counts what the kernel took as sent: entries nobody read
    finally:
        stalled.stop()
    receiver = Receiver("imtcp", tmp_path, port)
    receiver.start()
    try:
        for _ in range(5):  # the reset is seen, a new connection is made, the window is sent again
            if forwarder.run_once()[1] and cursor.read()[0] == 400:
                break
            time.sleep(0.3)
        assert _wait_for(lambda: set(receiver.seqs()) == set(range(1, 401)), 20), sorted(set(receiver.seqs()))[:5]
        time.sleep(0.5)
    finally:
        forwarder.close()
        receiver.stop()
    seqs = receiver.seqs()
    assert sorted(set(seqs)) == list(range(1, 401))  # none lost
    assert any("again" in line for line in lines)
    assert all(s <= taken for s in {s for s in seqs if seqs.count(s) > 1})  # repeats only from the window


def test_the_file_target_names_property_and_store_and_escapes_separators(store: Store, tmp_path: Path) -> None:
    from dealtrail.reporting.access_forward import JsonLinesSender

    access_log.append(store.con, _entries(2, 0))
    path = tmp_path / "access.jsonl"
    forwarder = AccessForwarder(store.con, [(JsonLinesSender(path, ORIGIN), Cursor(tmp_path / "c"))])
    assert forwarder.run_once() == (2, True)
    raw = path.read_text(encoding="utf-8")
    assert "\u2028" not in raw and "\u202e" not in raw and raw.count("\n") == 2
    first = json.loads(raw.splitlines()[0])
    assert first["user"] == "rita\u2028\u202eadmin"  # JSON escapes: the value itself is unchanged
    assert (first["property"], first["store"]) == ("Keystone Downs", "/srv/dealtrail/floor-a.duckdb")
