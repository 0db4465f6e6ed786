"""RFC 8785 canonical JSON (schemas/canonical.py) and the chain hashes that use it (issue 35, item 1)."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from dealtrail.simulator.floor import FloorSpec, simulate
from schemas.canonical import canonical_json
from schemas.chain import Chainer, chain_hash, copy_key
from schemas.codec import decode, encode

OLD_TRAIL = Path(__file__).resolve().parents[1] / "fixtures" / "v0.2.0" / "events.jsonl.gz"

SAFE_INT = 2**53 - 1
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-SAFE_INT, SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_json_is_what_the_rfc_8785_reference_writes(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


def test_canonical_json_sorts_member_names_by_utf16_code_units_and_escapes_as_rfc_8785() -> None:
    value = {"\U0001f600": 1, "\ufb01": 2, "b": "tab\tnl\n\x01 \u2028 é", "a": [1.0, 1e21, 1e-7, -0.0, 123.456]}
    assert canonical_json(value) == rfc8785.dumps(value)
    assert canonical_json(value).startswith(b'{"a":[1,1e+21,1e-7,0,123.456],"b":"tab\\tnl\\n\\u0001')


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(), lambda i: st.lists(i) | st.dictionaries(st.text(), i)
    )
)
def test_without_fractions_canonical_json_is_what_the_standard_library_writes_sorted(value: Any) -> None:
    """What docs/integrity.md tells a recipient to recompute with: json.dumps, sorted, compact."""
    if isinstance(value, dict) and any(ord(c) > 0xFFFF for k in value for c in k):
        return  # member names beyond the BMP sort otherwise by code points (none in dealtrail's JSON)
    plain = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        expected = plain.encode()
    except UnicodeEncodeError:
        return  # a lone surrogate: canonical_json refuses it
    if _has_astral_key(value):
        return
    assert canonical_json(value) == expected


def _has_astral_key(value: Any) -> bool:
    if isinstance(value, dict):
        return any(any(ord(c) > 0xFFFF for c in k) or _has_astral_key(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_astral_key(v) for v in value)
    return False


def _events(n: int = 40) -> list[Any]:
    spec = FloorSpec(tables=1, hours=0.2, seed=5, error_rate=0.0, duplicate_rate=0.0, floor_visit_rate=0.0)
    return list(itertools.islice(simulate(spec), n))


def test_a_chained_event_says_rfc_8785_and_its_hash_is_the_sha256_of_its_sorted_compact_json() -> None:
    for event in _events():
        assert event.hash_version == 2
        data = json.loads(encode(event))
        assert data["hash_version"] == 2
        own = data.pop("hash")
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert hashlib.sha256(text.encode()).hexdigest() == own == chain_hash(event)


def test_an_event_chained_by_0_2_0_keeps_verifying_and_its_encoding_cannot_be_relabelled() -> None:
    with gzip.open(OLD_TRAIL, "rt") as fh:
        lines = [fh.readline() for _ in range(20)]
    for line in lines:
        event = decode(line)
        assert event.hash_version is None and '"hash_version"' not in line
        assert chain_hash(event) == event.hash
        assert encode(event).strip() == line.strip().encode()  # stored bytes round-trip unchanged
        relabelled = event.model_copy(update={"hash_version": 2})
        assert chain_hash(relabelled) != event.hash


def test_a_trail_chained_by_0_2_0_goes_on_with_rfc_8785_links() -> None:
    with gzip.open(OLD_TRAIL, "rt") as fh:
        old = [decode(fh.readline()) for _ in range(3)]
    chainer = Chainer({old[-1].table_id: (old[-1].seq, str(old[-1].hash))})
    nxt = chainer.stamp(
        old[-1].model_copy(update={"seq": old[-1].seq + 1, "event_id": "NEXT", "prev_hash": None, "hash": None})
    )
    assert nxt.prev_hash == old[-1].hash and nxt.hash_version == 2 and chain_hash(nxt) == nxt.hash


def test_an_unchained_copy_of_a_chained_event_has_its_copy_key() -> None:
    event = _events(3)[-1]
    bare = event.model_copy(update={"prev_hash": None, "hash": None, "hash_version": None})
    assert copy_key(encode(event), None)[0] == copy_key(encode(bare), None)[0]
    other = bare.model_copy(update={"event_id": "OTHER"})
    assert copy_key(encode(other), None)[0] != copy_key(encode(bare), None)[0]


@given(json_values)
def test_the_fast_path_from_json_bytes_is_canonical_json(value: Any) -> None:
    from schemas.canonical import canonical_json_of

    data = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        expected = canonical_json(json.loads(data))
    except ValueError:
        return  # a lone surrogate
    assert canonical_json_of(data) == expected
