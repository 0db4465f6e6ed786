"""The RELP client's side of the protocol against a scripted receiver on a loopback port: the
cursor moves past exactly the entries answered ``200``, a refusal (``500``) or a malformed answer
stops the batch there, and the frames sent are RELP's (``open`` offer, ``syslog``, ``close``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dealtrail.reporting.access_forward import (
    RELP_OFFER,
    AccessForwarder,
    Cursor,
    PartialDelivery,
    RelpSender,
    RelpTarget,
)
from projections.records import access_log
from projections.store.store import Store
from schemas.access import AccessEntry


class Scripted:
    """Accepts one connection; answers ``open`` with 200, the first ``ok`` syslog frames with
    ``200 OK`` and the next with ``answer``; records every frame it read."""

    def __init__(self, ok: int, answer: bytes) -> None:
        self.ok, self.answer = ok, answer
        self.frames: list[tuple[int, bytes, bytes]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            buffer = b""
            answered = 0
            while True:
                try:
                    chunk = conn.recv(65536)
                except OSError:  # the client dropped the connection (after a refusal)
                    return
                if not chunk:
                    return
                buffer += chunk
                while True:
                    parts = buffer.split(b" ", 3)
                    if len(parts) < 3:
                        break
                    txnr, command = int(parts[0]), parts[1]
                    length = int(parts[2].split(b"\n")[0])
                    start = len(parts[0]) + len(parts[1]) + len(parts[2].split(b"\n")[0]) + 3
                    if length == 0:
                        start -= 1
                    if len(buffer) < start + length + (1 if length else 0):
                        break
                    data = buffer[start : start + length]
                    buffer = buffer[start + length + (1 if length else 0) :]
                    self.frames.append((txnr, command, data))
                    if command == b"open":
                        reply = b"200 OK\nrelp_version=0\ncommands=syslog"
                    elif command == b"close":
                        conn.sendall(f"{txnr} rsp 0\n".encode())
                        return
                    else:
                        reply = b"200 OK" if answered < self.ok else self.answer
                        answered += 1
                    framed = (
                        reply if reply.startswith(b"garbage") else f"{txnr} rsp {len(reply)} ".encode() + reply + b"\n"
                    )
                    try:
                        conn.sendall(framed)
                    except OSError:
                        return

    def close(self) -> None:
        self.listener.close()


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "relp.duckdb")
    t0 = datetime(2026, 12, 4, tzinfo=UTC)
    access_log.append(
        s.con,
        [
            AccessEntry(
                entry_id=f"E{i}",
                at=t0 + timedelta(seconds=i),
                user="rita",
                client="10.0.0.7",
                kind="sign_in",
                outcome="ok",
                detail="",
            )
            for i in range(5)
        ],
    )
    yield s
    s.close()


@pytest.mark.parametrize("answer", [b"500 queue full", b"garbage that is no frame\n"])
def test_the_cursor_moves_past_the_entries_answered_200_and_no_further(
    store: Store, tmp_path: Path, answer: bytes
) -> None:
    receiver = Scripted(ok=3, answer=answer)
    cursor = Cursor(tmp_path / "relp.cursor")
    sender = RelpSender(RelpTarget("127.0.0.1", receiver.port, timeout=2.0, window=2))
    lines: list[str] = []
    forwarder = AccessForwarder(store.con, [(sender, cursor)], say=lines.append)
    try:
        assert forwarder.run_once()[1] is False
    finally:
        forwarder.close()
        receiver.close()
    assert cursor.read() == (3, access_log.hash_at(store.con, 3))
    assert len(lines) == 1 and "relp 127.0.0.1" in lines[0] and "entries after 3 are kept" in lines[0]
    opened = receiver.frames[0]
    assert opened[:2] == (1, b"open") and opened[2] == RELP_OFFER
    assert [(t, c) for t, c, _ in receiver.frames[1:5]] == [
        (2, b"syslog"),
        (3, b"syslog"),
        (4, b"syslog"),
        (5, b"syslog"),
    ]
    assert b'seq="1"' in receiver.frames[1][2]


def test_a_full_batch_answered_200_moves_the_cursor_to_its_end_and_close_ends_the_session(
    store: Store, tmp_path: Path
) -> None:
    receiver = Scripted(ok=99, answer=b"")
    sender = RelpSender(RelpTarget("127.0.0.1", receiver.port, timeout=2.0))
    records = access_log.after(store.con, 0)
    sender.send(records)
    sender.close()
    receiver.thread.join(timeout=5)
    receiver.close()
    assert [c for _, c, _ in receiver.frames] == [b"open"] + [b"syslog"] * 5 + [b"close"]
    with pytest.raises(PartialDelivery) as failed:  # nobody listens any more
        RelpSender(RelpTarget("127.0.0.1", receiver.port, timeout=1.0)).send(records)
    assert failed.value.delivered == 0
