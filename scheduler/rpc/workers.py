"""WorkerService: lease, heartbeat and complete. Translation only; the leader's dispatcher
chooses runs, coalescers batch heartbeats and completions into few log entries."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

import grpc

from scheduler.core import results as ev
from scheduler.core.commands import CompleteRuns, Completion, ExtendLeases, LeaseRef, ReadBarrier
from scheduler.core.log_format import ATTEMPT_OUTPUT_FORMAT
from scheduler.core.model import SECOND_US, run_payload_json
from scheduler.core.vocabulary import FenceReason, LeaseOutcome
from scheduler.leader.dispatch import Dispatcher, Granted, NotLeading, target_key
from scheduler.leader.worker_registry import WorkerRegistry
from scheduler.replication import RaftLog, ReplicationError
from scheduler.replication.coalescer import Coalescer, RejectedBatch, Submission
from scheduler.rpc.attempt_output import (
    DEFAULT_OUTPUT_TAIL_BYTES,
    attempt_output,
    has_attempt_output,
    without_attempt_output,
)
from scheduler.rpc.convert import (
    COMPLETION_FROM_PB,
    LEASE_OUTCOME_TO_PB,
    duration_us,
    printable_run_key,
    target_to_pb,
    timestamp,
    timestamp_us,
)
from scheduler.rpc.errors import abort_replication
from scheduler.rpc.forwarding import LeaderForwarder, forward_timeout_s
from scheduler.rpc.limits import DEFAULT_LIMITS, RpcLimits
from scheduler.rpc.worker_session import serve_session
from scheduler.security.interceptor import current_principal, require
from scheduler.security.policy import held_by, holder_denial, holder_of_token, lease_denial, lease_holder, run_denial
from worker.api.v1 import worker_pb2 as wpb
from worker.api.v1 import worker_pb2_grpc

MAX_RUNS_PER_LEASE = 1000
MAX_LEASES_PER_HEARTBEAT = 10_000
# A fence reason not named here answers FENCED.
_FENCE_OUTCOMES = {
    FenceReason.NOT_FOUND: LEASE_OUTCOME_TO_PB[LeaseOutcome.NOT_FOUND],
    FenceReason.CANCELLED: LEASE_OUTCOME_TO_PB[LeaseOutcome.RUN_CANCELLED],
}
_FENCED = LEASE_OUTCOME_TO_PB[LeaseOutcome.FENCED]
_LEASE = wpb.DESCRIPTOR.services_by_name["WorkerService"].methods_by_name["Lease"]


def _lease_ref(ref: wpb.LeaseRef) -> LeaseRef:
    return LeaseRef(ref.job_id, timestamp_us(ref.scheduled_at), ref.fencing_token)


def _fenced_outcome(event) -> int:
    return _FENCE_OUTCOMES.get(event.reason, _FENCED)


def _grant_to_pb(granted: Granted) -> wpb.LeaseGrant:
    run, event = granted.run, granted.event
    grant = wpb.LeaseGrant(
        job_id=run.job_id,
        run_key=printable_run_key(run.job_id, run.scheduled_us),
        fencing_token=event.fencing_token,
        attempt=event.attempt,
        target=target_to_pb(granted.spec),  # not spec_to_pb: a grant needs the target alone
        payload_json=run_payload_json(run, granted.spec),
    )
    # Set in place rather than built and copied in: the leader converts every run it grants.
    if run.scheduled_us:  # a zero instant stays unset, as timestamp() leaves it
        _set_us(grant.scheduled_at, run.scheduled_us)
    if event.deadline_us:
        _set_us(grant.deadline, event.deadline_us)
    _set_us(grant.lease_ttl, run.lease_ttl_us)
    return grant


def _set_us(message, us: int) -> None:
    """Set a Timestamp or Duration (present, even at zero) to `us` microseconds."""
    message.seconds, micros = divmod(us, 1_000_000)
    message.nanos = micros * 1000


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(
        self,
        raftlog: RaftLog,
        dispatcher_now: Callable[[], Dispatcher | None],
        forwarder: LeaderForwarder,
        clock_us: Callable[[], int],
        timeout_s: float,
        max_lease_wait_s: float,
        registry: WorkerRegistry | None = None,
        output_tail_bytes: int = DEFAULT_OUTPUT_TAIL_BYTES,
        limits: RpcLimits = DEFAULT_LIMITS,
    ) -> None:
        self._raftlog = raftlog
        self.limits = limits
        self._output_tail_bytes = output_tail_bytes
        # What the dashboard's workers page shows: the calls this node heard while leading.
        self.registry = registry if registry is not None else WorkerRegistry()
        self._dispatcher_now = dispatcher_now
        self._forwarder = forwarder
        self._timeout_s = timeout_s
        self._max_lease_wait_s = max_lease_wait_s
        self._clock_us = clock_us
        self._extend = Coalescer("extend", raftlog, self._extend_command, timeout_s)
        self._complete = Coalescer("complete", raftlog, self._complete_command, timeout_s)

    def close(self) -> None:
        self._extend.close()
        self._complete.close()

    def _extend_command(self, leases) -> ExtendLeases:
        return ExtendLeases(self._clock_us(), tuple(leases))

    def _complete_command(self, completions) -> CompleteRuns:
        completions = tuple(completions)
        if any(has_attempt_output(c) for c in completions) and self._cluster_version() < ATTEMPT_OUTPUT_FORMAT:
            # A rolling upgrade: older nodes could not read the fields; the combined tail stays.
            completions = tuple(without_attempt_output(c) for c in completions)
        return CompleteRuns(self._clock_us(), completions)

    def _cluster_version(self) -> int:
        with self._raftlog.read() as state:
            return state.cluster_version

    # -- Session: the leader's long-lived stream per worker (worker_session.py) ---
    def Session(self, request_iterator, context):
        return serve_session(self, request_iterator, context)

    def dispatcher_now(self) -> Dispatcher | None:
        return self._dispatcher_now()

    def leader_address(self) -> str:
        """The leader's gRPC address as this node knows it; "" if none is known or it is this node."""
        return self._forwarder.known_leader()

    @staticmethod
    def grants_to_pb(granted: list[Granted]) -> wpb.LeaseResponse:
        return wpb.LeaseResponse(leases=[_grant_to_pb(g) for g in granted])

    # -- Lease: only the leader's dispatcher grants; other nodes forward ----------
    def Lease(self, request: wpb.LeaseRequest, context):
        wait_s = min(duration_us(request, "wait", 0) / SECOND_US, self._max_lease_wait_s)
        max_runs = min(max(request.max_runs, 1), MAX_RUNS_PER_LEASE)
        require(context, lease_denial, list(request.targets))
        dispatcher = self._dispatcher_now()
        if dispatcher is None:
            return self._forward_lease(request, wait_s, context)
        try:
            holder = lease_holder(current_principal(), request.worker_id)
            self.registry.leased(holder, request.targets, context.peer())
            granted = dispatcher.lease(holder, list(request.targets), max_runs, wait_s)
        except NotLeading as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"not leading: {exc}")
        except ReplicationError as exc:
            abort_replication(context, exc)
        return wpb.LeaseResponse(leases=[_grant_to_pb(g) for g in granted])

    def _forward_lease(self, request, wait_s: float, context):
        address = self._forwarder.leader(context)
        # Not past the caller's deadline: a long poll it gave up on would hold a lease wait here.
        budget_s = wait_s + self._timeout_s
        response = self._forwarder.call(
            context, address, _LEASE, request, forward_timeout_s(context, budget_s, cap_s=budget_s)
        )
        response.leader_address = address  # so the worker can lease there directly next time
        return response

    def _refused(self, refs: Iterable[wpb.LeaseRef], context) -> dict[int, tuple[int, str]]:
        """Position -> (batch answer, why) for the leases the caller may not report: runs of a
        target it does not serve (NOT_FOUND; the target is the job's current one: a run whose job
        moved to another target is reported by that target's workers), and leases granted to
        another principal (FENCED). A lease this replica does not know yet is looked up again
        after a read barrier, and refused if it is still unknown: it is never proposed unchecked,
        where a guessed token could complete a lease granted in between."""
        principal = current_principal()
        if principal is None:
            return {}
        refs = list(refs)
        refused, unknown = self._check_refs(principal, refs, range(len(refs)))
        if unknown:
            try:
                if self._raftlog.is_leader():  # a read index costs no log entry
                    self._raftlog.read_index(self._timeout_s)
                else:
                    self._raftlog.submit(ReadBarrier(issued_at_us=self._clock_us()), self._timeout_s)
            except ReplicationError as exc:
                abort_replication(context, exc)
            again, unknown = self._check_refs(principal, refs, unknown)
            refused.update(again)
            for position in unknown:
                ref = refs[position]
                run_key = printable_run_key(ref.job_id, timestamp_us(ref.scheduled_at))
                refused[position] = (wpb.NOT_FOUND, f"no lease {ref.fencing_token} of {run_key} is known; refused")
        return refused

    def _check_refs(
        self, principal, refs: list[wpb.LeaseRef], positions
    ) -> tuple[dict[int, tuple[int, str]], list[int]]:
        """The state lock is held only for lookups (the Raft thread waits for it): one scope check
        per target, a run lookup per lease; refusals are worded after it is released."""
        foreign_target, foreign_holder, unknown, served = [], [], [], {}
        with self._raftlog.read() as state:
            for position in positions:
                ref = refs[position]
                scheduled_us = timestamp_us(ref.scheduled_at)
                job = state.jobs.get(ref.job_id)
                if job is not None and not principal.serves_every_target:
                    target = target_key(job.body)
                    allowed = served.get(target)
                    if allowed is None:
                        allowed = served[target] = principal.serves(target)
                    if not allowed:
                        foreign_target.append((position, scheduled_us, target))
                        continue
                run = state.get_run(ref.job_id, scheduled_us)
                holder = holder_of_token(run, ref.fencing_token) if run is not None else None
                if holder is None:
                    unknown.append(position)
                elif not held_by(principal, holder):
                    foreign_holder.append((position, scheduled_us, holder))
        refused = {}
        for position, scheduled_us, target in foreign_target:
            run_key = printable_run_key(refs[position].job_id, scheduled_us)
            refused[position] = (wpb.NOT_FOUND, run_denial(principal, run_key, target))
        for position, scheduled_us, holder in foreign_holder:
            ref = refs[position]
            run_key = printable_run_key(ref.job_id, scheduled_us)
            refused[position] = (wpb.FENCED, holder_denial(principal, run_key, ref.fencing_token, holder))
        return refused, unknown

    # -- Heartbeat and Complete: any node, coalesced into few entries -------------
    def Heartbeat(self, request: wpb.HeartbeatRequest, context):
        if len(request.leases) > MAX_LEASES_PER_HEARTBEAT:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"at most {MAX_LEASES_PER_HEARTBEAT} leases per heartbeat")
        # A lease the caller may not report is never extended. A batch of only such leases is
        # refused; in a mixed batch each is answered on its own, so one retargeted job does not
        # cost a worker its other leases.
        refused = self._refused(request.leases, context)
        if refused and len(refused) == len(request.leases):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, next(iter(refused.values()))[1])
        mine = [ref for position, ref in enumerate(request.leases) if position not in refused]
        if self._dispatcher_now() is not None:
            holder = lease_holder(current_principal(), request.worker_id)
            self.registry.heartbeat(holder, len(mine), context.peer())
        extended = iter(self._wait(self._extend.submit([_lease_ref(ref) for ref in mine]), context))
        results = []
        for position, ref in enumerate(request.leases):
            if position in refused:
                results.append(wpb.LeaseResult(lease=ref, outcome=refused[position][0]))
                continue
            event = next(extended)
            if isinstance(event, ev.LeaseExtended):
                results.append(wpb.LeaseResult(lease=ref, outcome=wpb.OK, expires_at=timestamp(event.lease_expires_us)))
            else:
                results.append(wpb.LeaseResult(lease=ref, outcome=_fenced_outcome(event)))
        return wpb.HeartbeatResponse(results=results)

    def Complete(self, request: wpb.CompleteRequest, context):
        if request.kind not in COMPLETION_FROM_PB:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "kind must be SUCCESS, FAILURE or RETRY_LATER")
        if refused := self._refused([request.lease], context):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, refused[0][1])
        (event,) = self._wait(self._complete.submit([_completion(request, self._output_tail_bytes)]), context)
        return _complete_response(event)

    def CompleteMany(self, request: wpb.CompleteManyRequest, context):
        """Every completion goes to the coalescer at once: usually one entry for the whole call."""
        if any(item.kind not in COMPLETION_FROM_PB for item in request.completions):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "every kind must be SUCCESS, FAILURE or RETRY_LATER")
        refused = self._refused((item.lease for item in request.completions), context)
        if refused and len(refused) == len(request.completions):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, next(iter(refused.values()))[1])
        mine = [item for position, item in enumerate(request.completions) if position not in refused]
        submitted = iter(
            self._wait(self._complete.submit([_completion(item, self._output_tail_bytes) for item in mine]), context)
        )
        results = []
        for position in range(len(request.completions)):
            if position in refused:
                results.append(wpb.CompleteResponse(outcome=refused[position][0]))
            else:
                results.append(_complete_response(next(submitted)))
        return wpb.CompleteManyResponse(results=results)

    def _wait(self, submission: Submission, context) -> list:
        try:
            return submission.result(timeout_s=self._timeout_s + 1)
        except ReplicationError as exc:
            abort_replication(context, exc)
        except RejectedBatch as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except TimeoutError:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "outcome unknown; retry with the same token")


def _completion(request: wpb.CompleteRequest, output_tail_bytes: int) -> Completion:
    return Completion(
        lease=_lease_ref(request.lease),
        worker_id=lease_holder(current_principal(), request.worker_id),
        outcome=COMPLETION_FROM_PB[request.kind],
        exit_code=request.exit_code,
        error=request.error[:4096],
        output_tail=request.output_tail[-4096:],
        retry_after_us=duration_us(request, "retry_after", 0),
        jitter_ppm=random.randrange(1_000_000),
        # UNSET unless asked, so a completion needs no newer log format than before.
        **({"final": True} if request.final else {}),
        **attempt_output(request, output_tail_bytes),
    )


def _complete_response(event) -> wpb.CompleteResponse:
    if isinstance(event, ev.LeaseFenced):
        return wpb.CompleteResponse(outcome=_fenced_outcome(event))
    return wpb.CompleteResponse(outcome=wpb.OK)
