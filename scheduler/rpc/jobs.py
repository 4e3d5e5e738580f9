"""JobService: apply, read, delete, pause and resume jobs. Translation only."""

from __future__ import annotations

import bisect
import json
import math
import uuid
from datetime import UTC, datetime

import grpc
import msgspec

from scheduler.core import Result, model
from scheduler.core import results as ev
from scheduler.core.commands import ApplyJobs, BackfillRuns, CancelRun, SetJobPaused, TriggerRun
from scheduler.core.dependencies import dependency_problem
from scheduler.core.manual import BACKFILL_OVERLAPS, MAX_BACKFILL_SLOTS, OVERLAPS
from scheduler.core.model import SECOND_US
from scheduler.core.routes import route_problem
from scheduler.core.vocabulary import RejectionCode
from scheduler.planning.slots import owed_fires_between
from scheduler.replication import RaftLog, ReplicationError
from scheduler.rpc.convert import (
    calendar_from_pb,
    calendar_to_pb,
    resource_from_pb,
    route_from_pb,
    route_to_pb,
    run_to_pb,
    spec_from_pb,
    timestamp_us,
)
from scheduler.rpc.errors import abort_rejected, abort_replication, submit_or_abort
from scheduler.rpc.job_ids import JobIds
from scheduler.rpc.quotas import Admission
from scheduler.rpc.reads import Reader, scoped_job_pb
from scheduler.security.interceptor import audited_author, current_principal, require
from scheduler.security.policy import job_change_denial, jobs_target_denial
from scheduler.security.principals import ADMIN
from scheduler.specs import canonical_payload_json
from scheduler.specs.apply_plan import apply_problems, apply_refusal, plan_apply, preview_changes
from scheduler.specs.holiday_expansion import ExpansionError, expand_holidays
from scheduler.specs.payload import canonical_payload_text
from worker.api.v1 import common_pb2 as pb
from worker.api.v1 import jobs_pb2, jobs_pb2_grpc

MAX_JOBS_PER_APPLY = 100_000
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
# A retryable rejection (another writer moved a job first) is re-planned this many times.
APPLY_ATTEMPTS = 3

_JOB_METHODS = jobs_pb2.DESCRIPTOR.services_by_name["JobService"].methods_by_name
_CHANGE_NAMES = {ev.JobAdded: "added", ev.JobChanged: "changed", ev.JobUnchanged: "unchanged", ev.JobRemoved: "removed"}


def _canonical_payload(spec: model.JobSpec) -> model.JobSpec:
    """Clients may send any JSON text; replicas store one canonical form (or validation reports it)."""
    if not spec.payload_json:
        return spec
    try:
        canonical = canonical_payload_json(json.loads(spec.payload_json))
    except ValueError:
        return spec
    return msgspec.structs.replace(spec, payload_json=canonical)


def page_size(requested: int) -> int:
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE) if requested >= 0 else DEFAULT_PAGE_SIZE


def _run_overrides(request, context, overlaps: tuple[str, ...]) -> dict:
    """A trigger's or backfill's own payload and overlap policy, checked; {} when it gives none,
    so the command needs no newer log format than before."""
    overrides: dict = {}
    if request.payload_json:
        try:
            overrides["payload_json"] = canonical_payload_text(request.payload_json)
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    if request.overlap:
        if request.overlap not in overlaps:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"overlap must be one of {', '.join(overlaps)}")
        overrides["overlap"] = request.overlap
    return overrides


class JobServicer(jobs_pb2_grpc.JobServiceServicer):
    def __init__(
        self, raftlog: RaftLog, reader: Reader, clock_us, timeout_s: float, admission: Admission | None = None
    ) -> None:
        self._raftlog = raftlog
        self._reader = reader
        self._clock_us = clock_us
        self._timeout_s = timeout_s
        # Quotas per owner and the write rate per principal (scheduler/rpc/quotas.py).
        self._admission = admission if admission is not None else Admission(raftlog.read)
        self._job_ids = JobIds()
        raftlog.add_apply_listener(self._job_ids.on_apply)

    # -- writes ------------------------------------------------------------
    def _submit(self, command, context: grpc.ServicerContext) -> Result:
        return submit_or_abort(self._raftlog, command, self._timeout_s, context)

    def _plan_apply(
        self,
        specs: list[model.JobSpec],
        resources: list[model.Resource],
        prune: bool,
        author: str,
        request_id: str,
        calendars: list[model.Calendar],
        routes: list[model.AlertRoute] | None = None,
    ) -> ApplyJobs:
        with self._raftlog.read() as state:
            return plan_apply(
                state,
                specs,
                resources,
                prune=prune,
                caller=current_principal(),
                author=author,
                request_id=request_id,
                calendars=calendars,
                routes=routes,
            )

    def _expanded(self, calendars: list[model.Calendar], context) -> list[model.Calendar]:
        """Holiday calendars as explicit dates, expanded here, on the node that proposes them."""
        if not any(c.source is not None for c in calendars):
            return calendars
        with self._raftlog.read() as state:
            this_year = datetime.fromtimestamp(state.now_us / SECOND_US, UTC).year
        try:
            return [expand_holidays(c, this_year) for c in calendars]
        except ExpansionError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"nothing applied:\n{exc}")

    def _require_may_apply(self, command: ApplyJobs, context) -> None:
        with self._raftlog.read() as state:
            refusal = apply_refusal(state, command, current_principal())
        if refusal:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)

    def _require_may_change(self, job_id: str, context, runs: bool = False) -> None:
        """Owner scope of a one-job change, and with `runs` (a trigger) its target too; an
        unknown job is left to the core (NOT_FOUND)."""
        if current_principal() is None:
            return
        with self._raftlog.read() as state:
            job = state.jobs.get(job_id)
            body = job.body if job is not None else None
        if body is not None:
            require(context, job_change_denial, job_id, body.owner)
            if runs:
                require(context, jobs_target_denial, [(job_id, body.owner, body.target_kind, body.target)])

    def ApplyJobs(self, request: jobs_pb2.ApplyJobsRequest, context):
        with self._raftlog.read() as state:
            if state.epoch == 0:
                context.abort(grpc.StatusCode.UNAVAILABLE, "the cluster has no leader epoch yet; retry shortly")
        self._admission.admit_write(context)
        if len(request.jobs) > MAX_JOBS_PER_APPLY:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"at most {MAX_JOBS_PER_APPLY} jobs per apply")
        specs = [_canonical_payload(spec_from_pb(job)) for job in request.jobs]
        resources = [resource_from_pb(r) for r in request.resources]
        calendars = [calendar_from_pb(c) for c in request.calendars]
        problems = apply_problems(specs, resources, calendars)
        if problems:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "nothing applied:\n" + "\n".join(problems))
        calendars = self._expanded(calendars, context)
        routes = [route_from_pb(r) for r in request.routes] if request.declares_routes or request.routes else None
        route_problems = [problem for r in routes or () if (problem := route_problem(r))]
        if route_problems:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "nothing applied:\n" + "\n".join(route_problems))
        request_id = request.request_id or uuid.uuid4().hex
        for attempt in range(APPLY_ATTEMPTS):
            author = audited_author(request.author)
            command = self._plan_apply(specs, resources, request.prune, author, request_id, calendars, routes)
            self._require_may_apply(command, context)
            self._admission.check_apply(context, command)
            if request.dry_run:
                self._require_schedulable(command, context)
                return jobs_pb2.ApplyJobsResponse(changes=self._preview_changes(command))
            try:
                result = self._raftlog.submit(command, self._timeout_s)
            except ReplicationError as exc:
                abort_replication(context, exc)
            if result.accepted or not result.rejection.retryable or attempt == APPLY_ATTEMPTS - 1:
                break
        if not result.accepted:
            abort_rejected(context, result.rejection)
        changes = [
            pb.JobChange(job_id=e.job_id, change=_CHANGE_NAMES[type(e)], version=e.version)
            for e in result.events
            if type(e) in _CHANGE_NAMES
        ]
        return jobs_pb2.ApplyJobsResponse(changes=changes, applied_index=result.index)

    def _require_schedulable(self, command: ApplyJobs, context) -> None:
        """A dry run refuses what the apply would: cycles, unknown parents, parents that disagree."""
        with self._raftlog.read() as state:
            problem = dependency_problem(state, command)
        if problem:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{RejectionCode.INVALID}: {problem}")

    def _preview_changes(self, command: ApplyJobs) -> list[pb.JobChange]:
        with self._raftlog.read() as state:
            changes = preview_changes(state, command)
        return [pb.JobChange(job_id=c.job_id, change=c.change, version=c.version) for c in changes]

    def DeleteJob(self, request, context):
        self._admission.admit_write(context)
        self._require_may_change(request.job_id, context)
        command = ApplyJobs(
            self._clock_us(),
            audited_author(request.author),
            request.request_id or uuid.uuid4().hex,
            (),
            (request.job_id,),
        )
        return jobs_pb2.DeleteJobResponse(applied_index=self._submit(command, context).index)

    def _set_paused(self, request, context, paused: bool) -> pb.Job:
        self._admission.admit_write(context)
        self._require_may_change(request.job_id, context)
        command = SetJobPaused(
            issued_at_us=self._clock_us(),
            job_id=request.job_id,
            paused=paused,
            author=audited_author(request.author),
            reason=request.reason,
            request_id=request.request_id or uuid.uuid4().hex,
        )
        self._submit(command, context)
        return self._job_or_abort(request.job_id, context)

    def PauseJob(self, request, context):
        return jobs_pb2.PauseJobResponse(job=self._set_paused(request, context, True))

    def ResumeJob(self, request, context):
        return jobs_pb2.ResumeJobResponse(job=self._set_paused(request, context, False))

    def TriggerJob(self, request, context):
        self._admission.admit_write(context)
        self._require_may_change(request.job_id, context, runs=True)
        self._admission.check_trigger(context, request.job_id)
        command = TriggerRun(
            self._clock_us(),
            request.job_id,
            audited_author(request.author),
            request.request_id or uuid.uuid4().hex,
            **_run_overrides(request, context, OVERLAPS),
        )
        result = self._submit(command, context)
        return jobs_pb2.TriggerJobResponse(run=self._runs_of(result, context)[0])

    def CancelRun(self, request, context):
        self._admission.admit_write(context)
        if not request.job_id or not request.HasField("scheduled_at"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "need a job_id and the run's scheduled_at")
        self._require_may_change(request.job_id, context, runs=True)
        scheduled_us = timestamp_us(request.scheduled_at)
        command = CancelRun(
            self._clock_us(),
            request.job_id,
            scheduled_us,
            audited_author(request.author),
            request.reason,
            request.request_id or uuid.uuid4().hex,
        )
        self._submit(command, context)
        with self._raftlog.read() as state:
            run = state.get_run(request.job_id, scheduled_us)
            return jobs_pb2.CancelRunResponse(run=run_to_pb(run) if run is not None else None)

    def BackfillJob(self, request, context):
        self._admission.admit_write(context)
        limit = min(request.max_runs or MAX_BACKFILL_SLOTS, MAX_BACKFILL_SLOTS)
        rate_per_s = request.rate_per_s or 1.0
        if not (math.isfinite(rate_per_s) and rate_per_s > 0) or not request.HasField("to"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "need a positive finite rate_per_s and a `to` instant")
        start_us, end_us = timestamp_us(getattr(request, "from")), timestamp_us(request.to)
        with self._raftlog.read() as state:
            job = state.jobs.get(request.job_id)
            spec = job.spec if job else None
        if spec is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"job {request.job_id!r} does not exist")
        require(context, job_change_denial, spec.id, spec.owner)
        require(context, jobs_target_denial, [(spec.id, spec.owner, spec.target_kind, spec.target)])
        cap = self._admission.backfill_cap(spec.owner, limit)
        fires = [owed.fire for owed in owed_fires_between(spec, start_us - 1, end_us, cap)]
        self._admission.check_backfill(context, spec.owner, len(fires))
        command = BackfillRuns(
            self._clock_us(),
            request.job_id,
            audited_author(request.author),
            request.request_id or uuid.uuid4().hex,
            tuple(fire.at_us for fire in fires),
            int(SECOND_US / rate_per_s),
            **_run_overrides(request, context, BACKFILL_OVERLAPS),
        )
        result = self._submit(command, context)
        already = sum(1 for e in result.events if isinstance(e, ev.RunAlreadyClaimed))
        return jobs_pb2.BackfillJobResponse(runs=self._runs_of(result, context), already_ran=already)

    def _runs_of(self, result: Result, context) -> list[pb.Run]:
        with self._raftlog.read() as state:
            return [
                run_to_pb(state.get_run(e.job_id, e.scheduled_us))
                for e in result.events
                if isinstance(e, ev.RunClaimed) and state.get_run(e.job_id, e.scheduled_us) is not None
            ]

    # -- reads ---------------------------------------------------------------
    def _job_or_abort(self, job_id: str, context) -> pb.Job:
        with self._raftlog.read() as state:
            job = state.jobs.get(job_id)
            if job is not None:
                return scoped_job_pb(job, self._reader.herd_window_us, state.dependents.get(job_id, ()))
        context.abort(grpc.StatusCode.NOT_FOUND, f"job {job_id!r} does not exist")

    def GetJob(self, request, context):
        if (answer := self._reader.linearizable(context, request, _JOB_METHODS["GetJob"])) is not None:
            return answer
        job = self._job_or_abort(request.job_id, context)
        return jobs_pb2.GetJobResponse(job=job, read=self._reader.read_info(request.linearizable))

    def ListCalendars(self, request, context):
        if (answer := self._reader.linearizable(context, request, _JOB_METHODS["ListCalendars"])) is not None:
            return answer
        with self._raftlog.read() as state:
            calendars = [calendar_to_pb(state.calendars[name]) for name in sorted(state.calendars)]
        return jobs_pb2.ListCalendarsResponse(calendars=calendars, read=self._reader.read_info(request.linearizable))

    def ListRoutes(self, request, context):
        if (answer := self._reader.linearizable(context, request, _JOB_METHODS["ListRoutes"])) is not None:
            return answer
        caller = current_principal()
        redact = caller is not None and caller.role != ADMIN  # a route url may be a secret
        with self._raftlog.read() as state:
            held = state.routes if state.routes is not msgspec.UNSET else {}
            routes = [route_to_pb(held[name], redact) for name in sorted(held)]
        return jobs_pb2.ListRoutesResponse(
            routes=routes, redacted=redact, read=self._reader.read_info(request.linearizable)
        )

    def ListJobs(self, request, context):
        if (answer := self._reader.linearizable(context, request, _JOB_METHODS["ListJobs"])) is not None:
            return answer
        limit = page_size(request.page_size)
        selected: list[model.Job] = []
        with self._raftlog.read() as state:
            ids = self._job_ids.sorted_ids(state, request.owner)
            for position in range(bisect.bisect_right(ids, request.page_token), len(ids)):
                job = state.jobs[ids[position]]
                # `body`, not `spec`: a spec is a copy made per read.
                if request.owner and job.body.owner != request.owner:
                    continue  # it moved to another owner since the owner's list was built
                if request.job_class and job.body.job_class != request.job_class:
                    continue
                selected.append(job)
                if len(selected) > limit:
                    break
            window_us, dependents = self._reader.herd_window_us, state.dependents
            page = [scoped_job_pb(job, window_us, dependents.get(job.id, ())) for job in selected[:limit]]
        next_token = selected[limit - 1].spec.id if len(selected) > limit else ""
        return jobs_pb2.ListJobsResponse(
            jobs=page, next_page_token=next_token, read=self._reader.read_info(request.linearizable)
        )
