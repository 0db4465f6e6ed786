"""Hostile input through the audit: wrong types, missing and extra fields, huge strings, control
characters and invalid UTF-8, absurd counts, timestamps out of range, seq going backwards,
unconfigured tables, a card dealt twice. Nothing crashes or hangs; every rejected line is in the
dead-letter output with its reason; every accepted line is audited."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dealtrail.ingest.audit import audit_file
from projections.store.store import Store

CASES: Counter[str] = Counter()
BASE = {
    "type": "CardDealt",
    "event_id": "E-1",
    "table_id": "T-1",
    "game": "TCP",
    "round_id": "R-1",
    "seq": 2,
    "occurred_at": "2026-11-27T18:00:00Z",
    "recorded_at": "2026-11-27T18:00:01Z",
    "source": "MANUAL",
    "actor": {"role": "DEALER", "id": "D-1"},
    "deal_index": 1,
    "to_area": "SEAT_1",
    "card": "AS",
}
CONFIG = {
    **{k: v for k, v in BASE.items() if k not in ("deal_index", "to_area", "card", "round_id")},
    "type": "TableConfigured",
    "event_id": "E-0",
    "seq": 1,
    "config": {"game": "TCP", "rules_submission_id": "RS-1", "seats": ["SEAT_1", "SEAT_2"]},
}

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=50),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=31), max_size=20),
    st.just("x" * 200_000),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.sampled_from(["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2026-13-40T99:00:00Z", "2026-11-27T18:00:00"]),
)


@st.composite
def hostile_line(draw: st.DrawFn) -> bytes:
    kind = draw(
        st.sampled_from(["field", "missing", "extra", "bytes", "truncate", "seq-back", "ghost", "dup-card", "type"])
    )
    CASES[kind] += 1
    doc = dict(BASE, event_id=f"E-{draw(st.integers(min_value=2, max_value=10**6))}")
    if kind == "field":
        doc[draw(st.sampled_from(sorted(BASE)))] = draw(junk)
    elif kind == "missing":
        doc.pop(draw(st.sampled_from(sorted(BASE))))
    elif kind == "extra":
        doc[draw(st.text(min_size=1, max_size=20))] = draw(junk)
    elif kind == "bytes":
        return draw(st.binary(min_size=1, max_size=300)).replace(b"\n", b" ")
    elif kind == "truncate":
        text = json.dumps(doc).encode()
        return text[: draw(st.integers(min_value=1, max_value=len(text) - 1))]
    elif kind == "seq-back":
        doc["seq"] = draw(st.integers(min_value=-5, max_value=1))
    elif kind == "ghost":
        doc["table_id"] = draw(st.text(alphabet="ABCXYZ-0123", min_size=1, max_size=10)) + "-GHOST"
    elif kind == "dup-card":
        doc["seq"] = draw(st.integers(min_value=2, max_value=50))
    elif kind == "type":
        doc["type"] = draw(st.text(max_size=30))
    try:
        return json.dumps(doc, allow_nan=True).encode()
    except (TypeError, ValueError):
        return repr(doc).encode()


@given(lines=st.lists(hostile_line(), min_size=1, max_size=25))
@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_hostile_lines_never_crash_and_every_line_is_accounted_for(lines: list[bytes], tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "events.jsonl"
    body = [json.dumps(CONFIG).encode(), *lines]
    path.write_bytes(b"\n".join(body) + b"\n")
    db, dl = folder / "f.duckdb", folder / "rejected.jsonl"
    with Store(db) as store, dl.open("w", encoding="utf-8") as fh:
        summary = audit_file(path, store, fh, workers=1)
    rejected = [json.loads(x) for x in dl.read_text(encoding="utf-8").splitlines()]
    assert all(r["reason"] and r["detail"] and ("raw" in r or "raw_base64" in r) for r in rejected)
    nonblank = sum(1 for line in body if line.strip())
    assert summary.lines == nonblank
    assert summary.events + summary.duplicates + len(rejected) == nonblank, (
        "every line is audited, counted as a duplicate delivery of one audited, or dead-lettered"
    )
    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = con.execute("SELECT count(DISTINCT (event_id, payload_hash)) FROM events").fetchone()[0]
        dead = con.execute("SELECT count(*) FROM dead_letters").fetchone()[0]
    finally:
        con.close()
    assert stored <= summary.events
    assert dead == len({(r["line"], r.get("raw", r.get("raw_base64"))) for r in rejected})


def test_the_fuzzer_exercised_every_kind_of_hostile_input(tmp_path: Path) -> None:
    # runs after the property test in this module (pytest keeps file order)
    print(f"hostile input cases: {dict(sorted(CASES.items()))}, total {sum(CASES.values())}")
    assert set(CASES) == {"field", "missing", "extra", "bytes", "truncate", "seq-back", "ghost", "dup-card", "type"}
    assert sum(CASES.values()) >= 200
