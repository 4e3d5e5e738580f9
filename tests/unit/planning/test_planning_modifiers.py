"""Quartz's day modifiers, case by case: every documented rule with dates checked on a calendar."""

from __future__ import annotations

import pytest

from scheduler.planning import compile_schedule, lands_on_round_instant, parse_iso_to_us
from scheduler.planning.cron_fields import parse_cron, uses_quartz_modifiers
from scheduler.planning.day_modifiers import nearest_weekday


def _local_fires(expr: str, after: str, n: int, zone: str = "UTC") -> list[str]:
    return [fire.nominal_local for fire in compile_schedule(expr, zone).next_fires(parse_iso_to_us(after), n)]


def _dates(expr: str, after: str, n: int) -> list[str]:
    return [nominal[:10] for nominal in _local_fires(expr, after, n)]


GOLDEN_DATES = [
    # L: the last day, February in common, leap and century years.
    ("0 0 L 2 *", "2027-01-01T00:00:00Z", ["2027-02-28", "2028-02-29", "2029-02-28"]),
    ("0 0 L 2 *", "2099-06-01T00:00:00Z", ["2100-02-28", "2101-02-28", "2102-02-28", "2103-02-28", "2104-02-29"]),
    ("0 0 L 2 *", "1999-06-01T00:00:00Z", ["2000-02-29"]),
    ("0 0 L * *", "2026-01-01T00:00:00Z", ["2026-01-31", "2026-02-28", "2026-03-31", "2026-04-30"]),
    # L-n: n days before the last day; a month of n days or fewer does not fire.
    ("0 0 L-1 2 *", "2027-01-01T00:00:00Z", ["2027-02-27", "2028-02-28"]),
    ("0 0 L-27 2 *", "2027-01-01T00:00:00Z", ["2027-02-01", "2028-02-02"]),
    ("0 0 L-28 2 *", "2027-01-01T00:00:00Z", ["2028-02-01", "2032-02-01"]),
    (
        "0 0 L-30 * *",
        "2027-01-01T00:00:00Z",
        ["2027-03-01", "2027-05-01", "2027-07-01", "2027-08-01", "2027-10-01", "2027-12-01"],
    ),
    # nW: the nearest weekday, never leaving the month.
    ("0 0 1W 8 *", "2026-01-01T00:00:00Z", ["2026-08-03"]),  # Saturday the 1st: Monday the 3rd
    ("0 0 1W 2 *", "2026-01-01T00:00:00Z", ["2026-02-02"]),  # Sunday the 1st: Monday the 2nd
    ("0 0 15W 8 *", "2026-01-01T00:00:00Z", ["2026-08-14"]),  # Saturday: the Friday before
    ("0 0 15W 2 *", "2026-01-01T00:00:00Z", ["2026-02-16"]),  # Sunday: the Monday after
    ("0 0 31W 5 *", "2026-01-01T00:00:00Z", ["2026-05-29"]),  # Sunday the last: Friday the 29th
    ("0 0 31W 1 *", "2026-01-01T00:00:00Z", ["2026-01-30"]),  # Saturday the last: Friday the 30th
    ("0 0 31W * *", "2026-03-31T01:00:00Z", ["2026-05-29", "2026-07-31"]),  # no 31st in April or June
    ("0 0 30W * *", "2026-01-31T00:00:00Z", ["2026-03-30", "2026-04-30"]),  # February has no 30th
    ("0 0 15W * *", "2026-01-14T00:00:00Z", ["2026-01-15", "2026-02-16", "2026-03-16"]),
    # LW and L-nW.
    ("0 0 LW * *", "2026-01-01T00:00:00Z", ["2026-01-30", "2026-02-27", "2026-03-31", "2026-04-30", "2026-05-29"]),
    ("0 0 L-2W * *", "2026-01-01T00:00:00Z", ["2026-01-29", "2026-02-26", "2026-03-30"]),
    # d#k: the k-th weekday; a month without a 5th one does not fire.
    ("0 10 * * 5#3", "2026-01-01T00:00:00Z", ["2026-01-16", "2026-02-20", "2026-03-20"]),
    ("0 10 * * fri#3", "2026-01-01T00:00:00Z", ["2026-01-16", "2026-02-20", "2026-03-20"]),
    ("0 0 ? * fri#5", "2026-01-01T00:00:00Z", ["2026-01-30", "2026-05-29", "2026-07-31", "2026-10-30"]),
    ("0 0 * 2 2#5", "2027-01-01T00:00:00Z", ["2028-02-29", "2056-02-29"]),  # a 5th Tuesday in February
    ("0 0 * * 7#1", "2026-01-01T00:00:00Z", ["2026-01-04", "2026-02-01", "2026-03-01"]),  # 7 is Sunday
    # dL: the last weekday d; 0, 7 and sun are all Sunday.
    ("0 0 * * friL", "2026-01-01T00:00:00Z", ["2026-01-30", "2026-02-27", "2026-03-27"]),
    ("0 0 * * 5L", "2026-01-01T00:00:00Z", ["2026-01-30", "2026-02-27", "2026-03-27"]),
    ("0 0 * * 0L", "2026-01-01T00:00:00Z", ["2026-01-25", "2026-02-22", "2026-03-29"]),
    ("0 0 * * 7L", "2026-01-01T00:00:00Z", ["2026-01-25", "2026-02-22", "2026-03-29"]),
    ("0 0 * * SUNL", "2026-01-01T00:00:00Z", ["2026-01-25", "2026-02-22", "2026-03-29"]),
    # Lists: a field allows the union of its items.
    ("0 0 1,15,L * *", "2026-01-01T00:00:00Z", ["2026-01-15", "2026-01-31", "2026-02-01", "2026-02-15"]),
    ("0 0 ? * mon#1,friL", "2026-01-01T00:00:00Z", ["2026-01-05", "2026-01-30", "2026-02-02", "2026-02-27"]),
    # The Vixie rule: neither field starts with '*': either matches; one does: both must.
    (
        "0 0 L * 5",
        "2026-01-01T00:00:00Z",
        ["2026-01-02", "2026-01-09", "2026-01-16", "2026-01-23", "2026-01-30", "2026-01-31"],
    ),
    ("0 0 L * 5#3", "2026-01-01T00:00:00Z", ["2026-01-16", "2026-01-31", "2026-02-20", "2026-02-28"]),
    ("0 0 */2 * 5#3", "2026-01-01T00:00:00Z", ["2026-04-17", "2026-05-15"]),  # third Fridays on odd days
    ("0 0 L * *", "2026-01-01T00:00:00Z", ["2026-01-31", "2026-02-28"]),
    ("0 0 L * ?", "2026-01-01T00:00:00Z", ["2026-01-31", "2026-02-28"]),
]


@pytest.mark.parametrize("expr, after, expected", GOLDEN_DATES)
def test_modifiers_fire_on_the_documented_dates(expr, after, expected):
    assert _dates(expr, after, len(expected)) == expected


def test_six_field_expressions_take_modifiers_in_the_same_places():
    assert _local_fires("30 0 0 L * *", "2026-01-01T00:00:00Z", 2) == ["2026-01-31T00:00:30", "2026-02-28T00:00:30"]
    assert _local_fires("*/20 0 9 * * fri#3", "2026-01-16T09:00:00Z", 2) == [
        "2026-01-16T09:00:20",
        "2026-01-16T09:00:40",
    ]


def test_modifiers_compose_with_the_dst_rule():
    # Berlin springs forward on the last Sunday of March: 02:30 does not exist and fires at 03:00.
    fire = compile_schedule("30 2 * * 0L", "Europe/Berlin").next_fire(parse_iso_to_us("2027-03-27T00:00:00Z"))
    assert (fire.nominal_local, fire.adjustment, fire.at_us) == (
        "2027-03-28T02:30:00",
        "dst_gap_shifted",
        parse_iso_to_us("2027-03-28T01:00:00Z"),
    )
    # ... and falls back on the last Sunday of October: 02:30 happens twice, the first fires.
    fire = compile_schedule("30 2 * * sunL", "Europe/Berlin").next_fire(parse_iso_to_us("2027-10-30T00:00:00Z"))
    assert (fire.adjustment, fire.at_us) == ("dst_repeat_first", parse_iso_to_us("2027-10-31T00:30:00Z"))
    both = compile_schedule("30 2 * * sunL", "Europe/Berlin", dst_repeat="both")
    assert [f.at_us for f in both.next_fires(parse_iso_to_us("2027-10-30T00:00:00Z"), 2)] == [
        parse_iso_to_us("2027-10-31T00:30:00Z"),
        parse_iso_to_us("2027-10-31T01:30:00Z"),
    ]
    # New York falls back on the first Sunday of November; Lord Howe skips 02:00-02:30 on the
    # first Sunday of October.
    fire = compile_schedule("30 1 * 11 0#1", "America/New_York").next_fire(parse_iso_to_us("2027-11-01T00:00:00Z"))
    assert (fire.adjustment, fire.at_us) == ("dst_repeat_first", parse_iso_to_us("2027-11-07T05:30:00Z"))
    skipped = compile_schedule("15 2 * 10 0#1", "Australia/Lord_Howe", dst_gap="skip")
    fire = compile_schedule("15 2 * 10 0#1", "Australia/Lord_Howe").next_fire(parse_iso_to_us("2027-09-30T00:00:00Z"))
    assert (fire.adjustment, fire.at_us) == ("dst_gap_shifted", parse_iso_to_us("2027-10-02T15:30:00Z"))
    # Lord Howe's clocks always move on that Sunday at 02:00, so with "skip" the slot never fires.
    assert skipped.next_fire(parse_iso_to_us("2027-09-30T00:00:00Z")) is None


def test_modifiers_leave_herd_spreading_and_the_fixed_time_rule_alone():
    assert lands_on_round_instant(compile_schedule("0 0 L * *"))
    assert not lands_on_round_instant(compile_schedule("30 9 * * fri#3"))
    assert compile_schedule("0 9 LW * *", "Europe/Berlin").dst_gap == "run_at_end"
    assert compile_schedule("*/5 9 LW * *", "Europe/Berlin").dst_gap == "skip"


@pytest.mark.parametrize(
    "day, days_in_month, first_weekday, expected",
    [
        (1, 31, 6, 3),  # Saturday the 1st
        (1, 30, 0, 2),  # Sunday the 1st
        (31, 31, 5, 29),  # the 31st a Sunday (the 1st a Friday)
        (30, 30, 6, 28),  # the 30th a Sunday (the 1st a Saturday)
        (28, 28, 1, 26),  # February 28th a Sunday
        (13, 31, 1, 12),  # a Saturday mid-month (the 1st a Monday)
        (14, 31, 1, 15),  # a Sunday mid-month
        (10, 31, 1, 10),  # a Wednesday stays
    ],
)
def test_nearest_weekday_never_leaves_the_month(day, days_in_month, first_weekday, expected):
    assert nearest_weekday(day, days_in_month, first_weekday) == expected


@pytest.mark.parametrize(
    "expr, uses",
    [
        ("0 0 L * *", True),
        ("0 0 15W * *", True),
        ("0 0 LW * *", True),
        ("0 0 * * 5#3", True),
        ("0 0 * * friL", True),
        ("0 0 1,L * *", True),
        ("0 0 L-3 * *", True),
        ("0 0 ? * *", False),  # '?' is an old synonym of '*'
        ("0 0 * * wed", False),  # a W in a weekday name is no modifier
        ("@monthly", False),
        ("0 0 1 * *", False),
        ("0 0 L-31 * *", False),  # refused: not an expression at all
        ("nonsense", False),
        (None, False),
    ],
)
def test_uses_quartz_modifiers(expr, uses):
    assert uses_quartz_modifiers(expr) is uses


def test_plain_expressions_parse_exactly_as_before():
    fields = parse_cron("0 0 1,15 * mon-fri")
    assert fields.days_of_month == (1, 15)
    assert fields.days_of_week == (1, 2, 3, 4, 5)
    assert not fields.modifiers
    assert fields.day_rule[:3] == ((1, 15), (1, 2, 3, 4, 5), False)


DESCRIPTIONS = [
    ("0 0 L * *", "on the last day of the month"),
    ("0 0 L-1 * *", "on the day before the last day of the month"),
    ("0 0 L-3 * *", "on the last day of the month minus 3 days"),
    ("0 0 15W * *", "on the weekday nearest the 15th"),
    ("0 9 LW * *", "on the last weekday of the month"),
    ("0 10 * * 5#3", "on the third Friday of the month"),
    ("0 10 * * friL", "on the last Friday of the month"),
    ("0 0 ? * mon#1,friL", "on the first Monday of the month or the last Friday of the month"),
    ("0 0 1,15,L * *", "on the 1st, 15th or the last day of the month"),
    ("0 0 L * 5", "on the last day of the month, or on every Friday"),
    ("0 0 */2 * 5#3", "that is also the third Friday of the month"),
]


@pytest.mark.parametrize("expr, words", DESCRIPTIONS)
def test_describe_puts_modifiers_into_words(expr, words):
    text = compile_schedule(expr, "Europe/Berlin").describe()
    assert text.startswith(f"cron '{expr}' in Europe/Berlin, on ")
    assert f"{words}, fixed-time" in text


def test_describe_of_plain_expressions_is_unchanged():
    assert compile_schedule("0 9 * * 1-5").describe() == "cron '0 9 * * 1-5' in UTC, fixed-time (no DST in this zone)"
