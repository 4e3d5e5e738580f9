"""Jobs: `raftcron apply`, `jobs`, `pause` and `resume`,
`delete`, `trigger` and `backfill`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scheduler.cli import connection
from scheduler.cli import output as out
from scheduler.cli.failures import CommandError
from scheduler.cli.times import parse_when
from scheduler.specs import MAX_FILE_BYTES, SpecError, SpecProblem, load_job_document
from scheduler.specs.reader import JobDocument, parse_job_document

STDIN = "-"


def read_job_document(path: str, stdin=None) -> JobDocument:
    """The jobs file at `path`, or standard input for `-` (`kubectl`-style: `... | raftcron apply -f -`)."""
    if path != STDIN:
        try:
            return load_job_document(path)
        except OSError as exc:
            raise CommandError(f"cannot read the jobs file {path}: {exc.strerror or exc}") from None
    stream = stdin if stdin is not None else sys.stdin.buffer
    data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise SpecError([SpecProblem("", "", "<stdin> is larger than 8 MiB")], "<stdin>")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SpecError([SpecProblem("", "", f"<stdin> is not UTF-8 (byte {error.start})")], "<stdin>") from None
    return parse_job_document(text, "<stdin>")


def apply_request(document, prune: bool, dry_run: bool, author: str = ""):
    """The ApplyJobs request for a loaded job file (shared by apply and plan)."""
    from scheduler.rpc.convert import calendar_to_pb, resource_to_pb, route_to_pb, spec_to_pb
    from worker.api.v1 import jobs_pb2

    return jobs_pb2.ApplyJobsRequest(
        jobs=[spec_to_pb(s) for s in document.jobs],
        resources=[resource_to_pb(r) for r in document.resources],
        calendars=[calendar_to_pb(c) for c in document.calendars],
        routes=[route_to_pb(r, redact=False) for r in document.routes],
        declares_routes=document.declares_routes,
        prune=prune,
        dry_run=dry_run,
        author=author,
    )


def cmd_apply(args) -> int:
    from scheduler.cli.routes import route_changes, route_lines

    document = read_job_document(args.file)
    request = apply_request(document, args.prune, args.dry_run, args.author)
    with connection.cluster_client(args) as client:
        routes = route_changes(client, document, args.prune) if not args.json else []
        response = client.apply_jobs(request)
    for line in route_lines(routes):
        print(line)
    out.print_changes(response, args.json, args.dry_run)
    return 0


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


def run_overrides(args) -> dict:
    """`--payload JSON|@FILE` and `--overlap` as request fields; {} for neither."""
    overrides = {}
    if args.payload is not None:
        text = args.payload
        if text.startswith("@"):
            path = text[1:]
            try:
                text = sys.stdin.read() if path == "-" else Path(path).read_text()
            except OSError as exc:
                raise CommandError(f"cannot read the payload file {path}: {exc.strerror or exc}") from None
        try:
            json.loads(text)
        except ValueError as exc:
            raise CommandError(f"--payload is not JSON: {exc}") from None
        overrides["payload_json"] = text
    if args.overlap:
        overrides["overlap"] = args.overlap
    return overrides


def cmd_trigger(args) -> int:
    with connection.cluster_client(args) as client:
        response = client.trigger_job(job_id=args.job, author=args.author, **run_overrides(args))
    out.print_runs_list([response.run], args.json)
    return 0


def cmd_cancel(args) -> int:
    from scheduler.rpc.convert import timestamp

    with connection.cluster_client(args) as client:
        response = client.cancel_run(
            job_id=args.job, scheduled_at=timestamp(parse_when(args.at)), reason=args.reason, author=args.author
        )
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
        **run_overrides(args),
    )
    getattr(request, "from").CopyFrom(timestamp(parse_when(args.from_)))
    with connection.cluster_client(args) as client:
        response = client.backfill_job(request)
    out.print_runs_list(list(response.runs), args.json)
    if not args.json:
        print(f"{len(response.runs)} slots backfilled, {response.already_ran} already ran")
    return 0
