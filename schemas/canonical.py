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


def canonical_sha256(value: Any) -> str:
    """The SHA-256 (64 hex digits) of :func:`canonical_json` of ``value``.

    Raises:
        TypeError, ValueError: as :func:`canonical_json`.
    """
    return hashlib.sha256(canonical_json(value)).hexdigest()
