"""The leader's planning of jobs with a calendar, called directly at exact instants: skipped slots,
slots moved earlier (claimed before their nominal instant) and later, and what the core makes of
the claims."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from scheduler.core.commands import ApplyJobs, ClaimRuns, JobUpsert, RunRef
from scheduler.core.model import QUEUED, SKIPPED, Calendar, CalendarRule, Job
from scheduler.leader.planner import claim_instant_us, plan_calendar_due_slots
from scheduler.planning import to_us
from scheduler.planning.jobs import first_due_after
from tests.fakes import Core, FakeClock, spec

NY = ZoneInfo("America/New_York")
CALENDARS = {"us": Calendar("us", ("2027-07-05", "2027-09-06"))}
WEEKLY_MONDAY_9 = "0 9 * * 1"


def ny_us(*parts: int) -> int:
    return to_us(datetime(*parts, tzinfo=NY))


def weekly_job(on_skip: str = "skip", cursor_us: int = 0, schedule: str = WEEKLY_MONDAY_9) -> Job:
    job_spec = spec(
        "payroll",
        schedule,
        timezone="America/New_York",
        jitter="pinned",
        calendar=CalendarRule(skip=("us",), on_skip=on_skip),
    )
    cursor_us = cursor_us or ny_us(2027, 6, 28, 9)
    return Job.of(job_spec, 1, "t", cursor_us, cursor_us, first_due_after(job_spec, cursor_us))


def test_a_listed_date_is_claimed_skipped_at_its_nominal_instant() -> None:
    job = weekly_job()
    nominal = ny_us(2027, 7, 5, 9)
    assert claim_instant_us(job, CALENDARS) == nominal
    assert plan_calendar_due_slots(job, CALENDARS, nominal - 1, 10) == ([], [])
    claims, decided = plan_calendar_due_slots(job, CALENDARS, nominal, 10)
    assert [(c.scheduled_us, c.status) for c in claims] == [(nominal, SKIPPED)]
    assert claims[0].reason == "calendar us: 2027-07-05 is listed" and decided == claims
    assert claims[0].next_due_us == ny_us(2027, 7, 12, 9)


def test_a_slot_moved_to_the_previous_business_day_is_claimed_there() -> None:
    job = weekly_job("previous_business_day")
    moved = ny_us(2027, 7, 2, 9)
    assert claim_instant_us(job, CALENDARS) == moved
    assert plan_calendar_due_slots(job, CALENDARS, moved - 1, 10) == ([], [])
    claims, decided = plan_calendar_due_slots(job, CALENDARS, moved, 10)
    assert len(claims) == 1 and decided == claims
    moved_claim = claims[0]
    # The run key stays nominal; the run is due where it moved.
    assert moved_claim.scheduled_us == ny_us(2027, 7, 5, 9)
    assert (moved_claim.status, moved_claim.effective_us) == (QUEUED, moved)
    assert "moved to 2027-07-02 (previous_business_day)" in moved_claim.reason


def test_a_slot_moved_to_the_next_business_day_waits_for_it() -> None:
    job = weekly_job("next_business_day")
    moved = ny_us(2027, 7, 6, 9)
    assert claim_instant_us(job, CALENDARS) == moved
    assert plan_calendar_due_slots(job, CALENDARS, ny_us(2027, 7, 5, 9), 10) == ([], [])
    claims, _ = plan_calendar_due_slots(job, CALENDARS, moved, 10)
    assert [(c.scheduled_us, c.effective_us, c.status) for c in claims] == [(ny_us(2027, 7, 5, 9), moved, QUEUED)]


def test_a_moved_slot_found_late_follows_the_misfire_policy_from_where_it_moved() -> None:
    job = weekly_job("next_business_day")
    claims, _ = plan_calendar_due_slots(job, CALENDARS, ny_us(2027, 7, 6, 10), 10)
    assert claims[0].status == "missed" and "beyond the 600s grace" in claims[0].reason


def test_a_daily_job_cannot_move_onto_its_own_neighbouring_slot() -> None:
    job = weekly_job("previous_business_day", cursor_us=ny_us(2027, 7, 4, 9), schedule="0 9 * * *")
    claims, decided = plan_calendar_due_slots(job, CALENDARS, ny_us(2027, 7, 5, 9), 10)
    assert [c.status for c in claims] == [SKIPPED] and decided == claims
    assert "not after the previous slot" in claims[0].reason


def test_jobs_without_a_calendar_keep_their_nominal_due_instant() -> None:
    job = Job.of(spec("plain", WEEKLY_MONDAY_9), 1, "t", 0, 0, ny_us(2027, 7, 5, 9))
    assert claim_instant_us(job, CALENDARS) == ny_us(2027, 7, 5, 9)


def test_the_core_accepts_the_planned_claims_and_chains_on() -> None:
    clock = FakeClock(start_us=ny_us(2027, 6, 28, 9))
    core = Core(clock)
    core.lead()
    job_spec = weekly_job("previous_business_day").spec
    first_us = first_due_after(job_spec, core.state.now_us)
    upsert = JobUpsert(job_spec, 0, first_us)
    assert core.apply(ApplyJobs(core.state.now_us, "t", "", (upsert,), calendars=(CALENDARS["us"],))).accepted
    moved = ny_us(2027, 7, 2, 9)
    clock.set(moved)
    claims, decided = plan_calendar_due_slots(core.state.jobs["payroll"], core.state.calendars, moved, 10)
    keys = tuple(RunRef(c.job_id, c.scheduled_us) for c in decided)
    result = core.apply(ClaimRuns(moved, core.state.epoch, tuple(claims), moved, calendar_keys=keys))
    assert type(result.events[0]).__name__ == "RunClaimed", result
    job = core.state.jobs["payroll"]
    assert (job.cursor_us, job.next_due_us) == (ny_us(2027, 7, 5, 9), ny_us(2027, 7, 12, 9))
    assert core.state.get_run("payroll", ny_us(2027, 7, 5, 9)).effective_us == moved
