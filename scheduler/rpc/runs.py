"""RunService: "did it run?" from any node's local state, paginated and filterable."""

from __future__ import annotations

import bisect

import grpc

from scheduler.core import model
from scheduler.rpc.convert import STATUS_FROM_PB, parse_run_key, run_to_pb, timestamp_us
from scheduler.rpc.jobs import page_size
from scheduler.rpc.reads import Reader
from worker.api.v1 import runs_pb2, runs_pb2_grpc

_FOREVER_US = 1 << 62


def _scheduled(run: model.Run) -> int:
    return run.scheduled_us


def _parse_page_token(token: str, context) -> tuple[int, str] | None:
    """Tokens are `SCHEDULED_US:JOB_ID` of the last run returned."""
    if not token:
        return None
    scheduled, sep, job_id = token.partition(":")
    if not sep or not scheduled.lstrip("-").isdigit():
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed page token {token!r}")
    return int(scheduled), job_id


def _window(job_runs: list[model.Run], since_us: int, until_us: int, newest_first: bool, limit: int):
    """At most `limit` runs of one job with since <= scheduled < until, in page order."""
    lo = bisect.bisect_left(job_runs, since_us, key=_scheduled)
    hi = bisect.bisect_left(job_runs, until_us, key=_scheduled)
    return job_runs[max(lo, hi - limit) : hi][::-1] if newest_first else job_runs[lo : min(hi, lo + limit)]


class RunServicer(runs_pb2_grpc.RunServiceServicer):
    def __init__(self, raftlog, reader: Reader) -> None:
        self._raftlog = raftlog
        self._reader = reader

    def ListRuns(self, request: runs_pb2.ListRunsRequest, context):
        self._reader.barrier(context, request.linearizable)
        limit = page_size(request.page_size)
        since_us = timestamp_us(request.since) if request.HasField("since") else -_FOREVER_US
        until_us = timestamp_us(request.until) if request.HasField("until") else _FOREVER_US
        after = _parse_page_token(request.page_token, context)
        if after is not None:
            # Keyset pagination: continue just past the last run of the previous page.
            if request.newest_first:
                until_us = min(until_us, after[0] + 1)
            else:
                since_us = max(since_us, after[0])
        statuses = {STATUS_FROM_PB[s] for s in request.statuses if s in STATUS_FROM_PB}
        candidates: list[model.Run] = []
        with self._raftlog.read() as state:
            # Runs outlive their job: history of a deleted job stays listable.
            job_ids = [request.job_id] if request.job_id else list(state.runs)
            for job_id in job_ids:
                job = state.jobs.get(job_id)
                spec = job.spec if job is not None else None
                if (request.owner and (spec is None or spec.owner != request.owner)) or (
                    request.job_class and (spec is None or spec.job_class != request.job_class)
                ):
                    continue
                job_runs = state.runs.get(job_id, [])
                # Over-fetch per job so status filtering and the page cut still fill a page.
                window = _window(job_runs, since_us, until_us, request.newest_first, limit * 4 + 1)
                candidates.extend(r for r in window if not statuses or r.status in statuses)
            order = sorted(candidates, key=lambda r: (r.scheduled_us, r.job_id), reverse=request.newest_first)
            if after is not None:
                order = [r for r in order if _beyond(r, after, request.newest_first)]
            page = [run_to_pb(run) for run in order[:limit]]
            more = len(order) > limit
        next_token = f"{order[limit - 1].scheduled_us}:{order[limit - 1].job_id}" if more else ""
        return runs_pb2.ListRunsResponse(
            runs=page, next_page_token=next_token, read=self._reader.read_info(request.linearizable)
        )

    def GetRun(self, request: runs_pb2.GetRunRequest, context):
        self._reader.barrier(context, request.linearizable)
        job_id, scheduled_us = request.job_id, timestamp_us(request.scheduled_at)
        if request.run_key:
            try:
                job_id, scheduled_us = parse_run_key(request.run_key)
            except ValueError as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        with self._raftlog.read() as state:
            run = state.get_run(job_id, scheduled_us)
            found = run_to_pb(run) if run else None
        if found is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no retained run {job_id}@{scheduled_us}")
        return runs_pb2.GetRunResponse(run=found, read=self._reader.read_info(request.linearizable))


def _beyond(run: model.Run, after: tuple[int, str], newest_first: bool) -> bool:
    key = (run.scheduled_us, run.job_id)
    return key < after if newest_first else key > after
