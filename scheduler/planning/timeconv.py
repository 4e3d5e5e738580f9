"""Conversions between datetimes and the project's instant type.

An instant is an ``int`` count of microseconds since the Unix epoch, UTC ("us"). Integers
compare, hash and serialize identically on every replica, which floats and aware datetimes do
not guarantee; conversions here are exact integer arithmetic.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)
US_PER_SECOND = 1_000_000


def to_us(moment: datetime) -> int:
    """Return the instant of an aware datetime in microseconds since the epoch.

    Naive datetimes are refused: guessing a zone for them is how local-time bugs start.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"to_us needs an aware datetime, got naive {moment.isoformat()}")
    return (moment - _EPOCH) // _ONE_US


def from_us(instant_us: int) -> datetime:
    """Return the instant as an aware UTC datetime."""
    return _EPOCH + timedelta(microseconds=instant_us)


# Instants repeat: a herd's runs share one, and every grant and run key of it is formatted. A
# hit costs about a tenth of the formatting (bench execution's leader formats each grant's key).
@functools.lru_cache(maxsize=4096)
def format_us(instant_us: int) -> str:
    """Format an instant as ISO-8601 UTC with a ``Z`` suffix.

    Fractional seconds appear only when nonzero (always six digits then, so strings of the
    same precision sort like the instants).
    """
    return from_us(instant_us).replace(tzinfo=None).isoformat() + "Z"


def format_offset(offset_s: int) -> str:
    """Format a UTC offset in seconds as ``+HH:MM`` (``+HH:MM:SS`` for historical odd ones)."""
    sign = "-" if offset_s < 0 else "+"
    hours, rest = divmod(abs(offset_s), 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}"
    return f"{text}:{seconds:02d}" if seconds else text


def parse_iso_to_us(text: str) -> int:
    """Parse ISO-8601 (``Z`` or an offset accepted; naive means UTC) into an instant."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return to_us(moment)
