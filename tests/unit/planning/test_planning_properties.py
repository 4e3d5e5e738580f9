"""Properties of fire sequences, and a brute-force oracle for the DST rule.

The oracle knows nothing about folds or transitions: it walks real time minute by minute to
learn which real instants show each wall-clock minute, then applies the policy as written in
the design (one occurrence: fire; two: first/second/both; none: fire at the first real instant
showing a later wall time, or skip).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.planning import compile_schedule, parse_iso_to_us, to_us

UTC = timezone.utc
MINUTE_US = 60_000_000

ZONES = [
    "UTC",
    "Etc/GMT-14",
    "America/New_York",
    "Europe/London",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Asia/Kolkata",
]
MINUTE_FIELDS = ["0", "30", "*/15", "15,45", "*", "0-10/5", "59", "*/7"]
HOUR_FIELDS = ["*", "0", "1", "2", "23", "*/2", "1-3", "0,12", "2-2"]
DAY_OF_MONTH_FIELDS = ["*", "*", "*", "1", "4,5,6", "*/2", "28-31"]
DAY_OF_WEEK_FIELDS = ["*", "*", "*", "0", "6", "1-5", "sat,sun"]
SECOND_FIELDS = [None, None, "0", "*/20", "30", "*"]

expressions = st.builds(
    lambda second, minute, hour, dom, dow: " ".join(
        ([second] if second is not None else []) + [minute, hour, dom, "*", dow]
    ),
    st.sampled_from(SECOND_FIELDS),
    st.sampled_from(MINUTE_FIELDS),
    st.sampled_from(HOUR_FIELDS),
    st.sampled_from(DAY_OF_MONTH_FIELDS),
    st.sampled_from(DAY_OF_WEEK_FIELDS),
)
gap_options = st.sampled_from([None, "run_at_end", "skip"])
repeat_options = st.sampled_from([None, "first", "second", "both"])
instants = st.integers(
    min_value=to_us(datetime(2018, 1, 1, tzinfo=UTC)), max_value=to_us(datetime(2031, 1, 1, tzinfo=UTC))
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions, st.sampled_from(ZONES), gap_options, repeat_options, instants)
def test_fires_are_strictly_increasing_after_the_cursor_and_chain(expr, zone, gap, repeat, after_us):
    schedule = compile_schedule(expr, zone, gap, repeat)
    fires = schedule.next_fires(after_us, 12)
    assert fires, expr
    instants_us = [fire.at_us for fire in fires]
    assert instants_us[0] > after_us
    assert all(a < b for a, b in zip(instants_us, instants_us[1:]))
    # Asking again from any fire continues the same sequence: a cursor is all the state needed.
    cursor_us = after_us
    for fire in fires:
        assert schedule.next_fire(cursor_us) == fire
        cursor_us = fire.at_us
    assert schedule.fires_between(after_us, instants_us[-1], 1000) == fires
    assert schedule.fires_between(after_us, instants_us[-1] - 1, 1000) == fires[:-1]
    assert schedule.fires_between(after_us, instants_us[-1], 5) == fires[:5]


# Windows of +-30 hours around real transitions of 2026 (Havana: 2025) and quiet days for contrast.
WINDOW_CENTRES = [
    ("America/New_York", "2026-03-08T07:00:00Z"),
    ("America/New_York", "2026-11-01T06:00:00Z"),
    ("Australia/Sydney", "2026-04-04T16:00:00Z"),
    ("Australia/Sydney", "2026-10-03T16:00:00Z"),
    ("Australia/Lord_Howe", "2026-04-04T15:00:00Z"),
    ("Australia/Lord_Howe", "2026-10-03T15:30:00Z"),
    ("America/Santiago", "2026-04-05T03:00:00Z"),
    ("America/Santiago", "2026-09-06T04:00:00Z"),
    ("America/Havana", "2025-03-09T05:00:00Z"),
    ("America/Havana", "2025-11-02T05:00:00Z"),  # Cuba: no DST after 2025
    ("Europe/London", "2026-03-29T01:00:00Z"),
    ("Europe/London", "2026-10-25T01:00:00Z"),
    ("Asia/Istanbul", "2026-03-29T01:00:00Z"),
    ("America/New_York", "2026-06-01T06:00:00Z"),
]


def _day_matches(fields, day: date) -> bool:
    cron_weekday = day.isoweekday() % 7
    in_dom = day.day in fields.days_of_month
    in_dow = cron_weekday in fields.days_of_week
    if fields.day_of_month_starred or fields.day_of_week_starred:
        return in_dom and in_dow
    return in_dom or in_dow


def _wall_matches(fields, wall: datetime) -> bool:
    return (
        wall.minute in fields.minutes
        and wall.hour in fields.hours
        and wall.month in fields.months
        and _day_matches(fields, wall.date())
    )


def _oracle(expr, zone_name, gap, repeat, start_us, end_us):
    schedule = compile_schedule(expr, zone_name)  # only for the parsed field sets
    fields = schedule.fields
    minute_text, hour_text = expr.split()[0:2]
    fixed_time = not (minute_text.startswith("*") or hour_text.startswith("*"))
    gap = gap or ("run_at_end" if fixed_time else "skip")
    repeat = repeat or ("first" if fixed_time else "both")
    zone = ZoneInfo(zone_name)
    # Which real minutes show which wall minute (scan a margin beyond the window).
    shown: dict[datetime, list[tuple[int, int]]] = {}
    real_minutes = []
    for t_us in range(start_us - 6 * 3600 * 10**6, end_us + 6 * 3600 * 10**6, MINUTE_US):
        local = datetime.fromtimestamp(t_us / 10**6, zone)
        wall = local.replace(tzinfo=None, fold=0)
        offset_s = int(local.utcoffset().total_seconds())
        shown.setdefault(wall, []).append((t_us, offset_s))
        real_minutes.append((t_us, wall, offset_s))
    fires = {}
    # Every wall minute between the first and last one seen, including those never shown.
    wall, last_wall = min(shown), max(shown)
    while wall <= last_wall:
        if _wall_matches(fields, wall):
            nominal = wall.isoformat()
            occurrences = shown.get(wall, [])
            candidates = []
            if len(occurrences) == 1:
                candidates = [(occurrences[0], "")]
            elif len(occurrences) == 2:
                first, second = occurrences
                if repeat in ("first", "both"):
                    candidates.append((first, "dst_repeat_first"))
                if repeat in ("second", "both"):
                    candidates.append((second, "dst_repeat_second"))
            elif gap == "run_at_end":
                gap_end = next(item for item in real_minutes if item[1] > wall)
                candidates = [((gap_end[0], gap_end[2]), "dst_gap_shifted")]
            for (t_us, offset_s), adjustment in candidates:
                known = fires.get(t_us)
                # One fire per instant: the earliest slot of a gap stands for the others, and
                # an ordinary slot at the gap's end wins over the shifted ones.
                if known is None or (known[1] == "dst_gap_shifted" and adjustment == ""):
                    fires[t_us] = (nominal, adjustment, offset_s)
        wall += timedelta(minutes=1)
    return [(t_us, *fires[t_us]) for t_us in sorted(fires) if start_us < t_us <= end_us]


five_field_expressions = st.builds(
    lambda minute, hour, dom, dow: f"{minute} {hour} {dom} * {dow}",
    st.sampled_from(MINUTE_FIELDS),
    st.sampled_from(HOUR_FIELDS),
    st.sampled_from(DAY_OF_MONTH_FIELDS),
    st.sampled_from(DAY_OF_WEEK_FIELDS),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(five_field_expressions, st.sampled_from(WINDOW_CENTRES), gap_options, repeat_options)
def test_fires_match_a_brute_force_walk_over_real_minutes(expr, centre, gap, repeat):
    zone_name, centre_text = centre
    centre_us = parse_iso_to_us(centre_text)
    start_us, end_us = centre_us - 30 * 3600 * 10**6, centre_us + 30 * 3600 * 10**6
    schedule = compile_schedule(expr, zone_name, gap, repeat)
    got = [
        (fire.at_us, fire.nominal_local, fire.adjustment, fire.utc_offset_s)
        for fire in schedule.fires_between(start_us, end_us, 10_000)
    ]
    assert got == _oracle(expr, zone_name, gap, repeat, start_us, end_us)


# croniter as a second opinion on the calendar matcher, in UTC only (it gets DST wrong) and
# only where it agrees with cron semantics: no single-value ranges such as `2-2` (croniter 7
# reads them as `*`) and no star-prefixed restricted day fields like `*/2` (croniter ORs them
# with the other day field where Vixie cron ANDs).
croniter_comparable = st.builds(
    lambda second, minute, hour, dom, dow: " ".join(
        ([second] if second is not None else []) + [minute, hour, dom, "*", dow]
    ),
    st.sampled_from(SECOND_FIELDS),
    st.sampled_from(MINUTE_FIELDS),
    st.sampled_from([field for field in HOUR_FIELDS if field != "2-2"]),
    st.sampled_from(["*", "1", "4,5,6", "28-31", "13"]),
    st.sampled_from(["*", "0", "6", "1-5", "sat,sun", "fri"]),
)


@settings(max_examples=200, deadline=None)
@given(croniter_comparable, instants)
def test_utc_fires_agree_with_croniter_where_its_semantics_match(expr, after_us):
    from croniter import croniter

    start = datetime.fromtimestamp(after_us // 10**6, UTC)  # croniter works in whole seconds
    iterator = croniter(expr, start, second_at_beginning=len(expr.split()) == 6)
    expected = [to_us(iterator.get_next(datetime)) for _ in range(8)]
    fires = compile_schedule(expr).next_fires(after_us // 10**6 * 10**6, 8)
    assert [fire.at_us for fire in fires] == expected
