"""`raftcron logs JOB [--at T] [--attempt N]`: what each attempt of one run wrote, and how it ended.

The run is read through RunService as `raftcron runs` reads it: by default the newest run of the
job that started an attempt (the newest run when none did); with --at, the run scheduled at T or
else the newest one before it; or the run a run key names.
"""

from __future__ import annotations

import json

import grpc

from scheduler.cli import connection
from scheduler.cli import output as out
from scheduler.cli.failures import CommandError
from scheduler.cli.times import parse_when
from scheduler.core.vocabulary import TargetKind
from scheduler.dashboard.fates import human_duration_us
from scheduler.planning import format_us
from scheduler.planning.runkeys import parse_run_key
from scheduler.rpc.convert import timestamp, timestamp_us
from scheduler.security.safetext import shown_text
from worker.api.v1 import runs_pb2

# Runs looked at, newest first, for the newest one that started an attempt.
RUNS_LOOKED_AT = 20
NO_OUTPUT = "(no output recorded)"


def cmd_logs(args) -> int:
    if args.attempt is not None and args.attempt < 1:
        raise CommandError(f"--attempt must be 1 or more, got {args.attempt}")
    with connection.cluster_client(args) as client:
        run = find_run(client, args.job, args.at, args.linearizable)
        target_kind = _target_kind(client, run.job_id)
    print(logs_text(run, args.attempt, target_kind) if not args.json else logs_json(run, args.attempt))
    return 0


def find_run(client, job: str, at: str | None, linearizable: bool = False):
    """The run `raftcron logs` shows (see the module docstring); CommandError when there is none."""
    if "@" in job:  # ids never hold an @: a run key
        if at:
            raise CommandError("give a run key or --at, not both")
        job_id, scheduled_us = parse_run_key(job)
        try:
            response = client.get_run(job_id=job_id, scheduled_at=timestamp(scheduled_us), linearizable=linearizable)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                raise CommandError(f"no retained run {job} (never claimed, or pruned by retention)") from None
            raise
        return response.run
    request = runs_pb2.ListRunsRequest(job_id=job, newest_first=True, linearizable=linearizable)
    if at:
        at_us = parse_when(at)
        request.until.CopyFrom(timestamp(at_us + 1))  # `until` is exclusive: a run at T itself counts
        request.page_size = 1
        runs = list(client.list_runs(request).runs)
        if not runs:
            raise CommandError(f"no retained run of {job} scheduled at or before {format_us(at_us)}{_why(client, job)}")
        return runs[0]
    request.page_size = RUNS_LOOKED_AT
    runs = list(client.list_runs(request).runs)
    if not runs:
        raise CommandError(f"no retained run of {job}{_why(client, job)}")
    return next((run for run in runs if run.attempts), runs[0])


def _why(client, job_id: str) -> str:
    """What an empty history means: no such job, or one that has not run (or was pruned)."""
    try:
        client.get_job(job_id=job_id)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return f": there is no job {job_id} (raftcron jobs lists them)"
        raise
    return " (it has not run yet, or retention pruned it)"


def _target_kind(client, job_id: str) -> str:
    """The job's target kind ('' once it was deleted): only a shell attempt has an exit code."""
    try:
        return client.get_job(job_id=job_id).job.spec.target.WhichOneof("kind") or ""
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return ""
        raise


def _chosen(run, number: int | None) -> list:
    if number is None:
        return list(run.attempts)
    found = [a for a in run.attempts if a.number == number]
    if not found:
        count = len(run.attempts)
        have = f"attempts 1-{count}" if count > 1 else "1 attempt" if count else "no attempt"
        raise CommandError(f"run {run.run_key} has {have}; there is no attempt {number}")
    return found


def ended_by(attempt, target_kind: str) -> str:
    """How an attempt ended in detail: its exception type, HTTP status or exit code ('' if none)."""
    if attempt.exception_type:
        return f"exception {attempt.exception_type}"
    if attempt.http_status:
        return f"HTTP {attempt.http_status}"
    if attempt.exit_code or (target_kind == TargetKind.SHELL and attempt.outcome):
        return f"exit code {attempt.exit_code}"
    return ""


def attempt_dict(attempt) -> dict:
    started, finished = _iso(attempt, "started_at"), _iso(attempt, "finished_at")
    took_us = timestamp_us(attempt.finished_at) - timestamp_us(attempt.started_at) if started and finished else None
    return {
        "number": attempt.number,
        "worker_id": attempt.worker_id,
        "started_at": started,
        "finished_at": finished,
        "duration_s": None if took_us is None else took_us / 1e6,
        "outcome": attempt.outcome or "running",
        "exit_code": attempt.exit_code,
        "exception_type": attempt.exception_type,
        "http_status": attempt.http_status,
        "error": attempt.error,
        "stdout_tail": attempt.stdout_tail,
        "stderr_tail": attempt.stderr_tail,
    }


def logs_json(run, number: int | None = None) -> str:
    attempts = [attempt_dict(a) for a in _chosen(run, number)]
    return json.dumps({"run": out.run_dict(run), "attempts": attempts}, indent=2)


def logs_text(run, number: int | None = None, target_kind: str = "") -> str:
    chosen = _chosen(run, number)
    facts = out.run_dict(run)
    lines = [shown_text(f"run {run.run_key}: {facts['status']}, {len(run.attempts)} attempt(s)")]
    if not run.attempts:
        lines.append(shown_text(f"no attempt started{': ' + facts['reason'] if facts['reason'] else ''}"))
    for attempt in chosen:
        found = attempt_dict(attempt)
        took = "" if found["duration_s"] is None else f", took {took_text(int(found['duration_s'] * 1e6))}"
        detail = ended_by(attempt, target_kind)
        lines.append("")
        lines.append(
            shown_text(
                f"attempt {attempt.number}: {found['outcome']}{', ' + detail if detail else ''}"
                f" (worker {attempt.worker_id or '?'}, started {found['started_at'] or '?'},"
                f" finished {found['finished_at'] or '-'}{took})"
            )
        )
        if attempt.error:
            lines.append(shown_text(f"  error: {attempt.error}"))
        for label, text in (("stdout", attempt.stdout_tail), ("stderr", attempt.stderr_tail)):
            if text:
                lines.append(f"  --- {label} ---")
                lines += [shown_text(f"  {line}") for line in text.splitlines()]
        if not (attempt.stdout_tail or attempt.stderr_tail):
            lines.append(f"  {NO_OUTPUT}")
    return "\n".join(lines)


def took_text(took_us: int) -> str:
    """An attempt's duration, in replicated time: it moves with the leader's clock ticks (about
    once a second), so a shorter attempt reads as under a second, not as 0 ms."""
    return "<1s" if took_us < 1_000_000 else human_duration_us(took_us)


def _iso(message, field: str) -> str:
    return format_us(timestamp_us(getattr(message, field))) if message.HasField(field) else ""
