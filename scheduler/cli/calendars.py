"""Calendars on the command line: `raftcron calendars`, and what a job's calendar does to the
fires `next`, `plan` and `explain` show (the planner's own function, so they agree with the leader)."""

from __future__ import annotations

import json
import sys

from scheduler.cli import connection
from scheduler.core.model import SKIPPED, Calendar, CalendarRule
from scheduler.planning import compile_schedule, from_us, parse_iso_to_us
from scheduler.planning.calendars import plan_calendar_slot
from scheduler.security.safetext import shown_text


def calendar_dict(calendar: Calendar) -> dict:
    source = calendar.source
    entry: dict = {
        "name": calendar.name,
        "dates": len(calendar.dates),
        "first": calendar.dates[0] if calendar.dates else None,
        "last": calendar.dates[-1] if calendar.dates else None,
    }
    if source is not None:
        region = f"{source.country}-{source.subdivision}" if source.subdivision else source.country
        last_year = source.first_year + source.years - 1
        entry["holidays"] = {
            "country": source.country,
            "subdivision": source.subdivision,
            "years": source.years,
            "first_year": source.first_year,
            "library_version": source.library_version,
        }
        entry["source"] = f"holidays {region} {source.first_year}-{last_year} (holidays {source.library_version})"
    else:
        entry["source"] = "dates"
    return entry


def fetch_calendars(client) -> dict[str, Calendar]:
    from scheduler.rpc.convert import calendar_from_pb

    response = client.list_calendars()
    return {c.name: calendar_from_pb(c, record=True) for c in response.calendars}


def plan_calendars(client, document) -> dict[str, Calendar]:
    """The calendars a plan's jobs would see: the cluster's, with the file's over them (holiday
    sets expanded here as the receiving node would, for this year)."""
    from datetime import UTC, datetime

    from scheduler.specs.holiday_expansion import ExpansionError, expand_holidays

    calendars = fetch_calendars(client)
    this_year = datetime.now(UTC).year
    for calendar in document.calendars:
        try:
            calendars[calendar.name] = expand_holidays(calendar, this_year)
        except ExpansionError:
            calendars.pop(calendar.name, None)  # the apply itself reports the problem
    return calendars


def cmd_calendars(args) -> int:
    from scheduler.rpc.convert import calendar_from_pb

    with connection.cluster_client(args) as client:
        response = client.list_calendars(linearizable=args.linearizable)
    calendars = [calendar_from_pb(c, record=True) for c in response.calendars]
    if args.name:
        calendars = [c for c in calendars if c.name == args.name]
        if not calendars:
            print(shown_text(f"raftcron calendars: no calendar {args.name!r}"), file=sys.stderr)
            return 2
    if args.json:
        entries = [{**calendar_dict(c), **({"date_list": list(c.dates)} if args.name else {})} for c in calendars]
        print(json.dumps(entries, indent=2))
        return 0
    if not calendars:
        print("no calendars declared (add `calendars:` to a jobs file)")
        return 0
    rows = [calendar_dict(c) for c in calendars]
    header = ["NAME", "DATES", "FIRST", "LAST", "SOURCE"]
    table = [[r["name"], str(r["dates"]), r["first"] or "-", r["last"] or "-", r["source"]] for r in rows]
    widths = [max(len(shown_text(str(row[i]))) for row in table + [header]) for i in range(len(header))]
    for row in [header, *table]:
        print("  ".join(shown_text(str(cell)).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    if args.name:
        print("dates: " + ", ".join(calendars[0].dates))
    return 0


def annotate_fires(
    fires: list[dict],
    rule: CalendarRule,
    calendars: dict[str, Calendar],
    schedule_args: tuple[str, str, str | None, str | None],
    previous_us: int,
) -> list[dict]:
    """Each fire with what the job's calendar does to it: `calendar: {status, reason[, runs_at]}`
    for a slot skipped or moved (owed slots are left as they are)."""
    if not fires:
        return fires
    schedule = compile_schedule(*schedule_args)
    instants = [parse_iso_to_us(fire["at_utc"]) for fire in fires]
    after_last = schedule.next_fire(instants[-1])
    following = instants[1:] + [after_last.at_us if after_last else 0]
    for fire, nominal_us, next_us in zip(fires, instants, following, strict=True):
        plan = plan_calendar_slot(rule, calendars, schedule.zone, nominal_us, previous_us, next_us)
        if plan.status == SKIPPED:
            fire["calendar"] = {"status": "skipped", "reason": plan.reason}
        elif plan.moved:
            runs_at = from_us(plan.due_us).astimezone(schedule.zone).isoformat()
            fire["calendar"] = {"status": "moved", "reason": plan.reason, "runs_at": runs_at}
        previous_us = nominal_us
    return fires


def previous_slot_us(schedule_args: tuple[str, str, str | None, str | None], cursor_us: int, first_us: int) -> int:
    """What bounds the first listed slot's move: the job's cursor, or the latest slot between the
    cursor and it (claimed before it, so a move must land after that one too)."""
    schedule = compile_schedule(*schedule_args)
    for days in (1, 35, 400):
        start_us = max(cursor_us, first_us - days * 86_400_000_000)
        earlier = schedule.fires_between(start_us, first_us - 1, 200_000)
        if earlier:
            return earlier[-1].at_us
        if start_us == cursor_us:
            break
    return cursor_us


def fire_note(fire: dict) -> str:
    calendar = fire.get("calendar")
    if not calendar:
        return ""
    if calendar["status"] == "moved":
        return f"  [moved: runs at {calendar['runs_at']}; {calendar['reason']}]"
    return f"  [skipped: {calendar['reason']}]"


def spec_rule(spec_pb) -> CalendarRule | None:
    from scheduler.rpc.convert import calendar_rule_from_pb

    return calendar_rule_from_pb(spec_pb.calendar) if spec_pb.HasField("calendar") else None


def explain_note(fire: dict) -> str:
    """What a job's calendar does to a slot not yet due, as the end of explain's sentence."""
    calendar = fire.get("calendar")
    if not calendar:
        return ""
    if calendar["status"] == "moved":
        return f"; its calendar moves it to {calendar['runs_at']} ({calendar['reason']})"
    return f"; its calendar skips it ({calendar['reason']})"
