"""Calendars in job files: `calendars:` at the top of a file, `calendar:` on a job.

```yaml
calendars:
  closures: {dates: [2027-12-24, 2027-12-31]}
  us-ny: {holidays: {country: US, subdivision: NY, years: 5}}
jobs:
  - id: payroll
    calendar: {skip: [us-ny, closures], on_skip: previous_business_day}
```

A `dates:` calendar is read into explicit dates here. A `holidays:` calendar is read into a
request (`Calendar` with a `source` and no dates) that the node proposing the apply expands
(holiday_expansion.py), so every replica receives the same explicit dates.
"""

from __future__ import annotations

from datetime import date

from scheduler.core.calendars import MAX_CALENDAR_DATES, MAX_CALENDARS, MAX_JOB_CALENDARS
from scheduler.core.model import Calendar, CalendarRule, HolidaySource
from scheduler.core.vocabulary import OnSkip
from scheduler.planning.durations import type_name
from scheduler.specs.problems import SpecProblem

MAX_HOLIDAY_YEARS = 10
ON_SKIP_RULES = tuple(OnSkip)
_CALENDAR_KEYS = ("dates", "holidays")
_HOLIDAY_KEYS = ("country", "subdivision", "years")
_RULE_KEYS = ("skip", "only", "on_skip")


def pending_expansion(calendar: Calendar) -> bool:
    """A holiday calendar as a file declares it: its dates are still to be expanded."""
    return calendar.source is not None and not calendar.source.library_version


def parse_date(value: object) -> str | None:
    """`YYYY-MM-DD` (YAML reads an unquoted one as a date) as ISO text, or None."""
    if isinstance(value, date) and not hasattr(value, "hour"):
        day = value
    elif isinstance(value, str) and len(value) == 10:
        try:
            day = date.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return day.isoformat() if 1970 <= day.year <= 9999 else None


def _unknown(key: object, known: tuple[str, ...]) -> str:
    return f"unknown key {key!r}; known keys: {', '.join(known)}"


def read_calendars(value: object, name_problem) -> tuple[list[Calendar], list[SpecProblem]]:
    """`calendars: {NAME: {dates: [...]} | {holidays: {country, subdivision, years}}}`."""
    if value is None:
        return [], []
    if not isinstance(value, dict):
        return [], [SpecProblem("", "calendars", f"must be a mapping of names to calendars, not {type_name(value)}")]
    if len(value) > MAX_CALENDARS:
        return [], [SpecProblem("", "calendars", f"declares {len(value)} calendars; at most {MAX_CALENDARS}")]
    calendars, problems = [], []
    for name, body in value.items():
        field = f"calendars.{name}"
        naming = name_problem(name) if isinstance(name, str) else "must be a string"
        if naming:
            problems.append(SpecProblem("", field, f"name {naming}"))
            continue
        calendar, found = _read_calendar(name, body, field)
        problems += [SpecProblem("", where, message) for where, message in found]
        if calendar is not None and not found:
            calendars.append(calendar)
    return calendars, problems


def _read_calendar(name: str, body: object, field: str) -> tuple[Calendar | None, list[tuple[str, str]]]:
    if not isinstance(body, dict):
        return None, [(field, f"must be {{dates: [...]}} or {{holidays: {{country: ...}}}}, not {type_name(body)}")]
    unknown = [(f"{field}", _unknown(key, _CALENDAR_KEYS)) for key in body if key not in _CALENDAR_KEYS]
    if unknown:
        return None, unknown
    if len(body) != 1:
        return None, [(field, "must have exactly one of dates or holidays")]
    if "dates" in body:
        return _read_dates(name, body["dates"], f"{field}.dates")
    return _read_holidays(name, body["holidays"], f"{field}.holidays")


def _read_dates(name: str, value: object, field: str) -> tuple[Calendar | None, list[tuple[str, str]]]:
    if not isinstance(value, list):
        return None, [(field, f"must be a list of YYYY-MM-DD dates, not {type_name(value)}")]
    if len(value) > MAX_CALENDAR_DATES:
        return None, [(field, f"lists {len(value)} dates; at most {MAX_CALENDAR_DATES}")]
    dates, problems = set(), []
    for position, item in enumerate(value):
        day = parse_date(item)
        if day is None:
            problems.append((f"{field}[{position}]", f"{item!r} is not a date YYYY-MM-DD between 1970 and 9999"))
        else:
            dates.add(day)
    return Calendar(name, tuple(sorted(dates))), problems


def _read_holidays(name: str, value: object, field: str) -> tuple[Calendar | None, list[tuple[str, str]]]:
    if not isinstance(value, dict):
        return None, [(field, f"must be {{country: CC, subdivision: SUB, years: N}}, not {type_name(value)}")]
    problems = [(field, _unknown(key, _HOLIDAY_KEYS)) for key in value if key not in _HOLIDAY_KEYS]
    country, subdivision, years = value.get("country"), value.get("subdivision", ""), value.get("years", 1)
    if not isinstance(country, str) or not country:
        problems.append((f"{field}.country", "is required: an ISO 3166 country code such as US or DE"))
    if not isinstance(subdivision, str):
        problems.append(
            (f"{field}.subdivision", f"must be a subdivision code such as NY, not {type_name(subdivision)}")
        )
    if type(years) is not int or not 1 <= years <= MAX_HOLIDAY_YEARS:
        problems.append((f"{field}.years", f"must be a whole number from 1 to {MAX_HOLIDAY_YEARS}, got {years!r}"))
    if problems:
        return None, problems
    assert isinstance(country, str) and isinstance(subdivision, str) and isinstance(years, int)
    return Calendar(name, (), HolidaySource(country=country, subdivision=subdivision, years=years)), []


def read_calendar_rule(value: object) -> tuple[CalendarRule | None, list[tuple[str, str]]]:
    """A job's `calendar: {skip: [...], only: [...], on_skip: ...}`; names are checked later."""
    if not isinstance(value, dict):
        return None, [("calendar", f"must be a mapping such as {{skip: [us-holidays]}}, not {type_name(value)}")]
    problems = [(f"calendar.{key}", _unknown(key, _RULE_KEYS)) for key in value if key not in _RULE_KEYS]
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("skip", "only"):
        names = value.get(key, [])
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            problems.append((f"calendar.{key}", f"must be a list of calendar names, not {type_name(names)}"))
            names = []
        lists[key] = tuple(dict.fromkeys(names))
    on_skip = value.get("on_skip", OnSkip.SKIP)
    # The rule is built from what could be read, so its values are checked too.
    return CalendarRule(skip=lists["skip"], only=lists["only"], on_skip=on_skip), problems  # type: ignore[arg-type]


def calendar_rule_problems(rule: object, name_problem) -> list[tuple[str, str]]:
    """What is wrong with a job's calendar rule (the reader and the servicer both run this)."""
    if not isinstance(rule, CalendarRule):
        return [("calendar", f"must be a calendar rule, not {type_name(rule)}")]
    found = []
    for key, names in (("skip", rule.skip), ("only", rule.only)):
        for name in names:
            if problem := name_problem(name):
                found.append((f"calendar.{key}", f"calendar name {problem}"))
    if not rule.skip and not rule.only:
        found.append(("calendar", "must name at least one calendar in skip or only"))
    if len(rule.skip) + len(rule.only) > MAX_JOB_CALENDARS:
        found.append(("calendar", f"must name at most {MAX_JOB_CALENDARS} calendars"))
    if rule.on_skip not in ON_SKIP_RULES:
        found.append(("calendar.on_skip", f"must be one of {', '.join(ON_SKIP_RULES)}, not {rule.on_skip!r}"))
    elif rule.on_skip != OnSkip.SKIP and not rule.skip:
        found.append(("calendar.on_skip", f"{rule.on_skip} moves slots on skip dates: name calendars in skip"))
    return found


def calendar_problems(calendar: Calendar, name_problem) -> list[SpecProblem]:
    """What is wrong with a calendar as a client sent it (the servicer's check; files are read
    into well-formed ones). Dates must be YYYY-MM-DD; a holiday request has no dates."""
    field = f"calendars.{calendar.name}"
    found = []
    if problem := name_problem(calendar.name):
        found.append(SpecProblem("", "calendars", f"name {problem}"))
    if len(calendar.dates) > MAX_CALENDAR_DATES:
        found.append(
            SpecProblem("", f"{field}.dates", f"lists {len(calendar.dates)} dates; at most {MAX_CALENDAR_DATES}")
        )
    elif bad := next((d for d in calendar.dates if parse_date(d) != d), None):
        found.append(SpecProblem("", f"{field}.dates", f"{bad[:32]!r} is not a date YYYY-MM-DD between 1970 and 9999"))
    source = calendar.source
    if source is not None:
        if calendar.dates:
            found.append(SpecProblem("", field, "must have exactly one of dates or holidays"))
        if not source.country:
            found.append(SpecProblem("", f"{field}.holidays.country", "is required: an ISO 3166 country code"))
        if not 1 <= source.years <= MAX_HOLIDAY_YEARS:
            found.append(SpecProblem("", f"{field}.holidays.years", f"must be from 1 to {MAX_HOLIDAY_YEARS}"))
    return found
