"""Holiday calendars expanded into explicit dates, on the node that proposes the apply.

The replicated record holds dates, never a rule: replicas with different versions of the
`holidays` package (or none) compute the same instants. The record keeps the country,
subdivision, years and library version that produced it, for explain and `raftcron calendars`.
`years: N` means the proposer's current year (in UTC, from replicated time) and the N-1 after
it; applying the file again in a later year moves the window on.
"""

from __future__ import annotations

import msgspec

from scheduler.core.calendars import MAX_CALENDAR_DATES
from scheduler.core.model import Calendar, HolidaySource
from scheduler.specs.calendars import pending_expansion
from scheduler.specs.problems import SpecProblem


class ExpansionError(ValueError):
    """A holiday calendar that cannot be expanded; the message names the field."""

    def __init__(self, problem: SpecProblem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def _fail(calendar: Calendar, key: str, message: str) -> ExpansionError:
    return ExpansionError(SpecProblem("", f"calendars.{calendar.name}.holidays{key}", message))


def expand_holidays(calendar: Calendar, this_year: int) -> Calendar:
    """`calendar` with the dates of its holiday source; a calendar of explicit dates as it is."""
    if not pending_expansion(calendar):
        return calendar
    source = calendar.source
    assert source is not None
    try:
        import holidays
    except ImportError:  # a node installed without the server extra
        raise _fail(calendar, "", "this node lacks the `holidays` package (pip install 'raftcron[server]')") from None
    supported = holidays.list_supported_countries()
    country = source.country.upper()
    if country not in supported:
        raise _fail(calendar, ".country", f"unknown country {source.country!r} (an ISO 3166 code such as US or DE)")
    subdivision = source.subdivision.upper()
    if subdivision and subdivision not in supported[country]:
        known = ", ".join(supported[country][:12]) + (", ..." if len(supported[country]) > 12 else "")
        raise _fail(calendar, ".subdivision", f"{source.subdivision!r} is not a subdivision of {country} ({known})")
    years = range(this_year, this_year + source.years)
    found = holidays.country_holidays(country, subdiv=subdivision or None, years=years)
    dates = tuple(sorted({day.isoformat() for day in found}))
    if len(dates) > MAX_CALENDAR_DATES:
        raise _fail(calendar, ".years", f"expands to {len(dates)} dates, more than {MAX_CALENDAR_DATES}")
    expanded_from = HolidaySource(
        country=country,
        subdivision=subdivision,
        first_year=this_year,
        years=source.years,
        library_version=holidays.__version__,
    )
    return msgspec.structs.replace(calendar, dates=dates, source=expanded_from)
