"""The worker's outbox: findings stay in the stored table entry until their delivery is confirmed."""

from __future__ import annotations

import asyncio

from streams.worker import Outbox


def test_undelivered_keeps_what_the_broker_has_not_acknowledged() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        box = Outbox()
        f1, f2, r1, failed = (loop.create_future() for _ in range(4))
        box.add(b"T1", True, b"finding-1", f1)
        box.add(b"T1", True, b"finding-2", f2)
        box.add(b"T1", False, b"round-1", r1)
        box.add(b"T2", True, b"other-table", loop.create_future())
        assert box.undelivered(b"T1") == ((b"finding-1", b"finding-2"), (b"round-1",))
        f1.set_result("metadata")
        r1.set_result("metadata")
        assert box.undelivered(b"T1") == ((b"finding-2",), ())
        box.add(b"T1", True, b"finding-3", failed)
        failed.set_exception(RuntimeError("broker unreachable"))
        assert box.undelivered(b"T1") == ((b"finding-2", b"finding-3"), ())
        f2.set_result("metadata")
        assert box.undelivered(b"T1") == ((b"finding-3",), ())
        box.forget(b"T1")
        assert box.undelivered(b"T1") == ((), ())
        assert box.undelivered(b"T2") == ((b"other-table",), ())

    asyncio.run(scenario())


def test_a_send_that_returned_metadata_counts_as_delivered() -> None:
    box = Outbox()
    box.add(b"T1", True, b"finding", object())
    assert box.undelivered(b"T1") == ((), ())
