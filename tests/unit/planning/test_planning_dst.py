"""DST behaviour of schedules, table-driven, with expected instants worked out by hand.

Every expected fire is written twice, as a UTC instant and as local time with its offset, and
the table checks that the two agree before trusting either: the arithmetic is from the zone
rules (listed per zone below), not from any cron library's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from scheduler.planning import compile_schedule, parse_iso_to_us, to_us

SHIFTED = "dst_gap_shifted"
FIRST = "dst_repeat_first"
SECOND = "dst_repeat_second"

# The transitions the table relies on, as (zone, instant in UTC, offset before, offset after).
#   America/New_York   2026-03-08 02:00 EST -> 03:00 EDT (gap 02:00-03:00)
#                      2026-11-01 02:00 EDT -> 01:00 EST (01:00-02:00 twice)
#   Australia/Sydney   2026-04-05 03:00 AEDT -> 02:00 AEST (02:00-03:00 twice)
#                      2026-10-04 02:00 AEST -> 03:00 AEDT (gap 02:00-03:00)
#   Australia/Lord_Howe 2026-04-05 02:00 +11 -> 01:30 +10:30 (01:30-02:00 twice)
#                      2026-10-04 02:00 +10:30 -> 02:30 +11 (gap 02:00-02:30)
#   America/Santiago   2026-04-05 00:00 -03 -> 2026-04-04 23:00 -04 (23:00-24:00 twice)
#                      2026-09-06 00:00 -04 -> 01:00 -03 (gap 00:00-01:00, at midnight)
#   America/Havana     2025-03-09 00:00 CST -> 01:00 CDT (gap at midnight)
#                      2025-11-02 01:00 CDT -> 00:00 CST (00:00-01:00 twice; Cuba keeps
#                      CDT all year from 2026 on, tzdata 2026f)
#   America/Sao_Paulo  2018-11-04 00:00 -03 -> 01:00 -02 (gap at midnight; DST abolished 2019)
TRANSITIONS = [
    ("America/New_York", "2026-03-08T07:00:00Z", "-05:00", "-04:00"),
    ("America/New_York", "2026-11-01T06:00:00Z", "-04:00", "-05:00"),
    ("Australia/Sydney", "2026-04-04T16:00:00Z", "+11:00", "+10:00"),
    ("Australia/Sydney", "2026-10-03T16:00:00Z", "+10:00", "+11:00"),
    ("Australia/Lord_Howe", "2026-04-04T15:00:00Z", "+11:00", "+10:30"),
    ("Australia/Lord_Howe", "2026-10-03T15:30:00Z", "+10:30", "+11:00"),
    ("America/Santiago", "2026-04-05T03:00:00Z", "-03:00", "-04:00"),
    ("America/Santiago", "2026-09-06T04:00:00Z", "-04:00", "-03:00"),
    ("America/Havana", "2025-03-09T05:00:00Z", "-05:00", "-04:00"),
    ("America/Havana", "2025-11-02T05:00:00Z", "-04:00", "-05:00"),
    ("America/Sao_Paulo", "2018-11-04T03:00:00Z", "-03:00", "-02:00"),
]


def _offset(text: str) -> timedelta:
    return datetime.fromisoformat("2000-01-01T00:00:00" + text).utcoffset()


@pytest.mark.parametrize("zone_name, at_utc, before, after", TRANSITIONS)
def test_zone_database_has_the_transitions_the_table_assumes(zone_name, at_utc, before, after):
    zone = ZoneInfo(zone_name)
    transition = datetime.fromisoformat(at_utc)
    assert (transition - timedelta(seconds=1)).astimezone(zone).utcoffset() == _offset(before)
    assert transition.astimezone(zone).utcoffset() == _offset(after)


@pytest.mark.parametrize("zone_name", ["Asia/Istanbul", "America/Sao_Paulo"])
def test_zones_that_abolished_dst_have_no_transition_in_2026(zone_name):
    zone = ZoneInfo(zone_name)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    offsets = {(start + timedelta(hours=h)).astimezone(zone).utcoffset() for h in range(0, 8760, 1)}
    assert len(offsets) == 1


@dataclass(frozen=True)
class Case:
    name: str
    zone: str
    expr: str
    after: str
    # (UTC instant, the same instant in local time with offset, nominal wall slot, adjustment)
    expected: list[tuple[str, str, str, str]]
    dst_gap: str | None = None
    dst_repeat: str | None = None


CASES = [
    # --- America/New_York, spring forward: 02:00-03:00 does not exist on 2026-03-08 --------
    Case(
        "ny fixed slot in gap runs at gap end",
        "America/New_York",
        "30 2 * * *",
        "2026-03-07T12:00:00Z",
        [
            ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00-04:00", "2026-03-08T02:30:00", SHIFTED),
            ("2026-03-09T06:30:00Z", "2026-03-09T02:30:00-04:00", "2026-03-09T02:30:00", ""),
        ],
    ),
    Case(
        "ny fixed slot in gap skipped on request",
        "America/New_York",
        "30 2 * * *",
        "2026-03-07T12:00:00Z",
        [
            ("2026-03-09T06:30:00Z", "2026-03-09T02:30:00-04:00", "2026-03-09T02:30:00", ""),
            ("2026-03-10T06:30:00Z", "2026-03-10T02:30:00-04:00", "2026-03-10T02:30:00", ""),
        ],
        dst_gap="skip",
    ),
    Case(
        "ny several gap slots collapse into one fire",
        "America/New_York",
        "0,15,30,45 2 * * *",
        "2026-03-08T00:00:00Z",
        [
            ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00-04:00", "2026-03-08T02:00:00", SHIFTED),
            ("2026-03-09T06:00:00Z", "2026-03-09T02:00:00-04:00", "2026-03-09T02:00:00", ""),
        ],
    ),
    Case(
        "ny fixed job with a seconds wildcard collapses too",
        "America/New_York",
        "*/20 30 2 * * *",
        "2026-03-08T00:00:00Z",
        [
            ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00-04:00", "2026-03-08T02:30:00", SHIFTED),
            ("2026-03-09T06:30:00Z", "2026-03-09T02:30:00-04:00", "2026-03-09T02:30:00", ""),
            ("2026-03-09T06:30:20Z", "2026-03-09T02:30:20-04:00", "2026-03-09T02:30:20", ""),
        ],
    ),
    Case(
        "ny gap end and an ordinary slot at the same instant fire once",
        "America/New_York",
        "0,30 2,3 * * *",
        "2026-03-08T00:00:00Z",
        [
            ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00-04:00", "2026-03-08T03:00:00", ""),
            ("2026-03-08T07:30:00Z", "2026-03-08T03:30:00-04:00", "2026-03-08T03:30:00", ""),
            ("2026-03-09T06:00:00Z", "2026-03-09T02:00:00-04:00", "2026-03-09T02:00:00", ""),
        ],
    ),
    Case(
        "ny wildcard job has nothing in the gap",
        "America/New_York",
        "*/30 * * * *",
        "2026-03-08T06:15:00Z",
        [
            ("2026-03-08T06:30:00Z", "2026-03-08T01:30:00-05:00", "2026-03-08T01:30:00", ""),
            ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00-04:00", "2026-03-08T03:00:00", ""),
            ("2026-03-08T07:30:00Z", "2026-03-08T03:30:00-04:00", "2026-03-08T03:30:00", ""),
        ],
    ),
    Case(
        "ny wildcard job skips its gap slot by default",
        "America/New_York",
        "15 * * * *",
        "2026-03-08T06:00:00Z",
        [
            ("2026-03-08T06:15:00Z", "2026-03-08T01:15:00-05:00", "2026-03-08T01:15:00", ""),
            ("2026-03-08T07:15:00Z", "2026-03-08T03:15:00-04:00", "2026-03-08T03:15:00", ""),
        ],
    ),
    Case(
        "ny wildcard job runs its gap slot at gap end on request",
        "America/New_York",
        "15 * * * *",
        "2026-03-08T06:00:00Z",
        [
            ("2026-03-08T06:15:00Z", "2026-03-08T01:15:00-05:00", "2026-03-08T01:15:00", ""),
            ("2026-03-08T07:00:00Z", "2026-03-08T03:00:00-04:00", "2026-03-08T02:15:00", SHIFTED),
            ("2026-03-08T07:15:00Z", "2026-03-08T03:15:00-04:00", "2026-03-08T03:15:00", ""),
        ],
        dst_gap="run_at_end",
    ),
    # --- America/New_York, fall back: 01:00-02:00 happens twice on 2026-11-01 ----------------
    Case(
        "ny fixed slot in repeat fires at first occurrence",
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T12:00:00Z",
        [
            ("2026-11-01T05:30:00Z", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00", FIRST),
            ("2026-11-02T06:30:00Z", "2026-11-02T01:30:00-05:00", "2026-11-02T01:30:00", ""),
        ],
    ),
    Case(
        "ny fixed slot in repeat, second occurrence",
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T12:00:00Z",
        [
            ("2026-11-01T06:30:00Z", "2026-11-01T01:30:00-05:00", "2026-11-01T01:30:00", SECOND),
            ("2026-11-02T06:30:00Z", "2026-11-02T01:30:00-05:00", "2026-11-02T01:30:00", ""),
        ],
        dst_repeat="second",
    ),
    Case(
        "ny fixed slot in repeat, both occurrences",
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T12:00:00Z",
        [
            ("2026-11-01T05:30:00Z", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00", FIRST),
            ("2026-11-01T06:30:00Z", "2026-11-01T01:30:00-05:00", "2026-11-01T01:30:00", SECOND),
            ("2026-11-02T06:30:00Z", "2026-11-02T01:30:00-05:00", "2026-11-02T01:30:00", ""),
        ],
        dst_repeat="both",
    ),
    Case(
        "ny second occurrence still ahead when starting inside the first copy",
        "America/New_York",
        "30 1 * * *",
        "2026-11-01T05:45:00Z",
        [
            ("2026-11-01T06:30:00Z", "2026-11-01T01:30:00-05:00", "2026-11-01T01:30:00", SECOND),
        ],
        dst_repeat="second",
    ),
    Case(
        "ny starting inside the second copy",
        "America/New_York",
        "30 1 * * *",
        "2026-11-01T06:45:00Z",
        [
            ("2026-11-02T06:30:00Z", "2026-11-02T01:30:00-05:00", "2026-11-02T01:30:00", ""),
        ],
        dst_repeat="both",
    ),
    Case(
        "ny wildcard job fires in both copies, in real-time order",
        "America/New_York",
        "*/30 * * * *",
        "2026-11-01T04:45:00Z",
        [
            ("2026-11-01T05:00:00Z", "2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00", FIRST),
            ("2026-11-01T05:30:00Z", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00", FIRST),
            ("2026-11-01T06:00:00Z", "2026-11-01T01:00:00-05:00", "2026-11-01T01:00:00", SECOND),
            ("2026-11-01T06:30:00Z", "2026-11-01T01:30:00-05:00", "2026-11-01T01:30:00", SECOND),
            ("2026-11-01T07:00:00Z", "2026-11-01T02:00:00-05:00", "2026-11-01T02:00:00", ""),
        ],
    ),
    Case(
        "ny wildcard job limited to the first copy",
        "America/New_York",
        "*/30 * * * *",
        "2026-11-01T04:45:00Z",
        [
            ("2026-11-01T05:00:00Z", "2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00", FIRST),
            ("2026-11-01T05:30:00Z", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00", FIRST),
            ("2026-11-01T07:00:00Z", "2026-11-01T02:00:00-05:00", "2026-11-01T02:00:00", ""),
        ],
        dst_repeat="first",
    ),
    Case(
        "ny wildcard job limited to the second copy",
        "America/New_York",
        "*/30 * * * *",
        "2026-11-01T04:45:00Z",
        [
            ("2026-11-01T06:00:00Z", "2026-11-01T01:00:00-05:00", "2026-11-01T01:00:00", SECOND),
            ("2026-11-01T06:30:00Z", "2026-11-01T01:30:00-05:00", "2026-11-01T01:30:00", SECOND),
            ("2026-11-01T07:00:00Z", "2026-11-01T02:00:00-05:00", "2026-11-01T02:00:00", ""),
        ],
        dst_repeat="second",
    ),
    # --- Australia/Sydney (southern hemisphere: repeat in April, gap in October) ------------
    Case(
        "sydney fixed slot in repeat",
        "Australia/Sydney",
        "30 2 * * *",
        "2026-04-04T00:00:00Z",
        [
            ("2026-04-04T15:30:00Z", "2026-04-05T02:30:00+11:00", "2026-04-05T02:30:00", FIRST),
            ("2026-04-05T16:30:00Z", "2026-04-06T02:30:00+10:00", "2026-04-06T02:30:00", ""),
        ],
    ),
    Case(
        "sydney fixed slot in repeat, second",
        "Australia/Sydney",
        "30 2 * * *",
        "2026-04-04T00:00:00Z",
        [
            ("2026-04-04T16:30:00Z", "2026-04-05T02:30:00+10:00", "2026-04-05T02:30:00", SECOND),
            ("2026-04-05T16:30:00Z", "2026-04-06T02:30:00+10:00", "2026-04-06T02:30:00", ""),
        ],
        dst_repeat="second",
    ),
    Case(
        "sydney wildcard hourly in repeat",
        "Australia/Sydney",
        "0 * * * *",
        "2026-04-04T14:30:00Z",
        [
            ("2026-04-04T15:00:00Z", "2026-04-05T02:00:00+11:00", "2026-04-05T02:00:00", FIRST),
            ("2026-04-04T16:00:00Z", "2026-04-05T02:00:00+10:00", "2026-04-05T02:00:00", SECOND),
            ("2026-04-04T17:00:00Z", "2026-04-05T03:00:00+10:00", "2026-04-05T03:00:00", ""),
        ],
    ),
    Case(
        "sydney fixed slot in gap",
        "Australia/Sydney",
        "30 2 * * *",
        "2026-10-03T00:00:00Z",
        [
            ("2026-10-03T16:00:00Z", "2026-10-04T03:00:00+11:00", "2026-10-04T02:30:00", SHIFTED),
            ("2026-10-04T15:30:00Z", "2026-10-05T02:30:00+11:00", "2026-10-05T02:30:00", ""),
        ],
    ),
    Case(
        "sydney fixed slot in gap, skip",
        "Australia/Sydney",
        "30 2 * * *",
        "2026-10-03T00:00:00Z",
        [
            ("2026-10-04T15:30:00Z", "2026-10-05T02:30:00+11:00", "2026-10-05T02:30:00", ""),
        ],
        dst_gap="skip",
    ),
    Case(
        "sydney wildcard hourly in gap",
        "Australia/Sydney",
        "0 * * * *",
        "2026-10-03T14:30:00Z",
        [
            ("2026-10-03T15:00:00Z", "2026-10-04T01:00:00+10:00", "2026-10-04T01:00:00", ""),
            ("2026-10-03T16:00:00Z", "2026-10-04T03:00:00+11:00", "2026-10-04T03:00:00", ""),
            ("2026-10-03T17:00:00Z", "2026-10-04T04:00:00+11:00", "2026-10-04T04:00:00", ""),
        ],
    ),
    # --- Australia/Lord_Howe: the clocks move by 30 minutes --------------------------------
    Case(
        "lord howe fixed slot in the half-hour repeat",
        "Australia/Lord_Howe",
        "45 1 * * *",
        "2026-04-04T00:00:00Z",
        [
            ("2026-04-04T14:45:00Z", "2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00", FIRST),
            ("2026-04-05T15:15:00Z", "2026-04-06T01:45:00+10:30", "2026-04-06T01:45:00", ""),
        ],
    ),
    Case(
        "lord howe fixed slot in the half-hour repeat, both",
        "Australia/Lord_Howe",
        "45 1 * * *",
        "2026-04-04T00:00:00Z",
        [
            ("2026-04-04T14:45:00Z", "2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00", FIRST),
            ("2026-04-04T15:15:00Z", "2026-04-05T01:45:00+10:30", "2026-04-05T01:45:00", SECOND),
            ("2026-04-05T15:15:00Z", "2026-04-06T01:45:00+10:30", "2026-04-06T01:45:00", ""),
        ],
        dst_repeat="both",
    ),
    Case(
        "lord howe 01:15 is not repeated (only 01:30-02:00 is)",
        "Australia/Lord_Howe",
        "15 1 * * *",
        "2026-04-04T00:00:00Z",
        [
            ("2026-04-04T14:15:00Z", "2026-04-05T01:15:00+11:00", "2026-04-05T01:15:00", ""),
        ],
        dst_repeat="both",
    ),
    Case(
        "lord howe fixed slot in the half-hour gap",
        "Australia/Lord_Howe",
        "15 2 * * *",
        "2026-10-03T00:00:00Z",
        [
            ("2026-10-03T15:30:00Z", "2026-10-04T02:30:00+11:00", "2026-10-04T02:15:00", SHIFTED),
            ("2026-10-04T15:15:00Z", "2026-10-05T02:15:00+11:00", "2026-10-05T02:15:00", ""),
        ],
    ),
    Case(
        "lord howe 02:45 is not in the gap (only 02:00-02:30 is)",
        "Australia/Lord_Howe",
        "45 2 * * *",
        "2026-10-03T00:00:00Z",
        [
            ("2026-10-03T15:45:00Z", "2026-10-04T02:45:00+11:00", "2026-10-04T02:45:00", ""),
        ],
    ),
    Case(
        "lord howe wildcard quarter-hours across the repeat",
        "Australia/Lord_Howe",
        "*/15 * * * *",
        "2026-04-04T14:20:00Z",
        [
            ("2026-04-04T14:30:00Z", "2026-04-05T01:30:00+11:00", "2026-04-05T01:30:00", FIRST),
            ("2026-04-04T14:45:00Z", "2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00", FIRST),
            ("2026-04-04T15:00:00Z", "2026-04-05T01:30:00+10:30", "2026-04-05T01:30:00", SECOND),
            ("2026-04-04T15:15:00Z", "2026-04-05T01:45:00+10:30", "2026-04-05T01:45:00", SECOND),
            ("2026-04-04T15:30:00Z", "2026-04-05T02:00:00+10:30", "2026-04-05T02:00:00", ""),
        ],
    ),
    Case(
        "lord howe wildcard quarter-hours across the gap",
        "Australia/Lord_Howe",
        "*/15 * * * *",
        "2026-10-03T15:10:00Z",
        [
            ("2026-10-03T15:15:00Z", "2026-10-04T01:45:00+10:30", "2026-10-04T01:45:00", ""),
            ("2026-10-03T15:30:00Z", "2026-10-04T02:30:00+11:00", "2026-10-04T02:30:00", ""),
            ("2026-10-03T15:45:00Z", "2026-10-04T02:45:00+11:00", "2026-10-04T02:45:00", ""),
        ],
    ),
    # --- Zones that abolished DST: nothing special happens on the old transition dates ------
    Case(
        "istanbul keeps +03 on the EU spring date",
        "Asia/Istanbul",
        "30 2 * * *",
        "2026-03-28T00:00:00Z",
        [
            ("2026-03-28T23:30:00Z", "2026-03-29T02:30:00+03:00", "2026-03-29T02:30:00", ""),
            ("2026-03-29T23:30:00Z", "2026-03-30T02:30:00+03:00", "2026-03-30T02:30:00", ""),
        ],
    ),
    Case(
        "istanbul keeps +03 on the EU autumn date",
        "Asia/Istanbul",
        "30 3 * * *",
        "2026-10-24T12:00:00Z",
        [
            ("2026-10-25T00:30:00Z", "2026-10-25T03:30:00+03:00", "2026-10-25T03:30:00", ""),
        ],
        dst_repeat="both",
    ),
    Case(
        "sao paulo midnight gap in 2018, when it still had DST",
        "America/Sao_Paulo",
        "0 0 * * *",
        "2018-11-03T12:00:00Z",
        [
            ("2018-11-04T03:00:00Z", "2018-11-04T01:00:00-02:00", "2018-11-04T00:00:00", SHIFTED),
            ("2018-11-05T02:00:00Z", "2018-11-05T00:00:00-02:00", "2018-11-05T00:00:00", ""),
        ],
    ),
    Case(
        "sao paulo has no gap on the same date in 2026",
        "America/Sao_Paulo",
        "0 0 * * *",
        "2026-10-31T12:00:00Z",
        [
            ("2026-11-01T03:00:00Z", "2026-11-01T00:00:00-03:00", "2026-11-01T00:00:00", ""),
            ("2026-11-02T03:00:00Z", "2026-11-02T00:00:00-03:00", "2026-11-02T00:00:00", ""),
        ],
    ),
    # --- Transitions at midnight ------------------------------------------------------------
    Case(
        "santiago midnight does not exist on 2026-09-06",
        "America/Santiago",
        "0 0 * * *",
        "2026-09-05T00:00:00Z",
        [
            ("2026-09-05T04:00:00Z", "2026-09-05T00:00:00-04:00", "2026-09-05T00:00:00", ""),
            ("2026-09-06T04:00:00Z", "2026-09-06T01:00:00-03:00", "2026-09-06T00:00:00", SHIFTED),
            ("2026-09-07T03:00:00Z", "2026-09-07T00:00:00-03:00", "2026-09-07T00:00:00", ""),
        ],
    ),
    Case(
        "santiago midnight skipped on request",
        "America/Santiago",
        "0 0 * * *",
        "2026-09-05T00:00:00Z",
        [
            ("2026-09-05T04:00:00Z", "2026-09-05T00:00:00-04:00", "2026-09-05T00:00:00", ""),
            ("2026-09-07T03:00:00Z", "2026-09-07T00:00:00-03:00", "2026-09-07T00:00:00", ""),
        ],
        dst_gap="skip",
    ),
    Case(
        "santiago wildcard hourly across the midnight gap",
        "America/Santiago",
        "0 * * * *",
        "2026-09-06T02:30:00Z",
        [
            ("2026-09-06T03:00:00Z", "2026-09-05T23:00:00-04:00", "2026-09-05T23:00:00", ""),
            ("2026-09-06T04:00:00Z", "2026-09-06T01:00:00-03:00", "2026-09-06T01:00:00", ""),
            ("2026-09-06T05:00:00Z", "2026-09-06T02:00:00-03:00", "2026-09-06T02:00:00", ""),
        ],
    ),
    Case(
        "santiago 23:30 happens twice on 2026-04-04",
        "America/Santiago",
        "30 23 * * *",
        "2026-04-04T12:00:00Z",
        [
            ("2026-04-05T02:30:00Z", "2026-04-04T23:30:00-03:00", "2026-04-04T23:30:00", FIRST),
            ("2026-04-06T03:30:00Z", "2026-04-05T23:30:00-04:00", "2026-04-05T23:30:00", ""),
        ],
    ),
    Case(
        "santiago 23:30 twice, second",
        "America/Santiago",
        "30 23 * * *",
        "2026-04-04T12:00:00Z",
        [
            ("2026-04-05T03:30:00Z", "2026-04-04T23:30:00-04:00", "2026-04-04T23:30:00", SECOND),
            ("2026-04-06T03:30:00Z", "2026-04-05T23:30:00-04:00", "2026-04-05T23:30:00", ""),
        ],
        dst_repeat="second",
    ),
    Case(
        "santiago wildcard hourly across the repeat before midnight",
        "America/Santiago",
        "0 * * * *",
        "2026-04-05T01:30:00Z",
        [
            ("2026-04-05T02:00:00Z", "2026-04-04T23:00:00-03:00", "2026-04-04T23:00:00", FIRST),
            ("2026-04-05T03:00:00Z", "2026-04-04T23:00:00-04:00", "2026-04-04T23:00:00", SECOND),
            ("2026-04-05T04:00:00Z", "2026-04-05T00:00:00-04:00", "2026-04-05T00:00:00", ""),
        ],
    ),
    Case(
        "havana midnight gap",
        "America/Havana",
        "0 0 * * *",
        "2025-03-08T12:00:00Z",
        [
            ("2025-03-09T05:00:00Z", "2025-03-09T01:00:00-04:00", "2025-03-09T00:00:00", SHIFTED),
            ("2025-03-10T04:00:00Z", "2025-03-10T00:00:00-04:00", "2025-03-10T00:00:00", ""),
        ],
    ),
    Case(
        "havana midnight repeated, both",
        "America/Havana",
        "0 0 * * *",
        "2025-11-01T12:00:00Z",
        [
            ("2025-11-02T04:00:00Z", "2025-11-02T00:00:00-04:00", "2025-11-02T00:00:00", FIRST),
            ("2025-11-02T05:00:00Z", "2025-11-02T00:00:00-05:00", "2025-11-02T00:00:00", SECOND),
            ("2025-11-03T05:00:00Z", "2025-11-03T00:00:00-05:00", "2025-11-03T00:00:00", ""),
        ],
        dst_repeat="both",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_table_rows_are_self_consistent(case):
    for at_utc, at_local, nominal, adjustment in case.expected:
        assert datetime.fromisoformat(at_utc) == datetime.fromisoformat(at_local), at_utc
        # Only a gap shift makes the clock on the wall differ from the slot the fire is for.
        assert (at_local[:19] != nominal) == (adjustment == SHIFTED), at_utc


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_next_fires_follow_the_dst_policy(case):
    schedule = compile_schedule(case.expr, case.zone, case.dst_gap, case.dst_repeat)
    fires = schedule.next_fires(parse_iso_to_us(case.after), len(case.expected))
    got = [(fire.at_us, fire.nominal_local, fire.adjustment, fire.utc_offset_s) for fire in fires]
    want = [
        (
            parse_iso_to_us(at_utc),
            nominal,
            adjustment,
            int(datetime.fromisoformat(at_local).utcoffset().total_seconds()),
        )
        for at_utc, at_local, nominal, adjustment in case.expected
    ]
    assert got == want


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_fires_between_and_next_fire_agree_with_the_table(case):
    schedule = compile_schedule(case.expr, case.zone, case.dst_gap, case.dst_repeat)
    after_us = parse_iso_to_us(case.after)
    last_us = parse_iso_to_us(case.expected[-1][0])
    between = schedule.fires_between(after_us, last_us, 100)
    assert [fire.at_us for fire in between] == [parse_iso_to_us(row[0]) for row in case.expected]
    cursor_us = after_us
    for fire in between:
        assert schedule.next_fire(cursor_us) == fire
        cursor_us = fire.at_us


def test_defaults_depend_on_fixed_time_versus_wildcard():
    fixed = compile_schedule("30 2 * * *", "America/New_York")
    wildcard = compile_schedule("*/30 * * * *", "America/New_York")
    assert (fixed.is_fixed_time, fixed.dst_gap, fixed.dst_repeat) == (True, "run_at_end", "first")
    assert (wildcard.is_fixed_time, wildcard.dst_gap, wildcard.dst_repeat) == (False, "skip", "both")


def test_a_day_with_a_gap_has_23_hourly_fires_and_one_with_a_repeat_has_25():
    hourly = compile_schedule("0 * * * *", "America/New_York")
    spring_day = (
        to_us(datetime(2026, 3, 8, 5, tzinfo=timezone.utc)) - 1,
        to_us(datetime(2026, 3, 9, 4, tzinfo=timezone.utc)) - 1,
    )
    autumn_day = (
        to_us(datetime(2026, 11, 1, 4, tzinfo=timezone.utc)) - 1,
        to_us(datetime(2026, 11, 2, 5, tzinfo=timezone.utc)) - 1,
    )
    assert len(hourly.fires_between(*spring_day, limit=100)) == 23
    assert len(hourly.fires_between(*autumn_day, limit=100)) == 25
    daily = compile_schedule("30 1 * * *", "America/New_York")
    assert len(daily.fires_between(*autumn_day, limit=100)) == 1
