"""Runs: `raftcron runs`, `explain` (the fate of the slot nearest a time, in one sentence) and
`next` (upcoming fire instants of a job or an expression)."""

from __future__ import annotations

import json
import sys

from scheduler.cli import connection
from scheduler.cli import output as out
from scheduler.cli.times import parse_when
from scheduler.core.model import SECOND_US
from scheduler.core.vocabulary import RunStatus
from scheduler.planning import compile_schedule, format_us, preview
from scheduler.rpc.convert import STATUS_FROM_PB, timestamp, timestamp_us
from scheduler.security.safetext import shown_text
from worker.api.v1 import runs_pb2

RUN_PAGES_FOLLOWED = 50


def cmd_runs(args) -> int:
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


def cmd_explain(args) -> int:
    with connection.cluster_client(args) as client:
        print(explain(client, args.job, args.at, args.json))
    return 0


WINDOW_US = 2 * 86_400 * SECOND_US


def _nearest_slot(spec, at_us: int) -> int | None:
    schedule = compile_schedule(spec.schedule, spec.timezone or "UTC", spec.dst.gap or None, spec.dst.repeat or None)
    after = schedule.next_fire(at_us - 1)
    before = schedule.fires_between(at_us - WINDOW_US, at_us - 1, 1_000_000)
    candidates = [f.at_us for f in ([after] if after else []) + before[-1:]]
    return min(candidates, key=lambda slot: abs(slot - at_us)) if candidates else None


def _runs_at(slot_us: int, due_us: int) -> str:
    if due_us == slot_us:
        return ""
    return f", due at {format_us(due_us)} ({out.spread_text((due_us - slot_us) / SECOND_US)} herd spread)"


def _sentence(run: dict) -> str:
    status, reason = run["status"], run["reason"]
    slot_us = parse_when(run["scheduled_at"])
    due_us = parse_when(run["effective_at"]) if run["effective_at"] else slot_us
    slot = f"slot {run['scheduled_at']} of {run['job_id']}{_runs_at(slot_us, due_us)}"
    late_s = (parse_when(run["claimed_at"]) - slot_us) / SECOND_US if run["claimed_at"] else 0.0
    fired = f"claimed at {run['claimed_at']} ({late_s:.3f}s after the slot)"
    if run["started_at"]:
        fired += f", started {(parse_when(run['started_at']) - due_us) / SECOND_US:.3f}s after it was due"
    if status == RunStatus.SUCCEEDED:
        return f"{slot}: {fired}; succeeded at {run['finished_at']} after {run['attempt']} attempt(s), worker {run['worker_id']}"
    if status in (RunStatus.QUEUED, RunStatus.LEASED):
        return f"{slot}: {fired}; {status} (attempt {run['attempt']}){'; ' + reason if reason else ''}"
    if status == RunStatus.SKIPPED:
        return f"{slot}: skipped because {reason or 'of its misfire policy'}"
    if status == RunStatus.MISSED:
        return f"{slot}: missed: {reason}"
    return f"{slot}: {fired}; ended {status}: {reason or run['error']}"


def explain(client, job_id: str, at: str, as_json: bool) -> str:
    """The fate of the slot of `job_id` nearest `at`: one sentence, or JSON with the run it names."""
    at_us = parse_when(at)
    job = client.get_job(job_id=job_id).job
    slot_us = _nearest_slot(job.spec, at_us)
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
    elif slot_us is not None and slot_us > cursor_us:
        due_us = slot_us + out.spread_us(job)
        answer = {
            "slot": format_us(slot_us),
            "due_at": format_us(due_us),
            "explanation": f"slot {format_us(slot_us)} of {job_id} is not due yet"
            f"{_runs_at(slot_us, due_us)}"
            f" (accounted up to {format_us(cursor_us)}){'; the job is paused' if job.paused else ''}",
        }
    elif slot_us is not None:
        answer = {
            "slot": format_us(slot_us),
            "explanation": f"slot {format_us(slot_us)} of {job_id}: no run is retained"
            " (before the job existed or pruned by retention)",
        }
    else:
        answer = {"slot": None, "explanation": f"{job_id} has no slot near {at}"}
    answer["job_status"] = STATUS_FROM_PB.get(job.last_status, "")
    return json.dumps(answer, indent=2) if as_json else shown_text(answer["explanation"])


def cmd_next(args) -> int:
    schedule, timezone, gap, repeat = args.schedule, args.timezone, args.dst_gap, args.dst_repeat
    job = None
    if args.job:
        with connection.cluster_client(args) as client:
            job = client.get_job(job_id=args.job).job
        spec = job.spec
        schedule, timezone = spec.schedule, spec.timezone or "UTC"
        gap, repeat = gap or spec.dst.gap or None, repeat or spec.dst.repeat or None
    elif not schedule:
        print("raftcron next: name a JOB or give --schedule", file=sys.stderr)
        return 2
    fires = preview(schedule, timezone or "UTC", args.after, args.n, gap, repeat)
    if job is not None:
        fires = with_due_instants(fires, out.spread_us(job))
    out.print_fires(fires, args.json)
    return 0


def with_due_instants(fires: list[dict], spread_us: int) -> list[dict]:
    """A job's fires with `due_at`, the instant the leader releases each (its slot plus the
    job's herd spread, as the cluster computed it), and `spread_s`."""
    return [
        {**fire, "due_at": format_us(parse_when(fire["at_utc"]) + spread_us), "spread_s": spread_us / SECOND_US}
        for fire in fires
    ]
