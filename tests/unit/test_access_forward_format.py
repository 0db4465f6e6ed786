"""The syslog form of an access-log entry (RFC 5424 with octet-counting framing, RFC 6587)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from dealtrail.reporting.access_forward import octet_counted, syslog_message
from schemas.access import AccessRecord


def _record(**kw: object) -> AccessRecord:
    fields: dict[str, object] = {
        "seq": 7,
        "entry_id": "01JEXAMPLE",
        "at": datetime(2026, 12, 3, 12, 0, 1, 250_000, tzinfo=timezone(timedelta(hours=-5))),
        "user": 'ri"ta]\\',
        "client": "10.0.0.7",
        "kind": "finding_viewed",
        "outcome": "ok",
        "detail": "finding 0f3a",
        "prev_hash": "a" * 64,
        "hash": "b" * 64,
    }
    return AccessRecord.model_validate({**fields, **kw})


def test_an_entry_is_one_rfc5424_message_in_utc_with_its_fields_as_escaped_structured_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")  # the machine's zone changes nothing
    time.tzset()
    try:
        msg = syslog_message(_record(), "pit 1\n")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    head, _, rest = msg.partition(b" [")
    assert head == b"<86>1 2026-12-03T17:00:01.250000Z pit1 dealtrail - finding_viewed"  # authpriv.info
    sd, _, text = rest.partition(b"] \xef\xbb\xbf")  # the message after a BOM: UTF-8
    assert sd.startswith(b'dealtrail@32473 seq="7" entry_id="01JEXAMPLE" user="ri\\"ta\\]\\\\" client="10.0.0.7"')
    assert f'hash="{"b" * 64}" prev_hash="{"a" * 64}"'.encode() in sd
    assert text == b'ri"ta]\\ finding_viewed ok: finding 0f3a'
    assert b"\n" not in msg


def test_the_severity_follows_the_outcome_and_an_empty_hostname_is_a_dash() -> None:
    assert syslog_message(_record(outcome="locked"), "").startswith(b"<84>1 ")  # authpriv.warning
    assert syslog_message(_record(outcome="refused"), "h").startswith(b"<85>1 ")  # authpriv.notice
    assert b" - dealtrail - finding_viewed " in syslog_message(_record(), "\u00e9")
    assert syslog_message(_record(at=datetime(2026, 1, 1, tzinfo=UTC)), "h").split(b" ")[1] == (
        b"2026-01-01T00:00:00.000000Z"
    )


def test_octet_counting_prefixes_the_length_in_bytes_not_characters() -> None:
    msg = "é".encode() * 3
    assert octet_counted(msg) == b"6 " + msg
    assert os.linesep not in octet_counted(b"x").decode()


def test_control_characters_of_every_kind_are_escaped_in_fields_and_text_and_origin_is_named() -> None:
    from dealtrail.reporting.access_forward import Origin

    typed = "ri\u2028ta\u2029\x85\x1b[31m\u202egnp.exe\u2066x\u2069\x7f"
    msg = syslog_message(_record(user=typed, detail="a\u202db"), "h", origin=Origin("Keystone", "/srv/a.duckdb"))
    text = msg.decode("utf-8")
    for c in ("\u2028", "\u2029", "\x85", "\x1b", "\u202e", "\u2066", "\u2069", "\x7f", "\u202d"):
        assert c not in text
    # in the structured data the escape's backslash is itself escaped (RFC 5424 PARAM-VALUE)
    assert 'user="ri\\\\u2028ta\\\\u2029\\\\u0085\\\\u001b[31m\\\\u202egnp.exe\\\\u2066x\\\\u2069\\\\u007f"' in text
    assert "\ufeffri\\u2028ta\\u2029\\u0085" in text  # the message text: one backslash
    assert text.endswith("finding_viewed ok: a\\u202db")
    assert 'property="Keystone" store="/srv/a.duckdb"]' in text
