"""Human-written durations ("90s", "1h30m", "500ms") to integer microseconds and back.

A duration is either a plain non-negative integer number of seconds (`90`, `"90"`) or a
sequence of `<digits><unit>` parts with units in decreasing order, each at most once:
`d` (days), `h`, `m`, `s`, `ms`, `us`. Fractions ("1.5h") are not accepted: write "1h30m".
"""

from __future__ import annotations

import re

US = 1
MS = 1_000
SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

# Largest, first: both the parse order and the format order.
_UNITS = (("d", DAY), ("h", HOUR), ("m", MINUTE), ("s", SECOND), ("ms", MS), ("us", US))
_PART = re.compile(r"([0-9]{1,15})(d|h|ms|us|m|s)")
_MAX_US = 2**63 - 1

EXAMPLES = "a duration like '90s', '10m', '1h30m', '2d', '500ms' or a whole number of seconds"


class DurationError(ValueError):
    """A value that is not a duration; `field` names where it was found."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def parse_duration_us(value: object, field: str) -> int:
    """Parse a duration into integer microseconds, or raise DurationError naming `field`."""
    if isinstance(value, bool):  # bool is an int subclass: `timeout: true` is a mistake
        raise DurationError(field, f"must be {EXAMPLES}, not a boolean")
    if isinstance(value, int):
        if value < 0:
            raise DurationError(field, f"must not be negative, got {value}")
        return _checked(value * SECOND, field)
    if isinstance(value, float):
        raise DurationError(field, f"must be {EXAMPLES}; fractions are not accepted (write '1500ms', not 1.5)")
    if not isinstance(value, str):
        raise DurationError(field, f"must be {EXAMPLES}, not {type_name(value)}")
    text = value
    if text.isascii() and text.isdigit():
        if len(text) > 15:
            raise DurationError(field, "is too large")
        return _checked(int(text) * SECOND, field)
    total, position, last_rank = 0, 0, -1
    while position < len(text):
        match = _PART.match(text, position)
        if match is None:
            raise DurationError(field, f"{value!r} is not {EXAMPLES}")
        rank = [unit for unit, _ in _UNITS].index(match.group(2))
        if rank <= last_rank:
            raise DurationError(field, f"{value!r}: units must go from largest to smallest, each at most once")
        total += int(match.group(1)) * _UNITS[rank][1]
        position, last_rank = match.end(), rank
    if not text:
        raise DurationError(field, f"is empty; expected {EXAMPLES}")
    return _checked(total, field)


def _checked(us: int, field: str) -> int:
    if us > _MAX_US:
        raise DurationError(field, "is too large")
    return us


def format_duration_us(us: int) -> str:
    """The shortest unit form of a duration: 5_400_000_000 -> "1h30m", 0 -> "0s".

    `parse_duration_us(format_duration_us(x))` is `x` for every non-negative x. Negative
    values (only ever seen in invalid specs) are shown with a leading "-".
    """
    if us < 0:
        return "-" + format_duration_us(-us)
    if us == 0:
        return "0s"
    parts = []
    for unit, size in _UNITS:
        count, us = divmod(us, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def type_name(value: object) -> str:
    """How a YAML/JSON value's type is named in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"
