"""RunService: "did it run?" from any node's local state, paginated and filterable."""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass

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


# A filter that matches few runs stops after examining this many (in page order) and answers a
# short page with a token to go on from: one call never walks the whole history under the lock.
MAX_RUNS_EXAMINED = 20_000


@dataclass(frozen=True)
class RunQuery:
    job_id: str = ""
    owner: str = ""
    job_class: str = ""
    statuses: frozenset[str] = frozenset()
    since_us: int = -_FOREVER_US
    until_us: int = _FOREVER_US
    newest_first: bool = False
    after: tuple[int, str] | None = None  # the page token: key of the last run already returned


def select_runs(state, query: RunQuery, limit: int, max_examined: int = MAX_RUNS_EXAMINED):
    """One page of runs in (scheduled_us, job_id) order (reversed for newest first), and the key
    to continue after (None on the last page). Each job's runs are already sorted, so the jobs'
    windows are merged lazily, each starting just past the page token: the cost is the jobs looked
    at plus the runs examined, never every run of every job, nor the runs of earlier pages (a
    midnight herd shares one instant across thousands of jobs)."""
    streams = []
    job_ids = [query.job_id] if query.job_id else list(state.runs)
    for job_id in job_ids:  # runs outlive their job: the history of a deleted job stays listable
        if (query.owner or query.job_class) and not _job_matches(state.jobs.get(job_id), query):
            continue
        job_runs = state.runs.get(job_id)
        if job_runs:
            lo, hi = _window(job_runs, job_id, query)
            if lo < hi:
                streams.append(_in_order(job_runs, lo, hi, query.newest_first))
    merged = heapq.merge(*streams, key=_run_key, reverse=query.newest_first)
    page: list[model.Run] = []
    for examined, run in enumerate(merged, start=1):
        if not query.statuses or run.status in query.statuses:
            if len(page) == limit:
                return page, _run_key(page[-1])
            page.append(run)
        if examined >= max_examined:
            return page, _run_key(run)
    return page, None


def _job_matches(job, query: RunQuery) -> bool:
    if job is None:  # a deleted job's history has no owner or class left to match
        return False
    return (not query.owner or job.body.owner == query.owner) and (
        not query.job_class or job.body.job_class == query.job_class
    )


def _window(job_runs: list[model.Run], job_id: str, query: RunQuery) -> tuple[int, int]:
    """Positions [lo, hi) of the job's runs in the query's window and past its page token."""
    lo = bisect.bisect_left(job_runs, query.since_us, key=_scheduled)
    hi = bisect.bisect_left(job_runs, query.until_us, key=_scheduled)
    if query.after is not None:
        after_us, after_job = query.after
        # Keys run (instant, job id): at the token's instant, a job sorting at or before the
        # token's job (after it, newest first) was returned already.
        if query.newest_first:
            end = bisect.bisect_left if job_id >= after_job else bisect.bisect_right
            hi = min(hi, end(job_runs, after_us, key=_scheduled))
        else:
            start = bisect.bisect_right if job_id <= after_job else bisect.bisect_left
            lo = max(lo, start(job_runs, after_us, key=_scheduled))
    return lo, hi


def _in_order(job_runs: list[model.Run], lo: int, hi: int, newest_first: bool):
    """The job's runs at positions [lo, hi), in page order."""
    positions = range(hi - 1, lo - 1, -1) if newest_first else range(lo, hi)
    return (job_runs[position] for position in positions)


def _run_key(run: model.Run) -> tuple[int, str]:
    return run.scheduled_us, run.job_id


class RunServicer(runs_pb2_grpc.RunServiceServicer):
    def __init__(self, raftlog, reader: Reader) -> None:
        self._raftlog = raftlog
        self._reader = reader

    def ListRuns(self, request: runs_pb2.ListRunsRequest, context):
        self._reader.barrier(context, request.linearizable)
        query = RunQuery(
            job_id=request.job_id,
            owner=request.owner,
            job_class=request.job_class,
            statuses=frozenset(STATUS_FROM_PB[s] for s in request.statuses if s in STATUS_FROM_PB),
            since_us=timestamp_us(request.since) if request.HasField("since") else -_FOREVER_US,
            until_us=timestamp_us(request.until) if request.HasField("until") else _FOREVER_US,
            newest_first=request.newest_first,
            after=_parse_page_token(request.page_token, context),
        )
        with self._raftlog.read() as state:
            runs, next_key = select_runs(state, query, page_size(request.page_size))
            page = [run_to_pb(run) for run in runs]
        next_token = f"{next_key[0]}:{next_key[1]}" if next_key is not None else ""
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
