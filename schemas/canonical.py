r"""The one JSON encoding dealtrail hashes and signs: RFC 8785, the JSON Canonicalization Scheme.

Pure standard library (checked by a test). :func:`canonical_json` writes a JSON value as RFC 8785
defines it: object members sorted by the UTF-16 code units of their names, no whitespace,
strings escaped as ECMAScript's ``JSON.stringify`` escapes them (``\"``, ``\\``, ``\b``,
``\f``, ``\n``, ``\r``, ``\t``, other control characters as ``\u00xx``, everything else as
UTF-8), numbers as ECMAScript writes a double. For values without fractional numbers (every
event, finding, link and record dealtrail hashes) that is exactly what Python's standard library
writes with ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
encoded as UTF-8, which is what docs/integrity.md gives a recipient to check with.

One deliberate extension: an integer beyond 2^53 (RFC 8785 and I-JSON leave it out, a ``seq``
may reach 2^62) is written as its exact decimal digits, as ``json.dumps`` writes it.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

LEGACY = 1
"""Encoding version 1: what dealtrail 0.2.0 hashed (pydantic's compact JSON in the schema's
field order for events and access-log entries; ``json.dumps(..., sort_keys=True)`` with its
default separators for engine states). Read, never written any more."""
JCS = 2
"""Encoding version 2: RFC 8785 (:func:`canonical_json`). What dealtrail writes now."""


def _number(value: int | float) -> str:
    """A number as ECMAScript's ``Number.prototype.toString`` writes it (RFC 8785, 3.2.2.3)."""
    if isinstance(value, bool):
        raise TypeError("a bool is not a number")
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError(f"{value!r} has no JSON form (RFC 8785 refuses NaN and infinities)")
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 2**53:  # exact; above, the shortest digits padded
        return str(int(value))
    sign = "-" if value < 0 else ""
    mantissa, _, exp = repr(abs(value)).partition("e")  # repr: the shortest digits that round-trip
    whole, _, frac = mantissa.partition(".")
    shown = whole + frac
    point = len(whole) + int(exp or 0) - (len(shown) - len(shown.lstrip("0")))  # where the point goes
    digits = shown.strip("0")
    return sign + _placed(digits, point)


def _placed(digits: str, n: int) -> str:
    """Significant ``digits`` with the decimal point ``n`` places from their start, as ECMAScript
    places it: plain up to 21 integer digits and down to 6 leading zeros, else an exponent."""
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    return digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e > 0 else "-") + str(abs(e))


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _encode(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int | float):
        out.append(_number(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16_key)):
            if not isinstance(key, str):
                raise TypeError(f"an object's member name must be text, not {type(key).__name__}")
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")


def _utf16_key(key: Any) -> bytes:
    return key.encode("utf-16-be", "surrogatepass") if isinstance(key, str) else b""


def canonical_json(value: Any) -> bytes:
    """``value`` (JSON data: dict, list, tuple, str, int, float, bool, None) in RFC 8785 form, UTF-8.

    Raises:
        TypeError: something that is no JSON value (a datetime, a set, a non-text member name).
        ValueError: NaN or an infinity; a lone surrogate in a string (not valid UTF-8).
    """
    out: list[str] = []
    _encode(value, out)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"a string holds a lone surrogate, which RFC 8785 cannot encode: {exc}") from None


class _Fraction(Exception):
    """A fractional number in JSON handed to :func:`canonical_json_of`: take the exact path."""


def _no_fraction(text: str) -> float:
    raise _Fraction(text)


def canonical_json_of(data: bytes) -> bytes:
    """:func:`canonical_json` of the JSON document ``data`` (UTF-8), fast where it can be.

    For a document without fractional numbers whose bytes are ASCII (every event, state and link
    dealtrail hashes: member names are field names and identifiers), RFC 8785 is exactly what the
    standard library's C encoder writes sorted and compact: one parse and one write in C, about a
    tenth of the pure-Python path's time. Anything else takes :func:`canonical_json`.

    Raises:
        ValueError: ``data`` is not JSON; as :func:`canonical_json`.
        TypeError: as :func:`canonical_json`.
    """
    if data.isascii():
        try:
            value = json.loads(data, parse_float=_no_fraction)
        except _Fraction:
            pass
        else:
            return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return canonical_json(json.loads(data))


def canonical_sha256(value: Any) -> str:
    """The SHA-256 (64 hex digits) of :func:`canonical_json` of ``value``.

    Raises:
        TypeError, ValueError: as :func:`canonical_json`.
    """
    return hashlib.sha256(canonical_json(value)).hexdigest()
