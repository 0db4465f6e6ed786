"""Video settings and clip links (issue 22, item 4): the template is checked once, values are
URL-encoded, the window spans the evidence with its margins, in the VMS's zone and format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from dealtrail.investigate.video import VideoLinks, check_template
from dealtrail.settings import Settings
from schemas.reviews import VideoReference


def test_video_settings_read_the_camera_map_and_template_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEALTRAIL_VIDEO__CAMERAS", '{"TCP-01": ["CAM-11", "CAM-12"]}')
    monkeypatch.setenv("DEALTRAIL_VIDEO__URL_TEMPLATE", "https://vms.local/play?c={camera}&s={start}&e={end}")
    monkeypatch.setenv("DEALTRAIL_VIDEO__TIMEZONE", "America/New_York")
    monkeypatch.setenv("DEALTRAIL_VIDEO__MARGIN_BEFORE_SECONDS", "10")
    links = VideoLinks.from_settings(Settings().video)
    assert links.cameras == {"TCP-01": ("CAM-11", "CAM-12")}
    first = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
    clips = links.clips("TCP-01", first, first + timedelta(seconds=20))
    assert [c.camera for c in clips] == ["CAM-11", "CAM-12"]
    assert clips[0].url == "https://vms.local/play?c=CAM-11&s=2026-11-27T12:59:50&e=2026-11-27T13:00:50"
    assert links.clips("PGP-01", first, first) == []


@pytest.mark.parametrize(
    "template",
    [
        "javascript:alert(1)//{camera}",
        "https://vms.local/play?c={camera}&x={secret}",
        "https://vms.local/play?c={camera!r}",
        "https://vms.local/play?s={start}",
        'https://vms.local/"{camera}',
    ],
)
def test_a_video_url_template_that_could_not_build_a_safe_link_is_refused(template: str) -> None:
    with pytest.raises(ValueError):
        check_template(template)
    with pytest.raises(ValidationError):
        Settings(video={"url_template": template})  # type: ignore[arg-type]


def test_camera_ids_and_times_are_url_encoded_into_the_link() -> None:
    links = VideoLinks({"T": ("a&b=c/d",)}, "https://vms.local/{camera}?s={start}", "UTC", "%d/%m %H:%M%z")
    at = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    (clip,) = links.clips("T", at, at)
    assert clip.url == "https://vms.local/a%26b%3Dc%2Fd?s=02%2F01%2003:03%2B0000"


def test_a_video_reference_takes_http_links_only_and_needs_a_clip_or_url() -> None:
    assert VideoReference(camera="C", url="https://vms.local/x").url == "https://vms.local/x"
    assert VideoReference(camera="C", clip_id="K-1").clip_id == "K-1"
    for bad in ({"camera": "C", "url": "javascript:alert(1)"}, {"camera": "C", "url": "ftp://x"}, {"camera": "C"}):
        with pytest.raises(ValidationError):
            VideoReference.model_validate(bad)
