"""The bytes cdktf writes for a stack's JSON, written from Python (terravixens.constructs.python_blocks).

cdktf 0.21 writes `cdk.tf.json` with json-stable-stringify 1.3 (`stringify(config, {space: 2})`): keys sorted by
UTF-16 code units, two spaces per level, `"key": value`, an empty object or list opened and closed on two lines, and
every string and number as JavaScript's `JSON.stringify` writes it. `dumps` writes the same bytes for any JSON value
(str, int, float, bool, None, list, dict with str keys); `tests/test_python_blocks.py` compares it with the
JavaScript library itself on generated documents and on every stack of the test sites.
"""

from __future__ import annotations

import json
import math
from typing import Any

# The C-accelerated string encoder: the same escapes as JSON.stringify (", \, \b \f \n \r \t, other control
# characters as \u00xx) and every other character written as itself.
_string = json.JSONEncoder(ensure_ascii=False).encode

INDENT = "  "


def number(value: int | float) -> str:
    """A number as JavaScript writes it (Number::toString): integers without a fraction, shortest round-trip digits,
    exponent form from 1e21 and below 1e-6 (`1e+21`, `5e-7`), non-finite numbers as null."""
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # value = 0.<digits> * 10**point
    point = len(whole.lstrip("0")) if whole.lstrip("0") else -(len(fraction) - len(fraction.lstrip("0")))
    point += int(exponent or 0)
    digits = digits.rstrip("0")
    if len(digits) <= point <= 21:
        text = digits + "0" * (point - len(digits))
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        power = point - 1
        text = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "") + f"e{'+' if power >= 0 else '-'}{abs(power)}"
    return sign + text


def _code_units(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _text(value: Any, level: int) -> str:
    if isinstance(value, str):
        return _string(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    inner = "\n" + INDENT * (level + 1)
    if isinstance(value, dict):
        items = [f"{inner}{_string(key)}: {_text(value[key], level + 1)}" for key in sorted(value, key=_code_units)]
        return "{" + ",".join(items) + "\n" + INDENT * level + "}"
    if isinstance(value, list):
        return "[" + ",".join(inner + _text(item, level + 1) for item in value) + "\n" + INDENT * level + "]"
    if isinstance(value, int | float):
        return number(value)
    raise TypeError(f"not a JSON value: {value!r}")


def dumps(document: Any) -> str:
    """`document` as cdktf writes a stack's JSON (no trailing newline, as cdktf)."""
    return _text(document, 0)
