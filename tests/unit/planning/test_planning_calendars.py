"""Calendar rules, judged directly: owed, skipped, moved; and the instants moved slots run at."""

from __future__ import annotations

from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from scheduler.core.model import QUEUED, SKIPPED, Calendar, CalendarRule, JobSpec
from scheduler.planning import compile_schedule, to_us
from scheduler.planning.calendars import (
    OWE,
    Move,
    Skip,
    calendar_decision,
    is_business_day,
    plan_calendar_slot,
    wall_time_on,
)
from scheduler.planning.forecast import forecast

NY = ZoneInfo("America/New_York")
HOLIDAYS = Calendar("us", ("2027-07-05", "2027-09-06", "2027-12-24"))
CLOSURES = Calendar("closures", ("2027-07-02",))
MONTH_ENDS = Calendar("month-ends", ("2027-07-30", "2027-08-31"))
CALENDARS = {c.name: c for c in (HOLIDAYS, CLOSURES, MONTH_ENDS)}


def ny_us(*parts: int) -> int:
    return to_us(datetime(*parts, tzinfo=NY))


def test_a_date_in_no_calendar_is_owed() -> None:
    assert calendar_decision(date(2027, 7, 6), CalendarRule(skip=("us",)), CALENDARS) is OWE


def test_skip_names_the_calendar_that_lists_the_date() -> None:
    decision = calendar_decision(date(2027, 7, 5), CalendarRule(skip=("closures", "us")), CALENDARS)
    assert decision == Skip("calendar us: 2027-07-05 is listed")


def test_only_owes_just_the_listed_dates_and_never_moves() -> None:
    rule = CalendarRule(only=("month-ends",), on_skip="next_business_day")
    assert calendar_decision(date(2027, 7, 30), rule, CALENDARS) is OWE
    decision = calendar_decision(date(2027, 7, 29), rule, CALENDARS)
    assert isinstance(decision, Skip) and "2027-07-29 is in none of month-ends (only)" in decision.reason


def test_skip_and_only_together_skip_a_listed_date_even_if_only_keeps_it() -> None:
    both = {**CALENDARS, "x": Calendar("x", ("2027-07-30",))}
    decision = calendar_decision(date(2027, 7, 30), CalendarRule(skip=("x",), only=("month-ends",)), both)
    assert decision == Skip("calendar x: 2027-07-30 is listed")


def test_previous_business_day_skips_weekends_and_other_skip_dates() -> None:
    # Monday 2027-07-05 is a holiday; Friday 07-02 is a closure; so Thursday 07-01.
    rule = CalendarRule(skip=("us", "closures"), on_skip="previous_business_day")
    decision = calendar_decision(date(2027, 7, 5), rule, CALENDARS)
    assert isinstance(decision, Move) and decision.to_date == date(2027, 7, 1)
    assert "moved to 2027-07-01 (previous_business_day)" in decision.reason


def test_next_business_day_goes_past_the_weekend() -> None:
    rule = CalendarRule(skip=("us",), on_skip="next_business_day")
    decision = calendar_decision(date(2027, 12, 24), rule, CALENDARS)  # a Friday
    assert isinstance(decision, Move) and decision.to_date == date(2027, 12, 27)


def test_a_move_that_finds_no_business_day_skips() -> None:
    every_day = Calendar(
        "all", tuple(date.fromordinal(date(2027, 1, 1).toordinal() + i).isoformat() for i in range(90))
    )
    rule = CalendarRule(skip=("all",), on_skip="next_business_day")
    decision = calendar_decision(date(2027, 1, 10), rule, {"all": every_day})
    assert isinstance(decision, Skip) and "no next_business_day within 31 days" in decision.reason


def test_a_missing_calendar_lists_nothing() -> None:
    assert calendar_decision(date(2027, 7, 5), CalendarRule(skip=("gone",)), CALENDARS) is OWE


def test_business_days() -> None:
    rule = CalendarRule(skip=("us",))
    assert is_business_day(date(2027, 7, 6), rule, CALENDARS)
    assert not is_business_day(date(2027, 7, 5), rule, CALENDARS)  # listed
    assert not is_business_day(date(2027, 7, 3), rule, CALENDARS)  # Saturday


def test_wall_time_across_dst_keeps_the_local_time() -> None:
    # Moved from Monday 2027-03-15 (EDT) to Friday 2027-03-12 (EST): 09:00 local on both.
    assert wall_time_on(date(2027, 3, 12), time(9, 0), NY) == ny_us(2027, 3, 12, 9, 0)
    assert (
        wall_time_on(date(2027, 3, 15), time(9, 0), NY) - wall_time_on(date(2027, 3, 12), time(9, 0), NY)
        == (3 * 86_400 - 3600) * 1_000_000
    )


def test_wall_time_in_a_gap_runs_when_the_gap_ends_and_a_repeat_at_the_first() -> None:
    assert wall_time_on(date(2027, 3, 14), time(2, 30), NY) == ny_us(2027, 3, 14, 3, 0)
    first = wall_time_on(date(2027, 11, 7), time(1, 30), NY)
    assert first == to_us(datetime(2027, 11, 7, 1, 30, tzinfo=NY))  # fold=0: the EDT occurrence


def _plan(rule: CalendarRule, nominal_us: int, previous_us: int, next_us: int):
    return plan_calendar_slot(rule, CALENDARS, NY, nominal_us, previous_us, next_us)


def test_a_weekly_slot_moves_to_the_friday_before() -> None:
    rule = CalendarRule(skip=("us",), on_skip="previous_business_day")
    nominal = ny_us(2027, 7, 5, 9)
    plan = _plan(rule, nominal, ny_us(2027, 6, 28, 9), ny_us(2027, 7, 12, 9))
    assert plan.status == QUEUED and plan.moved and plan.due_us == ny_us(2027, 7, 2, 9)
    assert plan.due_us < nominal
    assert "runs at 2027-07-02T13:00:00Z" in plan.reason


def test_a_move_onto_or_before_the_previous_slot_is_skipped() -> None:
    # A daily job: Monday's slot would move onto Friday's own 09:00 slot, which is the cursor.
    rule = CalendarRule(skip=("us",), on_skip="previous_business_day")
    plan = _plan(rule, ny_us(2027, 7, 5, 9), ny_us(2027, 7, 4, 9), ny_us(2027, 7, 6, 9))
    assert plan.status == SKIPPED and not plan.moved
    assert "not after the previous slot" in plan.reason and plan.reason.startswith("calendar us:")


def test_a_move_onto_or_past_the_next_slot_is_skipped() -> None:
    rule = CalendarRule(skip=("us",), on_skip="next_business_day")
    plan = _plan(rule, ny_us(2027, 7, 5, 9), ny_us(2027, 7, 4, 9), ny_us(2027, 7, 6, 9))
    assert plan.status == SKIPPED and "not before the next slot" in plan.reason


def test_an_owed_slot_keeps_its_nominal_instant() -> None:
    nominal = ny_us(2027, 7, 6, 9)
    plan = _plan(CalendarRule(skip=("us",), on_skip="previous_business_day"), nominal, 0, 0)
    assert (plan.status, plan.due_us, plan.moved, plan.reason) == (QUEUED, nominal, False, "")


def test_the_schedule_zone_decides_the_local_date() -> None:
    # 2027-07-05T02:00Z is still Sunday July 4 in New York: owed there, skipped in UTC.
    schedule = compile_schedule("0 2 * * *", "UTC")
    instant = to_us(datetime(2027, 7, 5, 2, tzinfo=ZoneInfo("UTC")))
    rule = CalendarRule(skip=("us",))
    assert plan_calendar_slot(rule, CALENDARS, schedule.zone, instant, 0, 0).status == SKIPPED
    assert plan_calendar_slot(rule, CALENDARS, NY, instant, 0, 0).status == QUEUED


def test_the_forecast_leaves_out_skipped_slots_and_counts_moved_ones_where_they_run() -> None:
    def weekly(job_id: str, **fields) -> JobSpec:
        return JobSpec(job_id, "0 9 * * 1", "handler", "h", timezone="America/New_York", jitter="pinned", **fields)

    start = ny_us(2027, 7, 1, 0)
    plain = weekly("plain")
    skipping = weekly("skipping", calendar=CalendarRule(skip=("us",)))
    moving = weekly("moving", calendar=CalendarRule(skip=("us",), on_skip="previous_business_day"))
    result = forecast([plain, skipping, moving], start, 24 * 7, 0, CALENDARS)
    holiday, friday_before = ((ny_us(2027, 7, d, 9) - start) // 60_000_000 for d in (5, 2))
    assert result.total[holiday] == 1  # only the plain job on the holiday
    assert result.total[friday_before] == 1  # the moved one on the Friday before
    assert sum(result.total.values()) == 2 and not result.truncated_jobs
