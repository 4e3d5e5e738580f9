"""RunService: "did it run?" from any node's local state, paginated and filterable."""

from __future__ import annotations

import grpc

from scheduler.rpc.convert import STATUS_FROM_PB, parse_run_key, printable_run_key, run_to_pb, timestamp_us
from scheduler.rpc.jobs import page_size
from scheduler.rpc.reads import Reader, hide_attempt_output
from scheduler.rpc.run_pages import FOREVER_US, MAX_RUNS_EXAMINED, RunQuery, select_page, select_runs
from worker.api.v1 import runs_pb2, runs_pb2_grpc

__all__ = ["MAX_RUNS_EXAMINED", "RunQuery", "RunServicer", "select_runs"]


def _parse_page_token(token: str, context) -> tuple[int, str] | None:
    """Tokens are `SCHEDULED_US:JOB_ID` of the last run returned."""
    if not token:
        return None
    scheduled, sep, job_id = token.partition(":")
    if not sep or not scheduled.lstrip("-").isdigit():
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed page token {token!r}")
    return int(scheduled), job_id


_RUN_METHODS = runs_pb2.DESCRIPTOR.services_by_name["RunService"].methods_by_name


class RunServicer(runs_pb2_grpc.RunServiceServicer):
    def __init__(self, raftlog, reader: Reader) -> None:
        self._raftlog = raftlog
        self._reader = reader

    def _owner_of(self, job_id: str) -> str | None:
        with self._raftlog.read() as state:
            job = state.jobs.get(job_id)
            return job.body.owner if job is not None else None

    def ListRuns(self, request: runs_pb2.ListRunsRequest, context):
        if (answer := self._reader.linearizable(context, request, _RUN_METHODS["ListRuns"])) is not None:
            return answer
        query = RunQuery(
            job_id=request.job_id,
            owner=request.owner,
            job_class=request.job_class,
            statuses=frozenset(STATUS_FROM_PB[s] for s in request.statuses if s in STATUS_FROM_PB),
            since_us=timestamp_us(request.since) if request.HasField("since") else -FOREVER_US,
            until_us=timestamp_us(request.until) if request.HasField("until") else FOREVER_US,
            newest_first=request.newest_first,
            after=_parse_page_token(request.page_token, context),
        )
        page, next_key = select_page(self._raftlog.read, query, page_size(request.page_size), convert=run_to_pb)
        hide_attempt_output(page, self._owner_of)
        next_token = f"{next_key[0]}:{next_key[1]}" if next_key is not None else ""
        return runs_pb2.ListRunsResponse(
            runs=page, next_page_token=next_token, read=self._reader.read_info(request.linearizable)
        )

    def GetRun(self, request: runs_pb2.GetRunRequest, context):
        if (answer := self._reader.linearizable(context, request, _RUN_METHODS["GetRun"])) is not None:
            return answer
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
            context.abort(grpc.StatusCode.NOT_FOUND, f"no retained run {printable_run_key(job_id, scheduled_us)}")
        hide_attempt_output([found], self._owner_of)
        return runs_pb2.GetRunResponse(run=found, read=self._reader.read_info(request.linearizable))
