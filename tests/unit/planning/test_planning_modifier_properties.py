"""L, W and # against a brute-force oracle that knows only the calendar and the wall clock.

The oracle reads each day-field item as a predicate on a local date, written from the rules'
definitions (the nearest weekday is found by looking at every weekday of the month), walks real
time minute by minute (second by second for 6-field expressions) to learn which real instants
show each wall-clock time, and applies the DST policy as written in the design.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.planning import ScheduleError, compile_schedule, to_us
from scheduler.planning.wall_clock import matching_days

UTC = timezone.utc
US = 10**6


def _last(day: date) -> int:
    return calendar.monthrange(day.year, day.month)[1]


@lru_cache(maxsize=None)
def _nearest_weekday(year: int, month: int, target: int) -> int | None:
    """The weekday (Mon-Fri) of the month nearest day ``target``, None if the month lacks it."""
    last = calendar.monthrange(year, month)[1]
    if not 1 <= target <= last:
        return None
    weekdays = [d for d in range(1, last + 1) if date(year, month, d).weekday() < 5]
    return min(weekdays, key=lambda d: abs(d - target))


def _nearest_weekday_is(day: date, target: int) -> bool:
    return day.day == _nearest_weekday(day.year, day.month, target)


def _cron_weekday(day: date) -> int:
    return day.isoweekday() % 7


DAY_OF_MONTH_ITEMS = {
    "L": lambda d: d.day == _last(d),
    "L-1": lambda d: d.day == _last(d) - 1,
    "L-3": lambda d: d.day == _last(d) - 3,
    "L-29": lambda d: d.day == _last(d) - 29,
    "LW": lambda d: _nearest_weekday_is(d, _last(d)),
    "L-2W": lambda d: _nearest_weekday_is(d, _last(d) - 2),
    "1W": lambda d: _nearest_weekday_is(d, 1),
    "15W": lambda d: _nearest_weekday_is(d, 15),
    "30W": lambda d: _nearest_weekday_is(d, 30),
    "31W": lambda d: _nearest_weekday_is(d, 31),
    "1": lambda d: d.day == 1,
    "15": lambda d: d.day == 15,
    "28-31": lambda d: d.day >= 28,
}
DAY_OF_WEEK_ITEMS = {
    "5#3": lambda d: _cron_weekday(d) == 5 and (d.day - 1) // 7 == 2,
    "fri#5": lambda d: _cron_weekday(d) == 5 and (d.day - 1) // 7 == 4,
    "0#1": lambda d: _cron_weekday(d) == 0 and d.day <= 7,
    "7#2": lambda d: _cron_weekday(d) == 0 and 8 <= d.day <= 14,
    "1#5": lambda d: _cron_weekday(d) == 1 and d.day >= 29,
    "5L": lambda d: _cron_weekday(d) == 5 and d.day + 7 > _last(d),
    "sunL": lambda d: _cron_weekday(d) == 0 and d.day + 7 > _last(d),
    "wedL": lambda d: _cron_weekday(d) == 3 and d.day + 7 > _last(d),
    "sat": lambda d: _cron_weekday(d) == 6,
    "1-5": lambda d: 1 <= _cron_weekday(d) <= 5,
}
# Fields starting with '*' or '?' (the Vixie rule then asks for both fields).
STARRED_DAY_OF_MONTH = {"*": lambda d: True, "?": lambda d: True, "*/2": lambda d: d.day % 2 == 1}
STARRED_DAY_OF_WEEK = {"*": lambda d: True, "?": lambda d: True, "*/2": lambda d: _cron_weekday(d) % 2 == 0}


def _field(items: dict, starred: dict, modifier_names: list[str]):
    plain_or_modifier = st.lists(st.sampled_from(sorted(items)), min_size=1, max_size=3, unique=True)
    with_a_modifier = plain_or_modifier.filter(lambda chosen: any(name in modifier_names for name in chosen))
    return st.one_of(
        st.sampled_from(sorted(starred)).map(lambda text: [text]),
        with_a_modifier,
        plain_or_modifier,
    )


_DOM_MODIFIERS = [name for name in DAY_OF_MONTH_ITEMS if "L" in name or "W" in name]
_DOW_MODIFIERS = [name for name in DAY_OF_WEEK_ITEMS if "#" in name or name.endswith("L")]
MINUTE_FIELDS = ["0", "30", "*/15", "*", "59"]
HOUR_FIELDS = ["0", "2", "9", "23", "*", "1-3"]
MONTH_FIELDS = {"*": None, "2": {2}, "2,3": {2, 3}, "10-11": {10, 11}, "3,10": {3, 10}}
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]


@st.composite
def expressions(draw, with_seconds: bool):
    dom = draw(_field(DAY_OF_MONTH_ITEMS, STARRED_DAY_OF_MONTH, _DOM_MODIFIERS))
    dow = draw(_field(DAY_OF_WEEK_ITEMS, STARRED_DAY_OF_WEEK, _DOW_MODIFIERS))
    month = draw(st.sampled_from(sorted(MONTH_FIELDS)))
    minute, hour = draw(st.sampled_from(MINUTE_FIELDS)), draw(st.sampled_from(HOUR_FIELDS))
    if with_seconds:
        # The second-by-second walk covers two hours around midnight or a DST change.
        minute, hour = draw(st.sampled_from(["*/15", "0", "59"])), draw(st.sampled_from(["*", "0", "23", "1-3"]))
    fields = [minute, hour, ",".join(dom), month, ",".join(dow)]
    if with_seconds:
        fields.insert(0, draw(st.sampled_from(["0", "*/20", "45"])))
    return " ".join(fields), dom, dow, month


def _day_predicate(dom: list[str], dow: list[str], month: str):
    def items_allow(names, table, starred, day):
        return any((starred.get(name) or table[name])(day) for name in names)

    both = dom[0] in STARRED_DAY_OF_MONTH or dow[0] in STARRED_DAY_OF_WEEK
    months = MONTH_FIELDS[month]

    @lru_cache(maxsize=None)
    def allowed(day: date) -> bool:
        if months is not None and day.month not in months:
            return False
        by_month = items_allow(dom, DAY_OF_MONTH_ITEMS, STARRED_DAY_OF_MONTH, day)
        by_week = items_allow(dow, DAY_OF_WEEK_ITEMS, STARRED_DAY_OF_WEEK, day)
        return (by_month and by_week) if both else (by_month or by_week)

    return allowed


def _allowed_values(text: str, high: int) -> frozenset[int]:
    if text == "*":
        return frozenset(range(high + 1))
    if text.startswith("*/"):
        return frozenset(range(0, high + 1, int(text[2:])))
    if "-" in text:
        low, top = map(int, text.split("-"))
        return frozenset(range(low, top + 1))
    return frozenset({int(text)})


_EPOCH = date(1970, 1, 1)


def _oracle(expr: str, day_ok, zone_name: str, start_us: int, end_us: int, step_s: int):
    parts = expr.split()
    seconds = _allowed_values(parts[0] if step_s == 1 else "0", 59)
    minute_text, hour_text = parts[-5], parts[-4]
    minutes, hours = _allowed_values(minute_text, 59), _allowed_values(hour_text, 23)
    fixed_time = not (minute_text.startswith("*") or hour_text.startswith("*"))
    gap, repeat = ("run_at_end", "first") if fixed_time else ("skip", "both")
    zone = ZoneInfo(zone_name)
    # Wall-clock times as seconds since 1970-01-01T00:00 on the wall, mapped to the real
    # instants (epoch seconds) that show them.
    shown: dict[int, list[int]] = {}
    real = []
    margin_s = 2 * 3600  # more than any DST shift, so every wall time in the window is seen
    for t_s in range(start_us // US - margin_s, end_us // US + margin_s, step_s):
        offset = datetime.fromtimestamp(t_s, zone).utcoffset()
        wall_s = t_s + offset.days * 86_400 + offset.seconds
        shown.setdefault(wall_s, []).append(t_s)
        real.append((t_s, wall_s))
    fires: dict[int, str] = {}
    for wall_s in range(min(shown), max(shown) + 1, step_s):
        days, rest = divmod(wall_s, 86_400)
        hour, rest = divmod(rest, 3600)
        minute, second = divmod(rest, 60)
        if not (second in seconds and minute in minutes and hour in hours):
            continue
        if not day_ok(_EPOCH + timedelta(days=days)):
            continue
        occurrences = shown.get(wall_s, [])
        instants: list[tuple[int, str]] = []
        if len(occurrences) == 1:
            instants = [(occurrences[0], "")]
        elif len(occurrences) == 2:
            instants = [(occurrences[0], "dst_repeat_first")]
            if repeat == "both":
                instants.append((occurrences[1], "dst_repeat_second"))
        elif gap == "run_at_end":
            instants = [(next(t for t, w in real if w > wall_s), "dst_gap_shifted")]
        for t_s, adjustment in instants:
            if t_s not in fires or (fires[t_s] == "dst_gap_shifted" and adjustment == ""):
                fires[t_s] = adjustment
    return [(t_s * US, fires[t_s]) for t_s in sorted(fires) if start_us < t_s * US <= end_us]


# One year of each kind (the weekday of January 1st, leap or not): between them they hold every
# layout every month can have, so a day rule that matches none of their dates matches none ever.
YEARS_OF_EVERY_KIND = sorted(
    {(date(year, 1, 1).weekday(), calendar.isleap(year)): year for year in range(2028, 2000, -1)}.values()
)
assert len(YEARS_OF_EVERY_KIND) == 14


def _never_fires(day_ok) -> bool:
    return not any(
        day_ok(date(year, 1, 1) + timedelta(days=n))
        for year in YEARS_OF_EVERY_KIND
        for n in range(366 if calendar.isleap(year) else 365)
    )


# Centres near month edges (where L and W act) and mid-month (W, #), at local midnight, and DST
# changes on days the modifiers name (Berlin: last Sundays; New York: 2nd and 1st Sundays;
# Lord Howe: 1st Sundays), as UTC instants.
EDGE_CENTRES = st.builds(
    lambda year, month, day: datetime(year, month, 1) + timedelta(days=day),
    st.integers(2020, 2040),
    st.integers(1, 12),
    st.sampled_from([-3, -2, -1, 0, 1, 2, 13, 14, 15, 16, 19, 27]),
)
DST_CENTRES = st.sampled_from(
    [
        datetime(2027, 3, 28, 1, tzinfo=UTC),
        datetime(2027, 10, 31, 1, tzinfo=UTC),
        datetime(2027, 3, 14, 7, tzinfo=UTC),
        datetime(2027, 11, 7, 6, tzinfo=UTC),
        datetime(2027, 10, 2, 15, tzinfo=UTC),
        datetime(2028, 4, 1, 15, tzinfo=UTC),
    ]
)
CENTRES = st.one_of(EDGE_CENTRES, DST_CENTRES)


def _check(case, zone_name: str, centre: datetime, half_window_s: int, step_s: int) -> None:
    expr, dom, dow, month = case
    day_ok = _day_predicate(dom, dow, month)
    try:
        schedule = compile_schedule(expr, zone_name)
    except ScheduleError as error:
        assert "never fire" in error.message, (expr, error.message)
        assert _never_fires(day_ok), expr
        return
    assert not _never_fires(day_ok), expr
    if centre.tzinfo is None:
        centre = centre.replace(tzinfo=ZoneInfo(zone_name))
    centre_us = to_us(centre)
    start_us, end_us = centre_us - half_window_s * US, centre_us + half_window_s * US
    got = [(fire.at_us, fire.adjustment) for fire in schedule.fires_between(start_us, end_us, 100_000)]
    assert got == _oracle(expr, day_ok, zone_name, start_us, end_us, step_s), expr


# Example counts keep the three tests near three seconds in all (each example walks thousands
# of instants).
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions(with_seconds=False), st.sampled_from(ZONES), CENTRES)
def test_five_field_modifiers_match_a_minute_by_minute_walk(case, zone_name, centre):
    _check(case, zone_name, centre, half_window_s=30 * 3600, step_s=60)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions(with_seconds=True), st.sampled_from(ZONES), CENTRES)
def test_six_field_modifiers_match_a_second_by_second_walk(case, zone_name, centre):
    _check(case, zone_name, centre, half_window_s=3600, step_s=1)


@settings(max_examples=40, deadline=None)
@given(expressions(with_seconds=False))
def test_the_day_filter_matches_the_oracle_in_every_kind_of_year(case):
    # Every layout a month can have, so every case each rule has (a Saturday the 1st, a Sunday
    # the 31st, a 5th Tuesday in February...).
    expr, dom, dow, month = case
    day_ok = _day_predicate(dom, dow, month)
    months = sorted(MONTH_FIELDS[month] or range(1, 13))
    expected = {
        (year, number): [
            day for day in range(1, calendar.monthrange(year, number)[1] + 1) if day_ok(date(year, number, day))
        ]
        for year in YEARS_OF_EVERY_KIND
        for number in months
    }
    try:
        fields = compile_schedule(expr).fields
    except ScheduleError as error:
        assert "never fire" in error.message, (expr, error.message)
        assert not any(expected.values()), expr
        return
    assert fields.months == tuple(months)
    got = {(year, number): list(matching_days(fields.day_rule, year, number)) for year, number in expected}
    assert got == expected, expr
