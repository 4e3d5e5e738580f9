"""Jobs: `raftcron apply`, `plan` (what an apply would change), `jobs`, `pause` and `resume`,
`delete`, `trigger` and `backfill`."""

from __future__ import annotations

import json

from scheduler.cli import calendars as calendars_cli
from scheduler.cli import connection
from scheduler.cli import output as out
from scheduler.cli.times import now_iso, parse_when
from scheduler.planning import preview
from scheduler.specs import load_job_document, spec_to_document


def apply_request(document, prune: bool, dry_run: bool, author: str = ""):
    """The ApplyJobs request for a loaded job file (shared by apply and plan)."""
    from scheduler.rpc.convert import calendar_to_pb, resource_to_pb, spec_to_pb
    from worker.api.v1 import jobs_pb2

    return jobs_pb2.ApplyJobsRequest(
        jobs=[spec_to_pb(s) for s in document.jobs],
        resources=[resource_to_pb(r) for r in document.resources],
        calendars=[calendar_to_pb(c) for c in document.calendars],
        prune=prune,
        dry_run=dry_run,
        author=author,
    )


def cmd_apply(args) -> int:
    request = apply_request(load_job_document(args.file), args.prune, args.dry_run, args.author)
    with connection.cluster_client(args) as client:
        response = client.apply_jobs(request)
    out.print_changes(response, args.json, args.dry_run)
    return 0


def cmd_plan(args) -> int:
    print(plan(args))
    return 0


NEXT_FIRES = 3


def plan(args) -> str:
    """The diff an apply would make, each job's effective settings and next fires."""
    document = load_job_document(args.file)
    with connection.cluster_client(args) as client:
        changes = client.apply_jobs(apply_request(document, args.prune, dry_run=True)).changes
        calendars = calendars_cli.plan_calendars(client, document) if any(s.calendar for s in document.jobs) else {}
    after = now_iso()
    specs = {spec.id: spec for spec in document.jobs}
    entries = []
    for change in changes:
        spec = specs.get(change.job_id)
        entry = {"job_id": change.job_id, "change": change.change, "version": change.version}
        if spec is not None:
            entry["effective"] = spec_to_document(spec, full=True)
            schedule_args = (spec.schedule, spec.timezone, spec.dst_gap or None, spec.dst_repeat or None)
            fires = preview(*schedule_args[:2], after, NEXT_FIRES, *schedule_args[2:])
            if spec.calendar:
                fires = calendars_cli.annotate_fires(fires, spec.calendar, calendars, schedule_args, parse_when(after))
            entry["next_fires"] = [
                fire["at"] + (f" ({fire['adjustment']})" if fire["adjustment"] else "") + calendars_cli.fire_note(fire)
                for fire in fires
            ]
        entries.append(entry)
    if args.json:
        return json.dumps(entries, indent=2)
    lines = []
    for entry in entries:
        lines.append(f"{entry['change']:>9}  {entry['job_id']} (v{entry['version']})")
        if entry["change"] in ("added", "changed"):
            lines.append("           next: " + ", ".join(entry.get("next_fires", [])))
    counts = {kind: sum(e["change"] == kind for e in entries) for kind in ("added", "changed", "removed", "unchanged")}
    lines.append(", ".join(f"{n} {kind}" for kind, n in counts.items()) + "  (nothing applied; run `raftcron apply`)")
    return "\n".join(lines)


def cmd_jobs(args) -> int:
    with connection.cluster_client(args) as client:
        response = client.list_jobs(
            owner=args.owner, job_class=args.job_class, page_size=args.limit, linearizable=args.linearizable
        )
    out.print_jobs(response, args.json)
    return 0


def cmd_pause(args, paused: bool = True) -> int:
    with connection.cluster_client(args) as client:
        call = client.pause_job if paused else client.resume_job
        response = call(job_id=args.job, author=args.author, reason=args.reason)
    out.print_job(response.job, args.json)
    return 0


def cmd_delete(args) -> int:
    with connection.cluster_client(args) as client:
        client.delete_job(job_id=args.job, author=args.author)
    print(f"deleted {args.job}")
    return 0


def cmd_trigger(args) -> int:
    with connection.cluster_client(args) as client:
        response = client.trigger_job(job_id=args.job, author=args.author)
    out.print_runs_list([response.run], args.json)
    return 0


def cmd_backfill(args) -> int:
    from scheduler.rpc.convert import timestamp
    from worker.api.v1 import jobs_pb2

    request = jobs_pb2.BackfillJobRequest(
        job_id=args.job,
        to=timestamp(parse_when(args.to)),
        max_runs=args.max_runs,
        rate_per_s=args.rate,
        author=args.author,
    )
    getattr(request, "from").CopyFrom(timestamp(parse_when(args.from_)))
    with connection.cluster_client(args) as client:
        response = client.backfill_job(request)
    out.print_runs_list(list(response.runs), args.json)
    if not args.json:
        print(f"{len(response.runs)} slots backfilled, {response.already_ran} already ran")
    return 0
