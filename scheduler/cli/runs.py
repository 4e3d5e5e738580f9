"""Runs: `raftcron runs`, `explain` (the fate of the slot nearest a time, in one sentence) and
`next` (upcoming fire instants of a job or an expression)."""

from __future__ import annotations

import json
import sys

import msgspec
from msgspec import UNSET

from scheduler.cli import calendars as calendars_cli
from scheduler.cli import chain, connection
from scheduler.cli import output as out
from scheduler.cli.times import parse_when
from scheduler.core.model import SECOND_US
from scheduler.core.vocabulary import RunKind, RunStatus, SkipReason
from scheduler.planning import compile_schedule, format_us, parse_iso_to_us, preview
from scheduler.planning.durations import format_duration_us
from scheduler.planning.runkeys import parse_run_key
from scheduler.planning.slot_text import counted_runs_of, how_it_fires, owing_state, source_text
from scheduler.planning.slots import is_manual_only, owed_fires_between, upcoming_fires
from scheduler.planning.timeconv import format_offset, from_us
from scheduler.planning.zones import load_zone
from scheduler.rpc.convert import STATUS_FROM_PB, spec_from_pb, timestamp, timestamp_us
from scheduler.security.safetext import shown_text
from worker.api.v1 import runs_pb2

RUN_PAGES_FOLLOWED = 50


def cmd_runs(args) -> int:
    if args.job and "@" in args.job:  # ids never hold an @: this is one run's key
        return _one_run(args)
    statuses = {name: value for value, name in STATUS_FROM_PB.items()}
    request = runs_pb2.ListRunsRequest(
        job_id=args.job or "",
        statuses=[statuses[s] for s in args.status or []],
        since=timestamp(parse_when(args.since)) if args.since else None,
        until=timestamp(parse_when(args.until)) if args.until else None,
        page_size=args.limit,
        newest_first=not args.oldest_first,
        linearizable=args.linearizable,
    )
    with connection.cluster_client(args) as client:
        response = client.list_runs(request)
        # A node looks at a bounded number of runs per call, so a rare --status may answer a short
        # page with a token: follow it (a bounded number of times) to fill the page.
        for _ in range(RUN_PAGES_FOLLOWED):
            if len(response.runs) >= args.limit or not response.next_page_token:
                break
            request.page_token, request.page_size = response.next_page_token, args.limit - len(response.runs)
            more = client.list_runs(request)
            runs = list(response.runs) + list(more.runs)
            del more.runs[:]
            more.runs.extend(runs)
            response = more
    out.print_runs(response, args.json)
    return 0


def _one_run(args) -> int:
    job_id, scheduled_us = parse_run_key(args.job)
    with connection.cluster_client(args) as client:
        response = client.get_run(job_id=job_id, scheduled_at=timestamp(scheduled_us), linearizable=args.linearizable)
    out.print_runs_list([response.run], args.json)
    out.print_freshness(response.read)
    return 0


def cmd_explain(args) -> int:
    with connection.cluster_client(args) as client:
        print(explain(client, args.job, args.at, args.json))
    return 0


WINDOW_US = 2 * 86_400 * SECOND_US


def _schedule_of(spec):
    return compile_schedule(spec.schedule, spec.timezone or "UTC", spec.dst.gap or None, spec.dst.repeat or None)


def _nearest_slot(spec, at_us: int) -> int | None:
    """The job's slot nearest `at_us` (`spec` a core JobSpec; its window applies)."""
    after = owed_fires_between(spec, at_us - 1, at_us + WINDOW_US, 1)
    before = owed_fires_between(spec, at_us - WINDOW_US, at_us - 1, 1_000_000)
    candidates = [f.fire.at_us for f in after + before[-1:]]
    return min(candidates, key=lambda slot: abs(slot - at_us)) if candidates else None


def _job_state(job, spec, now_us: int) -> str:
    return owing_state(
        spec,
        timestamp_us(job.next_due) if job.HasField("next_due") else 0,
        counted_runs_of(job.counted_runs if job.HasField("counted_runs") else None),
        timestamp_us(job.last_scheduled_at) if job.HasField("last_scheduled_at") else 0,
        now_us,
    )


def deadline_verdict(run: dict, deadline_us: int) -> str:
    """Whether a scheduled run met its job's `deadline:` (slot + deadline), as a clause."""
    due_us = parse_when(run["effective_at"] or run["scheduled_at"]) + deadline_us
    due = f"deadline {format_duration_us(deadline_us)} after the slot is due ({format_us(due_us)})"
    if run["status"] in (RunStatus.MISSED, RunStatus.SKIPPED, RunStatus.CANCELLED):
        return f"{due}: not checked ({run['status']})"
    if run["status"] == RunStatus.SUCCEEDED and run["finished_at"] and parse_when(run["finished_at"]) <= due_us:
        return f"{due}: met"
    if run["status"] in (RunStatus.QUEUED, RunStatus.LEASED):
        return f"{due}: missed if it has not succeeded by then (a deadline_missed alert; the run goes on)"
    return f"{due}: missed (a deadline_missed alert was raised)"


def _runs_at(slot_us: int, due_us: int) -> str:
    if due_us == slot_us:
        return ""
    return f", due at {format_us(due_us)} ({out.spread_text((due_us - slot_us) / SECOND_US)} herd spread)"


def _sentence(run: dict) -> str:
    status, reason = run["status"], run["reason"]
    slot_us = parse_when(run["scheduled_at"])
    # A slot its calendar moved is owed where it moved (its effective instant), not at its run key.
    moved = reason.startswith(SkipReason.CALENDAR) and status not in (RunStatus.SKIPPED, RunStatus.MISSED)
    due_us = parse_when(run["effective_at"]) if run["effective_at"] else slot_us
    due, due_name = (run["effective_at"], "where its calendar moved it") if moved else (run["scheduled_at"], "the slot")
    slot = f"slot {run['scheduled_at']} of {run['job_id']}{'' if moved else _runs_at(slot_us, due_us)}"
    late_s = (parse_when(run["claimed_at"]) - parse_when(due)) / SECOND_US if run["claimed_at"] else 0.0
    fired = f"claimed at {run['claimed_at']} ({late_s:.3f}s after {due_name})"
    if run["started_at"]:
        fired += f", started {(parse_when(run['started_at']) - due_us) / SECOND_US:.3f}s after it was due"
    if status == RunStatus.SUCCEEDED:
        note = f"; {reason}" if moved else ""
        return (
            f"{slot}: {fired}; succeeded at {run['finished_at']} after {run['attempt']} attempt(s),"
            f" worker {run['worker_id']}{note}"
        )
    if status in (RunStatus.QUEUED, RunStatus.LEASED):
        return f"{slot}: {fired}; {status} (attempt {run['attempt']}){'; ' + reason if reason else ''}"
    if status == RunStatus.SKIPPED:
        return f"{slot}: skipped because {reason or 'of its misfire policy'}"
    if status == RunStatus.MISSED:
        return f"{slot}: missed: {reason}"
    return f"{slot}: {fired}; ended {status}: {reason or run['error']}"


def explain(client, job_id: str, at: str, as_json: bool) -> str:
    """The fate of the slot of `job_id` nearest `at`: one sentence and the schedule in words, or
    JSON with the run it names."""
    at_us = parse_when(at)
    job = client.get_job(job_id=job_id).job
    spec = spec_from_pb(job.spec)
    if job.spec.after:
        answer = chain.explain_child(client, job, job_id, at_us, WINDOW_US, _sentence)
        answer["children"] = list(job.children)
        answer["job_status"] = STATUS_FROM_PB.get(job.last_status, "")
        if as_json:
            return json.dumps(answer, indent=2)
        # One line each: shown_text makes a newline inside a line visible, as it must for caller text.
        return "\n".join(shown_text(line) for line in [answer["explanation"], *chain.chain_lines(answer)])
    if is_manual_only(spec):
        text = f"{job_id} is manual-only: it has no schedule and runs only when triggered (raftcron trigger {job_id})"
        manual = {"slot": None, "explanation": text, "job_status": STATUS_FROM_PB.get(job.last_status, "")}
        return json.dumps(manual, indent=2) if as_json else shown_text(text)
    slot_us = _nearest_slot(spec, at_us)
    response = client.list_runs(
        runs_pb2.ListRunsRequest(
            job_id=job_id, since=timestamp(at_us - WINDOW_US), until=timestamp(at_us + WINDOW_US), page_size=1000
        )
    )
    runs = [out.run_dict(r) for r in response.runs]
    nearest = min(runs, key=lambda r: abs(parse_when(r["scheduled_at"]) - at_us), default=None)
    cursor_us = timestamp_us(job.cursor)
    if nearest is not None and (
        slot_us is None or abs(parse_when(nearest["scheduled_at"]) - at_us) <= abs(slot_us - at_us)
    ):
        answer = {
            "slot": nearest["scheduled_at"],
            "due_at": nearest["effective_at"] or nearest["scheduled_at"],
            "run": nearest,
            "explanation": _sentence(nearest),
        }
        source = source_text(spec, nearest["schedule_index"])
        if source:
            answer["schedule"] = source
            answer["explanation"] += f" (from {source})"
        if spec.deadline_us is not UNSET and nearest["kind"] == RunKind.SCHEDULED:
            answer["deadline"] = deadline_verdict(nearest, spec.deadline_us)
            answer["explanation"] += f"; {answer['deadline']}"
    elif slot_us is not None and slot_us > cursor_us and not job.HasField("next_due"):
        answer = {
            "slot": format_us(slot_us),
            "explanation": f"slot {format_us(slot_us)} of {job_id} is not owed"
            f" (accounted up to {format_us(cursor_us)}, and no further slot is owed)",
        }
    elif slot_us is not None and slot_us > cursor_us:
        due_us = slot_us + out.spread_us(job)
        answer = {
            "slot": format_us(slot_us),
            "due_at": format_us(due_us),
            "explanation": f"slot {format_us(slot_us)} of {job_id} is not due yet"
            f"{_runs_at(slot_us, due_us)}"
            f" (accounted up to {format_us(cursor_us)}){'; the job is paused' if job.paused else ''}",
        }
        if spec.deadline_us is not UNSET:
            answer["deadline"] = f"deadline {format_duration_us(spec.deadline_us)} after it is due"
            answer["explanation"] += f"; {answer['deadline']} ({format_us(due_us + spec.deadline_us)})"
        if (rule := calendars_cli.spec_rule(job.spec)) is not None:
            pb_spec = job.spec
            schedule_args = (
                pb_spec.schedule,
                pb_spec.timezone or "UTC",
                pb_spec.dst.gap or None,
                pb_spec.dst.repeat or None,
            )
            fire = {"at_utc": format_us(slot_us)}
            calendars = calendars_cli.fetch_calendars(client)
            previous_us = calendars_cli.previous_slot_us(schedule_args, cursor_us, slot_us)
            calendars_cli.annotate_fires([fire], rule, calendars, schedule_args, previous_us)
            if "calendar" in fire:
                answer["calendar"] = fire["calendar"]
                answer["explanation"] += calendars_cli.explain_note(fire)
    elif slot_us is not None:
        answer = {
            "slot": format_us(slot_us),
            "explanation": f"slot {format_us(slot_us)} of {job_id}: no run is retained"
            " (before the job existed or pruned by retention)",
        }
    else:
        answer = {"slot": None, "explanation": f"{job_id} has no slot near {at}"}
    answer["job_status"] = STATUS_FROM_PB.get(job.last_status, "")
    state = _job_state(job, spec, max(at_us, timestamp_us(job.cursor)))
    if state:
        answer["job_state"] = state
        answer["explanation"] += f"; the job: {state}"
    if "schedule" not in answer and spec.schedule:
        answer["schedule"] = _schedule_of(job.spec).describe()
    if job.children:
        answer["children"] = list(job.children)
    if as_json:
        return json.dumps(answer, indent=2)
    described = f"\nschedule: {shown_text(answer['schedule'])}" if "schedule" in answer else ""
    children = "".join(f"\n{shown_text(line)}" for line in chain.chain_lines(answer))
    return shown_text(answer["explanation"]) + described + children


def cmd_next(args) -> int:
    schedule, timezone, gap, repeat = args.schedule, args.timezone, args.dst_gap, args.dst_repeat
    job = None
    if args.job:
        with connection.cluster_client(args) as client:
            job = client.get_job(job_id=args.job).job
            rule = calendars_cli.spec_rule(job.spec)
            if rule is None:
                print(next_of_job(job, args.after, args.n, args.json, timezone or "", gap, repeat))
                return 0
            calendars, cursor_us = calendars_cli.fetch_calendars(client), timestamp_us(job.cursor)
        # A job with a calendar has one plain `schedule:` (specs/rules.py): its slots, annotated.
        spec = job.spec
        schedule, timezone = spec.schedule, timezone or spec.timezone or "UTC"
        gap, repeat = gap or spec.dst.gap or None, repeat or spec.dst.repeat or None
        fires = preview(schedule, timezone, args.after, args.n, gap, repeat)
        if fires:
            # Slots between the job's cursor and `--after` are not listed, but bound its moves.
            schedule_args = (schedule, timezone, gap, repeat)
            first_us = parse_when(fires[0]["at_utc"])
            previous_us = calendars_cli.previous_slot_us(schedule_args, min(cursor_us, first_us - 1), first_us)
            fires = calendars_cli.annotate_fires(fires, rule, calendars, schedule_args, previous_us)
        out.print_fires(with_due_instants(fires, out.spread_us(job)), args.json)
        return 0
    if not schedule:
        print("raftcron next: name a JOB or give --schedule", file=sys.stderr)
        return 2
    # An empty --timezone is refused by the planner, not read as UTC.
    timezone = "UTC" if timezone is None else timezone
    fires = preview(schedule, timezone, args.after, args.n, gap, repeat)
    if not args.json:
        print(shown_text(compile_schedule(schedule, timezone, gap, repeat).describe()))
    out.print_fires(fires, args.json)
    return 0


def next_of_job(
    job,
    after: str,
    n: int,
    as_json: bool,
    timezone: str = "",
    dst_gap: str | None = None,
    dst_repeat: str | None = None,
) -> str:
    """A job's next owed slots after `after`, each with the schedule it comes from, and why no
    (further) slot is owed: manual-only, done, before or after its window, limit reached.
    `timezone`, `dst_gap` and `dst_repeat` preview the job as if its spec said them."""
    spec = spec_from_pb(job.spec)
    overrides = {"timezone": timezone, "dst_gap": dst_gap, "dst_repeat": dst_repeat}
    spec = msgspec.structs.replace(spec, **{name: value for name, value in overrides.items() if value})
    try:
        after_us = parse_iso_to_us(after)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"--after {after!r} is not an ISO-8601 date-time such as 2026-03-08T00:00:00Z") from None
    if not 0 <= n <= 1000:
        raise ValueError(f"-n must be from 0 to 1000, got {n}")
    counted = counted_runs_of(job.counted_runs if job.HasField("counted_runs") else None)
    # The job owes nothing at or before its cursor: those slots are accounted.
    start_us = max(after_us, timestamp_us(job.cursor) if job.HasField("cursor") else 0)
    zone = load_zone(spec.timezone)
    fires = [
        {
            "at": from_us(fire.at_us).astimezone(zone).isoformat(),
            "at_utc": format_us(fire.at_us),
            "nominal_local": fire.nominal_local,
            "adjustment": fire.adjustment,
            "utc_offset": format_offset(fire.utc_offset_s),
            "schedule": source_text(spec, source),
        }
        for fire, source in upcoming_fires(spec, start_us, n, counted)
    ]
    fires = with_due_instants(fires, out.spread_us(job))
    state = _job_state(job, spec, after_us)
    if as_json:
        answer = {"job": spec.id, "fires_by": how_it_fires(spec), "state": state, "fires": fires}
        answer.update(window=_window_json(spec), max_runs=None if spec.max_runs is UNSET else spec.max_runs)
        answer["counted_runs"] = counted if spec.max_runs is not UNSET else None
        return json.dumps(answer, indent=2)
    lines = [f"{fire['at']}  = {fire['at_utc']}" + _due(fire) + _notes(fire) for fire in fires]
    if state:
        lines.append(f"{spec.id}: {state}")
    elif not fires:
        lines.append(f"{spec.id}: no slot after {format_us(start_us)}")
    return "\n".join(shown_text(line) for line in lines)


def upcoming_text(spec, after: str, n: int) -> list[str]:
    """A spec's next `n` slots after `after`, one line each (`raftcron plan`), or why it has none."""
    zone = load_zone(spec.timezone)
    lines = []
    for fire, source in upcoming_fires(spec, parse_iso_to_us(after), n):
        notes = [note for note in (fire.adjustment, f"from {source_text(spec, source)}" if source >= 0 else "") if note]
        at = from_us(fire.at_us).astimezone(zone).isoformat()
        lines.append(at + (f" ({'; '.join(notes)})" if notes else ""))
    if not lines:
        lines.append(owing_state(spec, 0, 0, 0, parse_iso_to_us(after)) or "no further slot")
    return lines


def _due(fire: dict) -> str:
    """`  runs at T (+12m34s)`: the instant the leader releases the slot, when it is spread."""
    return f"  runs at {fire['due_at']} ({out.spread_text(fire['spread_s'])})" if fire.get("spread_s") else ""


def _notes(fire: dict) -> str:
    notes = [note for note in (fire["adjustment"], f"from {fire['schedule']}" if fire["schedule"] else "") if note]
    return f"  ({'; '.join(notes)})" if notes else ""


def _window_json(spec) -> dict | None:
    if spec.active is UNSET:
        return None
    window = {"from": spec.active.from_us, "until": spec.active.until_us}
    return {key: format_us(us) if us else None for key, us in window.items()}


def with_due_instants(fires: list[dict], spread_us: int) -> list[dict]:
    """A job's fires with `due_at`, the instant the leader releases each (its slot plus the
    job's herd spread, as the cluster computed it), and `spread_s`."""
    return [
        {**fire, "due_at": format_us(parse_when(fire["at_utc"]) + spread_us), "spread_s": spread_us / SECOND_US}
        for fire in fires
    ]
