"""Clip links into the casino's video management system (VMS) for a finding's evidence window.

Surveillance teams pull the table camera for the minute of an event; a finding page offers that
clip directly: one link per camera of the table, from ``margin_before`` before the finding's
first evidence event to ``margin_after`` after its last (issue 22, item 4). The links are built
from the resolved settings (:class:`dealtrail.settings.VideoSettings`), passed in as a
:class:`VideoLinks`; nothing here reads the environment.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import quote
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from dealtrail.settings import VideoSettings

PLACEHOLDERS = frozenset({"camera", "start", "end", "table"})
"""The names a URL template may use."""


def check_template(template: str) -> None:
    """Refuse a URL template that could not build a safe link.

    Raises:
        ValueError: not ``http://`` or ``https://``, a space or quote in it, a placeholder other
            than those of :data:`PLACEHOLDERS` (or with a format spec), or no ``{camera}``.
    """
    if not template.lower().startswith(("http://", "https://")):
        raise ValueError("the video URL template must start with http:// or https://")
    if any(c.isspace() or c in "\"'<>`" for c in template):
        raise ValueError("the video URL template may hold no space, quote or angle bracket")
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"the video URL template does not parse: {exc}") from None
    names = set()
    for _, name, spec, conv in parts:
        if name is None:
            continue
        if name not in PLACEHOLDERS or spec or conv:
            raise ValueError(f"the video URL template may use only {{camera}}, {{start}}, {{end}}, {{table}}: {name!r}")
        names.add(name)
    if "camera" not in names:
        raise ValueError("the video URL template needs {camera}")


@dataclass(frozen=True)
class Clip:
    """One camera's clip of an evidence window.

    Attributes:
        camera: the camera ID.
        start / end: the clip's bounds (timezone-aware, in the VMS's zone).
        url: the link (None without a URL template).
    """

    camera: str
    start: datetime
    end: datetime
    url: str | None


@dataclass(frozen=True)
class VideoLinks:
    """The resolved video settings the console builds clip links from.

    Attributes:
        cameras: table ID -> its camera IDs.
        url_template: see :func:`check_template`; None: no links.
        zone: the IANA zone of the times in the link.
        time_format: strftime format of ``{start}`` and ``{end}``.
        margin_before / margin_after: the window around the evidence events.
    """

    cameras: dict[str, tuple[str, ...]] = field(default_factory=dict)
    url_template: str | None = None
    zone: str = "UTC"
    time_format: str = "%Y-%m-%dT%H:%M:%S"
    margin_before: timedelta = timedelta(seconds=30)
    margin_after: timedelta = timedelta(seconds=30)

    @classmethod
    def from_settings(cls, video: VideoSettings) -> VideoLinks:
        """The links of the resolved ``settings.video``."""
        return cls(
            {t: tuple(ids) for t, ids in video.cameras.items()},
            video.url_template,
            video.timezone,
            video.time_format,
            timedelta(seconds=video.margin_before_seconds),
            timedelta(seconds=video.margin_after_seconds),
        )

    def window(self, first: datetime, last: datetime) -> tuple[datetime, datetime]:
        """The clip window of evidence events from ``first`` to ``last`` (aware instants), in the VMS's zone."""
        tz = ZoneInfo(self.zone)
        start = (min(first, last) - self.margin_before).astimezone(tz)
        return start, (max(first, last) + self.margin_after).astimezone(tz)

    def clips(self, table_id: str, first: datetime, last: datetime) -> list[Clip]:
        """One clip per camera of ``table_id`` for evidence events from ``first`` to ``last``.

        Returns:
            The clips, in the configured camera order; empty for a table without cameras. Each
            value put into the template is URL-encoded, so a camera ID or a time format cannot
            change the link's shape.
        """
        start, end = self.window(first, last)
        out = []
        for camera in self.cameras.get(table_id, ()):
            url = None
            if self.url_template is not None:
                url = self.url_template.format(
                    camera=quote(camera, safe=""),
                    table=quote(table_id, safe=""),
                    start=quote(start.strftime(self.time_format), safe=":"),
                    end=quote(end.strftime(self.time_format), safe=":"),
                )
            out.append(Clip(camera, start, end, url))
        return out
