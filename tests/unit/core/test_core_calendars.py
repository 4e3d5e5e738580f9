"""Calendars in the core: declared and dropped with ApplyJobs, checked against the jobs naming
them, gated at log format 3; claims a calendar decided keep their notes and raise no alert."""

from __future__ import annotations

import msgspec
import pytest

from scheduler.core import decode_command, decode_snapshot, encode_command, encode_snapshot
from scheduler.core.calendars import MAX_CALENDAR_DATES, MAX_CALENDARS
from scheduler.core.codec import NewerLogFormat
from scheduler.core.commands import ApplyJobs, ClaimRuns, RunRef
from scheduler.core.log_format import required_log_format
from scheduler.core.model import Calendar, CalendarRule
from tests.fakes import Core, FakeClock, claim, spec, upsert

HOLIDAYS = Calendar("us", ("2027-07-05", "2027-09-06"))
RULE = CalendarRule(skip=("us",), on_skip="previous_business_day")


def leading_core() -> Core:
    core = Core(FakeClock())
    core.lead()
    return core


def apply(core: Core, upserts=(), removals=(), calendars=msgspec.UNSET, calendar_removals=msgspec.UNSET):
    return core.apply(
        ApplyJobs(
            core.state.now_us,
            "alice",
            "",
            tuple(upserts),
            tuple(removals),
            calendars=calendars,
            calendar_removals=calendar_removals,
        )
    )


def test_a_calendar_and_a_job_naming_it_apply_together() -> None:
    core = leading_core()
    result = apply(core, [upsert(spec("payroll", calendar=RULE))], calendars=(HOLIDAYS,))
    assert result.accepted, result
    assert core.state.calendars == {"us": HOLIDAYS}
    assert core.state.jobs["payroll"].body.calendar == RULE


def test_a_job_cannot_name_an_undeclared_calendar() -> None:
    result = apply(leading_core(), [upsert(spec("payroll", calendar=RULE))])
    assert result.rejection.code == "invalid"
    assert "job 'payroll' names undeclared calendars ['us']" in result.rejection.message


def test_a_calendar_still_named_by_a_job_cannot_be_dropped() -> None:
    core = leading_core()
    assert apply(core, [upsert(spec("payroll", calendar=RULE))], calendars=(HOLIDAYS,)).accepted
    result = apply(core, calendar_removals=("us",))
    assert result.rejection.code == "invalid"
    assert "job 'payroll' names calendars ['us'] that this apply drops" in result.rejection.message
    assert "us" in core.state.calendars
    # Dropped together with the job that names it: fine.
    assert apply(core, removals=("payroll",), calendar_removals=("us",)).accepted
    assert core.state.calendars == {}


@pytest.mark.parametrize(
    ("calendar", "message"),
    [
        (Calendar("", ()), "name is empty"),
        (Calendar("x", ("2027-07-05", "2027-07-05")), "sorted and unique"),
        (Calendar("x", ("2027-07-06", "2027-07-05")), "sorted and unique"),
        (Calendar("x", ("07/05/2027",)), "YYYY-MM-DD"),
        (Calendar("x", tuple(f"{2000 + i // 366:04d}-01-01" for i in range(MAX_CALENDAR_DATES + 1))), "more than"),
    ],
)
def test_malformed_calendars_are_refused(calendar: Calendar, message: str) -> None:
    result = apply(leading_core(), calendars=(calendar,))
    assert result.rejection.code == "invalid" and message in result.rejection.message


def test_the_cluster_holds_a_bounded_number_of_calendars() -> None:
    core = leading_core()
    many = tuple(Calendar(f"c{i:03d}", ()) for i in range(MAX_CALENDARS))
    assert apply(core, calendars=many).accepted
    result = apply(core, calendars=(Calendar("one-more", ()),))
    assert result.rejection.code == "invalid" and f"at most {MAX_CALENDARS}" in result.rejection.message


def test_calendars_need_log_format_3_and_plain_commands_do_not() -> None:
    plain = ApplyJobs(1, "a", "", (upsert(spec("j")),))
    assert required_log_format(plain) == 1
    assert required_log_format(msgspec.structs.replace(plain, calendars=(HOLIDAYS,))) == 3
    assert required_log_format(msgspec.structs.replace(plain, calendar_removals=("us",))) == 3
    assert required_log_format(ApplyJobs(1, "a", "", (upsert(spec("j", calendar=RULE)),))) == 3
    claims = ClaimRuns(1, 1, (claim("j", 5, 10),))
    assert required_log_format(claims) == 1
    assert required_log_format(msgspec.structs.replace(claims, calendar_keys=(RunRef("j", 5),))) == 3


def test_a_command_without_calendars_encodes_without_the_new_fields() -> None:
    """An older node decodes it: UNSET fields are left out of the bytes."""
    data = encode_command(ApplyJobs(1, "a", "", (upsert(spec("j")),)))
    assert b"calendar" not in data
    with pytest.raises(NewerLogFormat, match="needs log format 3"):
        decode_command(encode_command(ApplyJobs(1, "a", "", calendars=(HOLIDAYS,))), max_log_format=2)


def test_calendars_survive_a_snapshot() -> None:
    core = leading_core()
    assert apply(core, [upsert(spec("payroll", calendar=RULE))], calendars=(HOLIDAYS,)).accepted
    core.state.cluster_version = 3
    restored = decode_snapshot(encode_snapshot(core.state))
    assert restored.calendars == {"us": HOLIDAYS}
    assert restored.jobs["payroll"].body.calendar == RULE
    assert encode_snapshot(restored) == encode_snapshot(core.state)


# -- claims a calendar decided -------------------------------------------------------------------


def core_with_job(rule: CalendarRule = RULE) -> Core:
    core = leading_core()
    first_us = core.state.now_us + 100_000_000
    assert apply(core, [upsert(spec("payroll", calendar=rule), next_due_us=first_us)], calendars=(HOLIDAYS,)).accepted
    return core


def test_a_slot_moved_earlier_is_claimed_before_its_nominal_instant_with_its_note() -> None:
    core = core_with_job()
    job = core.state.jobs["payroll"]
    nominal_us, moved_us = job.next_due_us, core.state.now_us + 10_000_000
    moved = claim("payroll", nominal_us, nominal_us + 600_000_000, 1, "queued", "calendar us: moved", moved_us)
    core.clock.set(moved_us)
    early = ClaimRuns(moved_us, core.state.epoch, (moved,), moved_us)
    # Without the calendar's key the core judges the nominal instant: not due yet.
    assert core.apply(early).events[0].reason == "not_due_yet"
    result = core.apply(msgspec.structs.replace(early, calendar_keys=(RunRef("payroll", nominal_us),)))
    assert type(result.events[0]).__name__ == "RunClaimed", result
    run = core.state.get_run("payroll", nominal_us)
    assert run.status == "queued" and run.reason == "calendar us: moved" and run.effective_us == moved_us
    assert core.state.jobs["payroll"].cursor_us == nominal_us  # the nominal run key is accounted
    assert not core.state.alerts


def test_a_calendar_skip_raises_no_alert_but_other_skips_still_do() -> None:
    core = core_with_job()
    nominal_us = core.state.jobs["payroll"].next_due_us
    skipped = claim("payroll", nominal_us, nominal_us + 600_000_000, 1, "skipped", "calendar us: 2027-07-05 is listed")
    core.clock.set(nominal_us)
    command = ClaimRuns(
        nominal_us, core.state.epoch, (skipped,), nominal_us, calendar_keys=(RunRef("payroll", nominal_us),)
    )
    assert core.apply(command).accepted
    assert core.state.get_run("payroll", nominal_us).reason.startswith("calendar us:")
    assert not core.state.alerts
    later_us = nominal_us + 600_000_000
    core.clock.set(later_us)
    other = claim("payroll", later_us, later_us + 600_000_000, 1, "skipped", "found late; policy skip")
    assert core.apply(ClaimRuns(later_us, core.state.epoch, (other,), later_us)).accepted
    assert [a.kind for a in core.state.alerts.values()] == ["skipped"]


def test_a_pause_still_wins_over_a_moved_slot() -> None:
    core = core_with_job()
    assert core.pause("payroll").accepted
    nominal_us = core.state.jobs["payroll"].next_due_us
    moved_us = core.state.now_us + 1
    moved = claim("payroll", nominal_us, 0, 1, "queued", "calendar us: moved", moved_us)
    core.clock.set(moved_us)
    keys = (RunRef("payroll", nominal_us),)
    assert core.apply(ClaimRuns(moved_us, core.state.epoch, (moved,), moved_us, calendar_keys=keys)).accepted
    assert core.state.get_run("payroll", nominal_us).reason == "paused"
