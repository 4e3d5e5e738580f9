"""Pure next-fire planning shared by every node: cron parsing, time zones, DST rules, jitter."""

from .errors import ScheduleError
from .herd import jitter_offset_us, lands_on_round_instant
from .preview import preview
from .schedule import (
    ADJUSTMENT_GAP_SHIFTED,
    ADJUSTMENT_NONE,
    ADJUSTMENT_REPEAT_FIRST,
    ADJUSTMENT_REPEAT_SECOND,
    GAP_POLICIES,
    REPEAT_POLICIES,
    Fire,
    Schedule,
    compile_schedule,
)
from .timeconv import format_us, from_us, parse_iso_to_us, to_us

__all__ = [
    "ADJUSTMENT_GAP_SHIFTED",
    "ADJUSTMENT_NONE",
    "ADJUSTMENT_REPEAT_FIRST",
    "ADJUSTMENT_REPEAT_SECOND",
    "GAP_POLICIES",
    "REPEAT_POLICIES",
    "Fire",
    "Schedule",
    "ScheduleError",
    "compile_schedule",
    "format_us",
    "from_us",
    "jitter_offset_us",
    "lands_on_round_instant",
    "parse_iso_to_us",
    "preview",
    "to_us",
]
