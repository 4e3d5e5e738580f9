"""Cron semantics on a zone without DST, time conversions, memoization and preview."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from scheduler.planning import (
    Fire,
    compile_schedule,
    format_us,
    from_us,
    parse_iso_to_us,
    preview,
    to_us,
)

UTC = timezone.utc


def us(text: str) -> int:
    return parse_iso_to_us(text)


def upcoming(expr: str, after: str, n: int, zone: str = "UTC") -> list[str]:
    schedule = compile_schedule(expr, zone)
    return [format_us(fire.at_us) for fire in schedule.next_fires(us(after), n)]


def test_five_fields_are_minute_hour_dom_month_dow():
    assert upcoming("*/15 9 * * *", "2026-01-01T09:20:00Z", 3) == [
        "2026-01-01T09:30:00Z",
        "2026-01-01T09:45:00Z",
        "2026-01-02T09:00:00Z",
    ]


def test_six_fields_put_seconds_first():
    assert upcoming("*/5 * * * * *", "2026-01-01T00:00:00Z", 3) == [
        "2026-01-01T00:00:05Z",
        "2026-01-01T00:00:10Z",
        "2026-01-01T00:00:15Z",
    ]
    # Read seconds-last (croniter's convention) this would be 12:30:00; seconds-first it is
    # 12:00:30.
    assert upcoming("30 0 12 * * *", "2026-01-01T00:00:00Z", 1) == ["2026-01-01T12:00:30Z"]
    schedule = compile_schedule("30 0 12 * * *")
    assert schedule.has_seconds and not compile_schedule("0 12 * * *").has_seconds


def test_single_value_ranges_are_not_read_as_wildcards():
    # croniter 7 reads `23-23` in the hour field as `*`; we must not.
    assert upcoming("0 23-23 * * *", "2026-01-01T00:00:00Z", 2) == [
        "2026-01-01T23:00:00Z",
        "2026-01-02T23:00:00Z",
    ]
    assert upcoming("0 0 15-15 * *", "2026-01-01T00:00:00Z", 2) == [
        "2026-01-15T00:00:00Z",
        "2026-02-15T00:00:00Z",
    ]
    assert upcoming("0 0 * 6-6 *", "2026-01-01T00:00:00Z", 1) == ["2026-06-01T00:00:00Z"]
    # 2026-01-07 is a Wednesday (3).
    assert upcoming("0 0 * * 3-3", "2026-01-01T00:00:00Z", 2) == [
        "2026-01-07T00:00:00Z",
        "2026-01-14T00:00:00Z",
    ]
    assert upcoming("7-7 5-5 23-23 * * *", "2026-01-01T00:00:00Z", 1) == ["2026-01-01T23:05:07Z"]


def test_aliases():
    after = "2026-01-01T00:30:00Z"  # a Thursday
    assert upcoming("@hourly", after, 1) == ["2026-01-01T01:00:00Z"]
    assert upcoming("@daily", after, 1) == ["2026-01-02T00:00:00Z"]
    assert upcoming("@midnight", after, 1) == ["2026-01-02T00:00:00Z"]
    assert upcoming("@weekly", after, 1) == ["2026-01-04T00:00:00Z"]  # Sunday
    assert upcoming("@monthly", after, 1) == ["2026-02-01T00:00:00Z"]
    assert upcoming("@yearly", after, 1) == ["2027-01-01T00:00:00Z"]
    assert upcoming("@Annually", after, 1) == ["2027-01-01T00:00:00Z"]


def test_day_of_month_or_day_of_week_when_both_are_restricted():
    # Vixie/cronie: 13th of the month OR any Friday. 2026-02-06 is a Friday.
    assert upcoming("0 0 13 * fri", "2026-02-01T00:00:00Z", 4) == [
        "2026-02-06T00:00:00Z",
        "2026-02-13T00:00:00Z",
        "2026-02-20T00:00:00Z",
        "2026-02-27T00:00:00Z",
    ]
    # The classic surprise: this is "days 1-7, and every Monday", not "first Monday".
    fires = upcoming("0 0 1-7 * 1", "2026-02-07T12:00:00Z", 2)
    assert fires == ["2026-02-09T00:00:00Z", "2026-02-16T00:00:00Z"]


def test_day_of_month_and_day_of_week_when_one_starts_with_a_star():
    # `*/2` starts with '*': odd days AND Mondays. Mondays of Feb 2026: 2, 9, 16, 23.
    assert upcoming("0 0 */2 * 1", "2026-02-01T00:00:00Z", 2) == [
        "2026-02-09T00:00:00Z",
        "2026-02-23T00:00:00Z",
    ]


def test_weekday_names_numbers_and_sunday_as_seven():
    sunday_fires = upcoming("0 0 * * 0", "2026-01-01T00:00:00Z", 3)
    assert upcoming("0 0 * * 7", "2026-01-01T00:00:00Z", 3) == sunday_fires
    assert upcoming("0 0 * * SUN", "2026-01-01T00:00:00Z", 3) == sunday_fires
    # fri-sun wraps onto Sunday: Jan 2 (Fri), 3 (Sat), 4 (Sun), then 9.
    assert upcoming("0 0 * * fri-sun", "2026-01-01T00:00:00Z", 4) == [
        "2026-01-02T00:00:00Z",
        "2026-01-03T00:00:00Z",
        "2026-01-04T00:00:00Z",
        "2026-01-09T00:00:00Z",
    ]


def test_start_with_step_means_start_to_end_of_field():
    assert upcoming("5/20 * * * *", "2026-01-01T00:00:00Z", 3) == [
        "2026-01-01T00:05:00Z",
        "2026-01-01T00:25:00Z",
        "2026-01-01T00:45:00Z",
    ]


@pytest.mark.parametrize(
    "expr, fixed",
    [
        ("30 2 * * *", True),
        ("0 0-23 * * *", True),
        ("0 9 * * 1-5", True),
        ("@daily", True),
        ("* 30 2 * * *", True),
        ("*/10 0 3 * * *", True),
        ("*/5 2 * * *", False),
        ("0 * * * *", False),
        ("0 */2 * * *", False),
        ("@hourly", False),
        ("* * * * *", False),
        ("0 */5 2 * * *", False),
    ],
)
def test_fixed_time_is_decided_by_the_minute_and_hour_fields(expr, fixed):
    assert compile_schedule(expr).is_fixed_time is fixed


def test_rare_schedules_are_found_across_decades():
    # Feb 29 falling on a Sunday (dow `*/7` starts with '*', so both must match).
    schedule = compile_schedule("0 0 29 2 */7")
    fires = schedule.next_fires(us("2026-01-01T00:00:00Z"), 3)
    got = [from_us(fire.at_us).date() for fire in fires]
    assert got == [date(2032, 2, 29), date(2060, 2, 29), date(2088, 2, 29)]
    assert all(day.isoweekday() == 7 for day in got)
    # 2100 is not a leap year, so the next one after 2088 is 40 years later.
    assert from_us(schedule.next_fire(fires[-1].at_us).at_us).date() == date(2128, 2, 29)


def test_leap_day_schedule_is_valid():
    assert upcoming("0 0 29 2 *", "2026-01-01T00:00:00Z", 2) == [
        "2028-02-29T00:00:00Z",
        "2032-02-29T00:00:00Z",
    ]


def test_next_fire_is_strictly_after():
    schedule = compile_schedule("0 * * * *")
    on_the_hour = us("2026-01-01T05:00:00Z")
    assert schedule.next_fire(on_the_hour).at_us == us("2026-01-01T06:00:00Z")
    assert schedule.next_fire(on_the_hour - 1).at_us == on_the_hour


def test_fire_fields_in_utc():
    fire = compile_schedule("30 2 * * *").next_fire(us("2026-03-08T00:00:00Z"))
    assert fire == Fire(us("2026-03-08T02:30:00Z"), "2026-03-08T02:30:00", "", 0)


def test_fixed_offset_zones_shift_by_their_offset():
    # Etc/GMT+5 is UTC-5 (the sign is POSIX-inverted in these names).
    fire = compile_schedule("0 12 * * *", "Etc/GMT+5").next_fire(us("2026-01-01T00:00:00Z"))
    assert (format_us(fire.at_us), fire.utc_offset_s) == ("2026-01-01T17:00:00Z", -5 * 3600)
    fire = compile_schedule("0 0 * * *", "Etc/GMT-14").next_fire(us("2026-01-01T00:00:00Z"))
    assert (format_us(fire.at_us), fire.nominal_local) == ("2026-01-01T10:00:00Z", "2026-01-02T00:00:00")


def test_fires_between_is_bounded_and_inclusive_at_the_end():
    schedule = compile_schedule("*/10 * * * *")
    start, end = us("2026-01-01T00:00:00Z"), us("2026-01-01T01:00:00Z")
    fires = schedule.fires_between(start, end, limit=100)
    assert [format_us(f.at_us)[11:16] for f in fires] == [
        "00:10",
        "00:20",
        "00:30",
        "00:40",
        "00:50",
        "01:00",
    ]
    assert len(schedule.fires_between(start, end, limit=2)) == 2
    assert schedule.fires_between(end, start, limit=10) == []
    assert schedule.fires_between(start, end, limit=0) == []


def test_far_future_ends_quietly():
    schedule = compile_schedule("0 0 1 1 *")
    assert schedule.next_fire(us("9999-06-01T00:00:00Z")) is None
    assert schedule.next_fires(us("9998-06-01T00:00:00Z"), 5)[0].nominal_local == "9999-01-01T00:00:00"


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Etc/GMT+12"])
def test_no_fire_is_reported_past_what_a_datetime_can_show(zone):
    schedule = compile_schedule("59 59 23 31 12 *", zone)
    fires = schedule.next_fires(us("9999-06-01T00:00:00Z"), 3)
    assert all(fire.at_us <= us("9999-12-31T23:59:59.999999Z") for fire in fires)
    assert [fire.nominal_local for fire in fires] == (["9999-12-31T23:59:59"] if zone == "UTC" else [])


def test_compiled_schedules_are_shared_hashable_and_equal_by_value():
    first = compile_schedule("0 3 * * *", "Europe/Paris")
    assert compile_schedule("0 3 * * *", "Europe/Paris") is first
    explicit = compile_schedule("0 3 * * *", "Europe/Paris", "run_at_end", "first")
    assert explicit == first and hash(explicit) == hash(first)
    assert first != compile_schedule("0 3 * * *", "Europe/Paris", dst_gap="skip")
    assert len({first, explicit}) == 1
    with pytest.raises(AttributeError):
        first.expr = "changed"


def test_describe_names_the_zone_and_the_dst_rule():
    text = compile_schedule("30 2 * * *", "America/New_York").describe()
    assert "America/New_York" in text and "fixed-time" in text and "gap ends" in text
    assert "no DST" in compile_schedule("@hourly").describe()


def test_time_conversions_are_exact():
    moment = datetime(2026, 3, 8, 7, 0, 0, 123456, tzinfo=UTC)
    assert to_us(moment) == 1772953200123456
    assert from_us(1772953200123456) == moment
    assert format_us(1772953200123456) == "2026-03-08T07:00:00.123456Z"
    assert format_us(1772953200000000) == "2026-03-08T07:00:00Z"
    assert format_us(-1) == "1969-12-31T23:59:59.999999Z"
    assert to_us(datetime(2026, 3, 8, 3, tzinfo=timezone(timedelta(hours=-4)))) == 1772953200000000
    with pytest.raises(ValueError):
        to_us(datetime(2026, 3, 8))


def test_parse_iso_reads_offsets_and_treats_naive_as_utc():
    assert us("2026-03-08T03:00:00-04:00") == us("2026-03-08T07:00:00Z")
    assert us("2026-03-08T07:00:00") == us("2026-03-08T07:00:00+00:00")


def test_preview_reports_local_and_utc_times():
    rows = preview("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 2)
    assert rows == [
        {
            "at": "2026-03-08T03:00:00-04:00",
            "at_utc": "2026-03-08T07:00:00Z",
            "nominal_local": "2026-03-08T02:30:00",
            "adjustment": "dst_gap_shifted",
            "utc_offset": "-04:00",
        },
        {
            "at": "2026-03-09T02:30:00-04:00",
            "at_utc": "2026-03-09T06:30:00Z",
            "nominal_local": "2026-03-09T02:30:00",
            "adjustment": "",
            "utc_offset": "-04:00",
        },
    ]
    assert preview("0 0 * * *", "UTC", "2026-01-01", 1)[0]["at"] == "2026-01-02T00:00:00+00:00"
    lord_howe = preview("0 12 * * *", "Australia/Lord_Howe", "2026-06-01T00:00:00Z", 1)
    assert lord_howe[0]["utc_offset"] == "+10:30"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"after": "yesterday"}, "after"),
        ({"after": "2026-13-01T00:00:00Z"}, "after"),
        ({"n": -1}, "n"),
        ({"n": 10_001}, "n"),
        ({"expr": "0 0 31 2 *"}, "schedule"),
        ({"timezone": "Nowhere/Special"}, "timezone"),
        ({"dst_gap": "never"}, "dst"),
    ],
)
def test_preview_errors_name_the_field(kwargs, field):
    from scheduler.planning import ScheduleError

    arguments = {"expr": "0 0 * * *", "timezone": "UTC", "after": "2026-01-01T00:00:00Z", "n": 3}
    arguments.update(kwargs)
    with pytest.raises(ScheduleError) as caught:
        preview(**arguments)
    assert caught.value.field == field
