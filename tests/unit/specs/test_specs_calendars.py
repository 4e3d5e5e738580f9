"""Calendars in job files: what the reader accepts and refuses (every problem, field named), the
apply plan (declared, changed, pruned, admins only), and holiday expansion into explicit dates."""

from __future__ import annotations

import msgspec
import pytest
import yaml

from scheduler.core.model import Calendar, CalendarRule, HolidaySource
from scheduler.security.principals import ADMIN, SUBMITTER, Principal
from scheduler.specs import SpecError, spec_to_document
from scheduler.specs.apply_plan import apply_problems, apply_refusal, plan_apply
from scheduler.specs.holiday_expansion import ExpansionError, expand_holidays
from scheduler.specs.reader import parse_job_document
from tests.fakes import Core, spec

HEADER = """
calendars:
  closures: {dates: [2027-12-31, "2027-12-24", 2027-12-24]}
  us-ny: {holidays: {country: US, subdivision: NY, years: 5}}
"""
JOB = """
jobs:
  - id: payroll
    schedule: "0 9 * * 1"
    target: payroll.run
    calendar: {skip: [us-ny, closures], on_skip: previous_business_day}
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_job_document(text)
    return [str(problem) for problem in caught.value.problems]


def test_a_file_declares_calendars_and_a_job_names_them() -> None:
    document = parse_job_document(HEADER + JOB)
    closures, holidays = document.calendars
    assert closures == Calendar("closures", ("2027-12-24", "2027-12-31"))  # sorted, repeats dropped
    assert holidays == Calendar("us-ny", (), HolidaySource("US", "NY", years=5))
    rule = document.jobs[0].calendar
    assert rule == CalendarRule(skip=("us-ny", "closures"), on_skip="previous_business_day")


def test_a_job_calendar_renders_back_to_the_same_spec() -> None:
    parsed = parse_job_document(HEADER + JOB).jobs
    again = parse_job_document(yaml.safe_dump({"jobs": [spec_to_document(s) for s in parsed]})).jobs
    assert again == parsed
    assert not parse_job_document("jobs: [{id: j, schedule: '* * * * *', target: t}]").jobs[0].calendar


def test_every_problem_is_reported_with_its_field() -> None:
    found = problems_of(
        """
calendars:
  closures: {dates: ["2027-13-01", 5]}
  both: {dates: [], holidays: {country: US}}
  h: {holidays: {subdivision: NY, years: 50, colour: red}}
  "bad name": {dates: []}
jobs:
  - id: a
    schedule: "0 9 * * 1"
    target: t
    calendar: {skip: [x], on_skip: previous_day, extra: 1}
  - id: b
    schedule: "0 9 * * 1"
    target: t
    calendar: {only: [x], on_skip: next_business_day}
  - id: c
    schedule: "0 9 * * 1"
    target: t
    calendar: {}
"""
    )
    expected = [
        "field 'calendars.closures.dates[0]': '2027-13-01' is not a date YYYY-MM-DD between 1970 and 9999",
        "field 'calendars.closures.dates[1]': 5 is not a date YYYY-MM-DD between 1970 and 9999",
        "field 'calendars.both': must have exactly one of dates or holidays",
        "field 'calendars.h.holidays': unknown key 'colour'; known keys: country, subdivision, years",
        "field 'calendars.h.holidays.country': is required: an ISO 3166 country code such as US or DE",
        "field 'calendars.h.holidays.years': must be a whole number from 1 to 10, got 50",
        "job 'a' field 'calendar.extra': unknown key 'extra'; known keys: skip, only, on_skip",
        "job 'a' field 'calendar.on_skip': must be one of skip, previous_business_day, next_business_day, "
        "not 'previous_day'",
        "job 'b' field 'calendar.on_skip': next_business_day moves slots on skip dates: name calendars in skip",
        "job 'c' field 'calendar': must name at least one calendar in skip or only",
    ]
    for message in expected:
        assert message in found, (message, found)
    assert any(p.startswith("field 'calendars.bad name': name 'bad name' contains ' '") for p in found)


def test_a_top_level_typo_is_suggested() -> None:
    assert "did you mean 'calendars'" in " ".join(problems_of("calender: {}\njobs: []"))


# -- holiday expansion -------------------------------------------------------------------------


def test_holidays_expand_into_explicit_dates_with_their_source() -> None:
    expanded = expand_holidays(Calendar("us", (), HolidaySource("us", "ny", years=2)), this_year=2027)
    assert "2027-07-05" in expanded.dates  # Independence Day observed (July 4 2027 is a Sunday)
    assert "2027-07-04" in expanded.dates and "2028-12-25" in expanded.dates
    assert not [d for d in expanded.dates if not d.startswith(("2027-", "2028-"))]
    assert list(expanded.dates) == sorted(set(expanded.dates))
    source = expanded.source
    assert (source.country, source.subdivision, source.first_year, source.years) == ("US", "NY", 2027, 2)
    assert source.library_version
    assert expand_holidays(expanded, this_year=2030) is expanded  # already dates: never re-expanded


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (HolidaySource("XX"), "field 'calendars.h.holidays.country': unknown country 'XX'"),
        (HolidaySource("US", "ZZ"), "field 'calendars.h.holidays.subdivision': 'ZZ' is not a subdivision of US"),
    ],
)
def test_unknown_countries_and_subdivisions_are_refused(source: HolidaySource, message: str) -> None:
    with pytest.raises(ExpansionError) as caught:
        expand_holidays(Calendar("h", (), msgspec.structs.replace(source, years=1)), this_year=2027)
    assert str(caught.value).startswith(message)


# -- the apply plan ------------------------------------------------------------------------------

ROOT = Principal("root", ADMIN)
FINANCE_CI = Principal("fin-ci", SUBMITTER, owners=("finance",), targets=("handler:jobs.*",))
CLOSURES = Calendar("closures", ("2027-12-24",))


def plan(core: Core, specs=(), calendars=(), prune: bool = False, caller: Principal | None = None):
    return plan_apply(
        core.state, list(specs), [], prune=prune, caller=caller, author="a", request_id="", calendars=list(calendars)
    )


def test_a_plan_declares_changed_calendars_and_leaves_the_fields_unset_otherwise() -> None:
    core = Core()
    core.lead()
    command = plan(core, [spec("j", calendar=CalendarRule(skip=("closures",)))], [CLOSURES])
    assert command.calendars == (CLOSURES,) and command.calendar_removals is msgspec.UNSET
    assert core.apply(command).accepted
    again = plan(core, [spec("j", calendar=CalendarRule(skip=("closures",)))], [CLOSURES])
    assert again.calendars is msgspec.UNSET  # unchanged: nothing to send
    pruned = plan(core, [spec("j")], [], prune=True)
    assert pruned.calendar_removals == ("closures",)
    assert core.apply(pruned).accepted and core.state.calendars == {}


def test_only_an_admin_changes_calendars() -> None:
    core = Core()
    core.lead()
    command = plan(core, [], [CLOSURES], caller=FINANCE_CI)
    assert "fin-ci may not change shared calendars ['closures']: needs admin" == apply_refusal(
        core.state, command, FINANCE_CI
    )
    assert apply_refusal(core.state, command, ROOT) is None
    # A submitter's prune never drops calendars.
    assert core.apply(plan(core, [], [CLOSURES])).accepted
    assert plan(core, [], [], prune=True, caller=FINANCE_CI).calendar_removals is msgspec.UNSET


def test_calendars_sent_over_grpc_are_checked() -> None:
    found = apply_problems([], [], [Calendar("x", ("2027-7-5",)), Calendar("x", ()), Calendar("bad name", ())])
    assert "field 'calendars.x.dates': '2027-7-5' is not a date YYYY-MM-DD between 1970 and 9999" in found
    assert "calendar 'x': listed twice" in found
    assert any(p.startswith("field 'calendars': name 'bad name'") for p in found)
