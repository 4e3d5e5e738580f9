"""Every input compile_schedule refuses, with the field it blames."""

from __future__ import annotations

import pickle

import pytest

from scheduler.planning import ScheduleError, compile_schedule

BAD_SCHEDULES = [
    ("", "empty"),
    ("   ", "empty"),
    ("* * * *", "expected 5 fields"),
    ("* * * * * * * *", "expected 5 fields"),
    ("0 0 0 1 1 * 2026", "year"),
    ("* " * 100 + "*", "limit"),
    ("H * * * *", "hashed"),
    ("H(0-29) * * * *", "hashed"),
    ("0 H/2 * * *", "hashed"),
    ("R * * * *", "random"),
    ("@reboot", "@reboot"),
    ("@every", "unknown alias"),
    ("*/0 * * * *", "step 0"),
    ("*/61 * * * *", "wider than the field"),
    ("0 */25 * * *", "wider than the field"),
    ("0 0 */32 * *", "wider than the field"),
    ("0 0 * */13 *", "wider than the field"),
    ("0 0 * * */8", "wider than the field"),
    ("*/70 * * * * *", "wider than the field"),
    ("*/x * * * *", "not a number"),
    ("60 * * * *", "outside 0-59"),
    ("0 24 * * *", "outside 0-23"),
    ("0 0 0 * *", "outside 1-31"),
    ("0 0 32 * *", "outside 1-31"),
    ("0 0 * 13 *", "outside 1-12"),
    ("0 0 * 0 *", "outside 1-12"),
    ("0 0 * * 8", "outside 0-7"),
    ("60 0 0 * * *", "outside 0-59"),
    ("5-1 * * * *", "backwards"),
    ("0 0 * dec-jan *", "backwards"),
    ("1,,2 * * * *", "empty item"),
    ("-5 * * * *", "not a valid minute"),
    ("? * * * *", "only allowed in the day fields"),
    # Quartz's day modifiers are accepted (test_planning_modifiers.py); these misuse them.
    ("0 0 L-0 * *", "L-0 is the last day itself"),
    ("0 0 L-31 * *", "before the first day of every month"),
    ("0 0 32W * *", "the day before W must be 1-31"),
    ("0 0 0W * *", "the day before W must be 1-31"),
    ("0 0 1-5W * *", "not a range"),
    ("0 0 L/2 * *", "not a step"),
    ("0 0 15L * *", "belongs to day-of-week"),
    ("0 0 5#2 * *", "# belongs to day-of-week"),
    ("0 0 * * L", "Quartz's Saturday"),
    ("0 0 * * 5#0", "1-5"),
    ("0 0 * * 5#6", "1-5"),
    ("0 0 * * mon-fri#2", "single weekday"),
    ("0 0 * * 5L/2", "single weekday"),
    ("0 0 * * 8L", "outside 0-7"),
    ("0 0 * * funday#1", "not a valid day-of-week"),
    ("0 0 * * 15W", "W belongs to day-of-month"),
    ("0 L * * *", "only allowed in day-of-month and day-of-week, not in hour"),
    ("0 0 * L *", "not in month"),
    ("0 0 * april *", "'april' is not a valid month value"),  # an L, but no modifier
    ("0 0 L-29 feb *", "never fire"),
    ("0 0 30W 2 *", "never fire"),
    ("0 0 * * funday", "not a valid day-of-week"),
    ("0 0 * * * ;", "unexpected character"),
    ("0 0 * * *\n0 1 * * *", "unexpected character"),
    ("0 0 31 2 *", "never fire"),
    ("0 0 30 2 *", "never fire"),
    ("0 0 31 4,6,9,11 *", "never fire"),
    ("0 0 0 30 feb *", "never fire"),
]


@pytest.mark.parametrize("expr, reason", BAD_SCHEDULES)
def test_bad_schedules_are_refused_with_a_reason(expr, reason):
    with pytest.raises(ScheduleError) as caught:
        compile_schedule(expr)
    assert caught.value.field == "schedule"
    assert reason in caught.value.message
    assert str(caught.value).startswith("invalid schedule: ")


BAD_ZONES = [
    ("Mars/Olympus_Mons", "not a known"),
    ("America", "not a known"),  # a directory of the tz database
    ("../../etc/passwd", "file path"),
    ("/etc/localtime", "file path"),
    ("/usr/share/zoneinfo/UTC", "file path"),
    ("America\\New_York", "file path"),
    ("localtime", "not a location"),
    ("posixrules", "not a location"),
    ("Factory", "not a location"),
    ("posix/Europe/Paris", "not a location"),
    ("right/UTC", "not a location"),
    ("zone.tab", "not a known"),  # a file next to the zones that is not a zone
    ("Europe/Paris\n", "control"),
    ("Europe/Paris\x00", "control"),
    (" Europe/Paris", "whitespace"),
    ("A" * 65, "limit"),
    ("america/new_york", "not a known"),
    ("", "time zone must not be empty"),  # an unset variable more often than a wish for UTC
]


@pytest.mark.parametrize("zone, reason", BAD_ZONES)
def test_bad_time_zones_are_refused_with_a_reason(zone, reason):
    with pytest.raises(ScheduleError) as caught:
        compile_schedule("0 0 * * *", zone)
    assert caught.value.field == "timezone"
    assert reason in caught.value.message


@pytest.mark.parametrize("zone", [None, "UTC"])
def test_missing_zone_means_utc(zone):
    assert compile_schedule("0 0 * * *", zone).timezone == "UTC"


@pytest.mark.parametrize(
    "options, name",
    [
        ({"dst_gap": "later"}, "dst_gap"),
        ({"dst_gap": "first"}, "dst_gap"),
        ({"dst_gap": ""}, "dst_gap"),
        ({"dst_gap": 1}, "dst_gap"),
        ({"dst_repeat": "all"}, "dst_repeat"),
        ({"dst_repeat": "skip"}, "dst_repeat"),
        ({"dst_repeat": True}, "dst_repeat"),
    ],
)
def test_bad_dst_options_are_refused(options, name):
    with pytest.raises(ScheduleError) as caught:
        compile_schedule("30 2 * * *", "Europe/Paris", **options)
    assert caught.value.field == "dst"
    assert name in caught.value.message


def test_non_string_expression_is_refused():
    with pytest.raises(ScheduleError) as caught:
        compile_schedule(None)
    assert caught.value.field == "schedule"


def test_schedule_error_is_a_value_error_and_survives_pickling():
    with pytest.raises(ValueError):
        compile_schedule("0 0 31 2 *")
    error = ScheduleError("timezone", "'X' is not a known IANA time zone")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.field, copy.message, str(copy)) == (error.field, error.message, str(error))


@pytest.mark.parametrize(
    "expr",
    [
        "@hourly",
        "@DAILY",
        "@midnight",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "*/60 * * * *",
        "0 */24 * * *",
        "0 0 29 2 *",
        "0 0 * * 7",
        "0 0 * * sun-sat",
        "0 0 ? * mon",
        "0 0 1 jan,JUL ?",
        "  0   0 * * *  ",
        "0\t0 * * *",
        "0-59/15 * * * *",
        "0 0 29 2 */7",
    ],
)
def test_valid_edge_forms_are_accepted(expr):
    compile_schedule(expr)
