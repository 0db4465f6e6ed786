r"""One strict JSON reader for everything dealtrail takes in from outside (standard library only).

The standard parsers let the last of two equal keys in an object win silently, die with a
``RecursionError`` on deep nesting, and read a lone UTF-16 surrogate (``"\ud800"``) into a
string that cannot be written back out. Rulebook revision 3 (decision 10.3.4) and issue 19 ask
that such input be refused, with a reason, wherever events and request bodies arrive: event
lines, Kafka messages and the console's API bodies all go through :func:`loads` (the event codec
only on its slow path, see :func:`schemas.codec.decode`).
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects taken (levels); a real event nests 3 levels."""


class StrictJSONError(ValueError):
    """The text is not one strict JSON document; the message says why (for a repeated key, it
    names the key)."""


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise StrictJSONError(f"the key {key[:80]!r} appears more than once in one object")
            seen.add(key)
    return obj


def _depth_over(data: bytes | str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than ``limit`` (a cheap scan, run only when
    the text holds more than ``limit`` opening brackets at all)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def loads(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse one JSON document strictly.

    Args:
        data: the document (UTF-8 bytes or text).
        max_depth: deepest nesting of arrays and objects taken (levels).

    Returns:
        The parsed value (dicts, lists, str, int, float, bool, None).

    Raises:
        StrictJSONError: not JSON, not UTF-8, a key repeated within one object (the message
            names it), nesting deeper than ``max_depth``, a lone surrogate in a string, or
            ``NaN``/``Infinity`` (not JSON).
    """
    if _depth_over(data, max_depth):
        raise StrictJSONError(f"arrays and objects nest deeper than {max_depth} levels")
    try:
        value = json.loads(data, object_pairs_hook=_no_repeats, parse_constant=_not_json)
    except StrictJSONError:
        raise
    except RecursionError:
        raise StrictJSONError(f"arrays and objects nest deeper than {max_depth} levels") from None
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    except ValueError as exc:  # json.JSONDecodeError
        raise StrictJSONError(str(exc)[:300]) from None
    if ("\\u" in data if isinstance(data, str) else b"\\u" in data) or isinstance(data, str):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise StrictJSONError("a string holds a lone UTF-16 surrogate (not a character)") from None
    return value


def _not_json(name: str) -> Any:
    raise StrictJSONError(f"{name} is not a JSON value")
