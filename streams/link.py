"""The state of a process's connection to Kafka: one line when it is lost, one when it is back.

The projector, the console in its process and the worker keep running through a broker outage
of any length; their Kafka clients retry on their own (with capped exponential backoff), and
print one line per retry. :class:`KafkaLink` is the one place that decides what an operator
sees instead: a line when the connection is lost (or, at a first start, that the process waits
for the cluster), a line when it is back with how long it was away, and nothing in between; and
it holds what ``/readyz`` reports (connected, lag in messages and seconds).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

CLIENT_LOGGERS = ("kafka", "aiokafka")
"""The loggers of the Kafka client libraries, whose per-retry lines :func:`quiet_clients` holds back."""


@dataclass(frozen=True)
class LinkStatus:
    """What ``/readyz`` reports of a process's Kafka connection.

    Attributes:
        connected: the last request to the cluster was answered.
        lag_messages: records on the topics not yet read (messages); None until first measured.
        lag_seconds: how long ago the process had read every record then on the topics
            (seconds; 0 when caught up); None until first measured.
        down_seconds: seconds since the connection was lost (seconds); None when connected.
        consumption_errors: record batches the process could not read and stored as dead letters
            (a corrupt batch, a codec it cannot decompress) since it started; they are not
            outages: consumption went on past each.
        last_consumption_error: where and what the latest of them was; None if none.
        host_clock: how far this host's clock is from the broker's record timestamps
            (:meth:`streams.clock.HostClockCheck.as_json`); None until measured. A clock that is
            off does not make the process unready: events are judged against their records'
            timestamps, not this clock (issue 46).
    """

    connected: bool
    lag_messages: int | None
    lag_seconds: float | None
    down_seconds: float | None
    consumption_errors: int = 0
    last_consumption_error: str | None = None
    host_clock: dict[str, object] | None = None

    def ready(self, max_lag_seconds: float) -> bool:
        """Connected and caught up: nothing left to read, or behind by at most ``max_lag_seconds``."""
        if not self.connected or self.lag_messages is None or self.lag_seconds is None:
            return False
        return self.lag_messages == 0 or self.lag_seconds <= max_lag_seconds

    def as_json(self, max_lag_seconds: float) -> dict[str, Any]:
        """The ``/readyz`` body: no data, only the connection and the lag."""
        return {
            "ready": self.ready(max_lag_seconds),
            "kafka": "connected" if self.connected else "disconnected",
            "lag_messages": self.lag_messages,
            "lag_seconds": None if self.lag_seconds is None else round(self.lag_seconds, 1),
            "max_lag_seconds": max_lag_seconds,
            "down_seconds": None if self.down_seconds is None else round(self.down_seconds, 1),
            "consumption_errors": self.consumption_errors,
            "last_consumption_error": self.last_consumption_error,
            "host_clock": self.host_clock,
        }


class KafkaLink:
    """The connection state of one process's Kafka clients (thread-safe).

    Args:
        bootstrap: the cluster's address, as the lines name it.
        say: prints one line for the operator (the CLI's stderr, or a logger's ``warning``).
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, bootstrap: str, say: Callable[[str], None], clock: Callable[[], float] = time.monotonic):
        self.bootstrap = bootstrap
        self._say = say
        self._clock = clock
        self._lock = threading.Lock()
        self._connected = False
        self._ever = False
        self._announced_down = False
        self._down_since: float | None = clock()
        self._lag: int | None = None
        self._behind = 0.0
        self._measured_at: float | None = None
        self._errors = 0
        self._last_error: str | None = None
        self._host_clock: dict[str, object] | None = None

    @property
    def connected(self) -> bool:
        """The last request to the cluster was answered."""
        return self._connected

    @property
    def ever_connected(self) -> bool:
        """The cluster answered at least once since this process started."""
        return self._ever

    def down_for(self) -> float:
        """Seconds since the connection was lost, or since the start when never connected (0 when up)."""
        with self._lock:
            return 0.0 if self._down_since is None else self._clock() - self._down_since

    def up(self) -> None:
        """The cluster answered: say so once if it had been lost, or waited for at the start."""
        with self._lock:
            if self._connected:
                return
            now = self._clock()
            away = now - self._down_since if self._down_since is not None else 0.0
            announce = self._announced_down
            if not self._ever:
                line = f"connected to Kafka at {self.bootstrap} after waiting {away:.0f} s"
            else:
                line = f"Kafka at {self.bootstrap} is back after {away:.0f} s; carrying on where it stopped"
            self._connected, self._ever, self._announced_down, self._down_since = True, True, False, None
        if announce:
            self._say(line)

    def down(self, why: BaseException | str) -> None:
        """A request to the cluster failed: say so once (until it is back)."""
        reason = why if isinstance(why, str) else _reason(why)
        with self._lock:
            was = self._connected
            self._connected = False
            if was:
                self._down_since = self._clock()
            if self._announced_down:
                return
            self._announced_down = True
            if self._ever:
                line = (
                    f"lost the connection to Kafka at {self.bootstrap} ({reason[:200]}); "
                    "retrying with backoff, a line will say when it is back"
                )
            else:
                line = (
                    f"waiting for Kafka at {self.bootstrap} ({reason[:200]}); "
                    "retrying with backoff, a line will say when it is connected"
                )
        self._say(line)

    def consumption_error(self, what: str) -> None:
        """A record batch could not be read and was dead-lettered (``what``: where, and the
        error's kind): counted for ``/readyz``, apart from the connection, which it says nothing about."""
        with self._lock:
            self._errors += 1
            self._last_error = what[:300]

    def host_clock(self, line: str | None, state: dict[str, object]) -> None:
        """This host's clock against the broker's record timestamps, as just measured
        (:class:`streams.clock.HostClockCheck`): ``state`` for ``/readyz``, and ``line`` said
        when the verdict changed."""
        with self._lock:
            self._host_clock = state
        if line is not None:
            self._say(line)

    def lag(self, messages: int, seconds: float) -> None:
        """The lag, as just measured: records left to read on the topics (messages), and how long
        ago the process had read everything there was (seconds; 0 when caught up)."""
        with self._lock:
            self._lag, self._behind = messages, 0.0 if messages == 0 else seconds
            self._measured_at = self._clock()

    def status(self) -> LinkStatus:
        """The connection and the lag, now."""
        with self._lock:
            now = self._clock()
            behind = None
            if self._lag is not None and self._measured_at is not None:
                # a measure grows older while the cluster is away: so does the lag it gave
                behind = 0.0 if self._lag == 0 and self._connected else self._behind + now - self._measured_at
            return LinkStatus(
                connected=self._connected,
                lag_messages=self._lag,
                lag_seconds=behind,
                down_seconds=None if self._down_since is None else now - self._down_since,
                consumption_errors=self._errors,
                last_consumption_error=self._last_error,
                host_clock=self._host_clock,
            )


def _reason(exc: BaseException) -> str:
    """``Type: message``, without the type twice (kafka-python's messages often start with it)."""
    name, text = type(exc).__name__, str(exc)
    text = text.removeprefix(name).removeprefix(":").strip()
    return f"{name}: {text}" if text and text != "None" else name


class Backoff:
    """Capped exponential backoff: ``first``, twice that, ... up to ``cap`` seconds.

    Args:
        first: the first wait (seconds).
        cap: the longest wait (seconds).
    """

    def __init__(self, first: float = 0.5, cap: float = 5.0) -> None:
        self.first, self.cap = first, cap
        self._next = first

    def next(self) -> float:
        """The wait before the next attempt (seconds); each call doubles the next, up to ``cap``."""
        wait = self._next
        self._next = min(self.cap, self._next * 2)
        return wait

    def reset(self) -> None:
        """The attempt succeeded: the next wait is ``first`` again."""
        self._next = self.first


@contextmanager
def quiet_clients() -> Iterator[None]:
    """Hold back the Kafka client libraries' own log lines (a warning per reconnection attempt)
    while the body runs (their levels are raised to CRITICAL, and restored after):
    :class:`KafkaLink` says what the operator needs instead."""
    loggers = [logging.getLogger(n) for n in CLIENT_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
