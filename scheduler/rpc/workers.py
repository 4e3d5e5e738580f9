"""WorkerService: lease, heartbeat and complete. Translation only; the leader's dispatcher
chooses runs, coalescers batch heartbeats and completions into few log entries."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable

import grpc

from scheduler.core import results as ev
from scheduler.core.commands import CompleteRuns, Completion, ExtendLeases, LeaseRef
from scheduler.core.execution import OUTCOME_FAILURE, OUTCOME_RETRY_LATER, OUTCOME_SUCCESS
from scheduler.core.model import SECOND_US
from scheduler.leader.batcher import Coalescer, RejectedBatch, Submission
from scheduler.leader.dispatch import Dispatcher, Granted, NotLeading, target_key
from scheduler.replication import RaftLog, ReplicationError
from scheduler.rpc.convert import duration, duration_us, printable_run_key, target_to_pb, timestamp, timestamp_us
from scheduler.rpc.errors import abort_replication
from scheduler.security.interceptor import caller_authorization, current_principal, require
from scheduler.security.policy import lease_denial, run_denial
from worker.api.v1 import worker_pb2 as wpb
from worker.api.v1 import worker_pb2_grpc

MAX_RUNS_PER_LEASE = 1000
MAX_LEASES_PER_HEARTBEAT = 10_000
_KINDS = {wpb.SUCCESS: OUTCOME_SUCCESS, wpb.FAILURE: OUTCOME_FAILURE, wpb.RETRY_LATER: OUTCOME_RETRY_LATER}
_FENCE_OUTCOMES = {"not_found": wpb.NOT_FOUND, "cancelled": wpb.RUN_CANCELLED}


def _lease_ref(ref: wpb.LeaseRef) -> LeaseRef:
    return LeaseRef(ref.job_id, timestamp_us(ref.scheduled_at), ref.fencing_token)


def _fenced_outcome(event) -> int:
    return _FENCE_OUTCOMES.get(event.reason, wpb.FENCED)


def _grant_to_pb(granted: Granted) -> wpb.LeaseGrant:
    run, event = granted.run, granted.event
    return wpb.LeaseGrant(
        job_id=run.job_id,
        scheduled_at=timestamp(run.scheduled_us),
        run_key=printable_run_key(run.job_id, run.scheduled_us),
        fencing_token=event.fencing_token,
        attempt=event.attempt,
        deadline=timestamp(event.deadline_us),
        lease_ttl=duration(run.lease_ttl_us),
        target=target_to_pb(granted.spec),  # not spec_to_pb: a grant needs the target alone
        payload_json=granted.spec.payload_json,
    )


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(
        self,
        raftlog: RaftLog,
        dispatcher_now: Callable[[], Dispatcher | None],
        leader_grpc_address: Callable[[], str],
        clock_us: Callable[[], int],
        timeout_s: float,
        max_lease_wait_s: float,
        forward_credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._raftlog = raftlog
        self._dispatcher_now = dispatcher_now
        self._leader_grpc_address = leader_grpc_address
        self._timeout_s = timeout_s
        self._max_lease_wait_s = max_lease_wait_s
        self._clock_us = clock_us
        self._forward_credentials = forward_credentials
        self._channels: dict[str, grpc.Channel] = {}
        self._channels_lock = threading.Lock()
        self._extend = Coalescer("extend", raftlog, self._extend_command, timeout_s)
        self._complete = Coalescer("complete", raftlog, self._complete_command, timeout_s)

    def close(self) -> None:
        self._extend.close()
        self._complete.close()
        with self._channels_lock:
            channels, self._channels = self._channels, {}
        for channel in channels.values():
            channel.close()

    def _extend_command(self, leases) -> ExtendLeases:
        return ExtendLeases(self._clock_us(), tuple(leases))

    def _complete_command(self, completions) -> CompleteRuns:
        return CompleteRuns(self._clock_us(), tuple(completions))

    # -- Lease: only the leader's dispatcher grants; other nodes forward ----------
    def Lease(self, request: wpb.LeaseRequest, context):
        wait_s = min(duration_us(request, "wait", 0) / SECOND_US, self._max_lease_wait_s)
        max_runs = min(max(request.max_runs, 1), MAX_RUNS_PER_LEASE)
        require(context, lease_denial, list(request.targets))
        dispatcher = self._dispatcher_now()
        if dispatcher is None:
            return self._forward_lease(request, wait_s, context)
        try:
            granted = dispatcher.lease(request.worker_id, list(request.targets), max_runs, wait_s)
        except NotLeading as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"not leading: {exc}")
        except ReplicationError as exc:
            abort_replication(context, exc)
        return wpb.LeaseResponse(leases=[_grant_to_pb(g) for g in granted])

    def _forward_lease(self, request, wait_s: float, context):
        address = self._leader_grpc_address()
        if not address:
            context.abort(grpc.StatusCode.UNAVAILABLE, "no leader known; retry shortly")
        stub = worker_pb2_grpc.WorkerServiceStub(self._channel_to(address))
        try:
            # On the caller's behalf: the leader authorizes the same token again.
            response = stub.Lease(request, timeout=wait_s + self._timeout_s, metadata=caller_authorization(context))
        except grpc.RpcError as exc:
            context.abort(exc.code(), f"via leader {address}: {exc.details()}")
        response.leader_address = address  # so the worker can lease there directly next time
        return response

    def _channel_to(self, address: str) -> grpc.Channel:
        with self._channels_lock:
            channel = self._channels.get(address)
            if channel is None:
                credentials = self._forward_credentials
                channel = grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
                self._channels[address] = channel
            return channel

    def _foreign_runs(self, refs: Iterable[wpb.LeaseRef]) -> dict[int, str]:
        """Position -> why, for runs of targets the caller may not serve. The target is the job's
        current one: a run whose job moved to another target is reported by that target's workers."""
        principal = current_principal()
        if principal is None or principal.serves_every_target:
            return {}
        foreign = {}
        with self._raftlog.read() as state:
            for position, ref in enumerate(refs):
                job = state.jobs.get(ref.job_id)
                if job is not None:  # no job: the run is cancelled, and the core answers so
                    run_key = printable_run_key(ref.job_id, timestamp_us(ref.scheduled_at))
                    if denial := run_denial(principal, run_key, target_key(job.spec)):
                        foreign[position] = denial
        return foreign

    # -- Heartbeat and Complete: any node, coalesced into few entries -------------
    def Heartbeat(self, request: wpb.HeartbeatRequest, context):
        if len(request.leases) > MAX_LEASES_PER_HEARTBEAT:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"at most {MAX_LEASES_PER_HEARTBEAT} leases per heartbeat")
        # Another target's run is never extended. A batch of only such runs is refused; in a mixed
        # batch they are answered NOT_FOUND, so one retargeted job does not cost a worker its other leases.
        foreign = self._foreign_runs(request.leases)
        if foreign and len(foreign) == len(request.leases):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, next(iter(foreign.values())))
        mine = [ref for position, ref in enumerate(request.leases) if position not in foreign]
        extended = iter(self._wait(self._extend.submit([_lease_ref(ref) for ref in mine]), context))
        results = []
        for position, ref in enumerate(request.leases):
            if position in foreign:
                results.append(wpb.LeaseResult(lease=ref, outcome=wpb.NOT_FOUND))
                continue
            event = next(extended)
            if isinstance(event, ev.LeaseExtended):
                results.append(wpb.LeaseResult(lease=ref, outcome=wpb.OK, expires_at=timestamp(event.lease_expires_us)))
            else:
                results.append(wpb.LeaseResult(lease=ref, outcome=_fenced_outcome(event)))
        return wpb.HeartbeatResponse(results=results)

    def Complete(self, request: wpb.CompleteRequest, context):
        if request.kind not in _KINDS:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "kind must be SUCCESS, FAILURE or RETRY_LATER")
        if foreign := self._foreign_runs([request.lease]):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, foreign[0])
        (event,) = self._wait(self._complete.submit([_completion(request)]), context)
        return _complete_response(event)

    def CompleteMany(self, request: wpb.CompleteManyRequest, context):
        """Every completion goes to the coalescer at once: usually one entry for the whole call."""
        if any(item.kind not in _KINDS for item in request.completions):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "every kind must be SUCCESS, FAILURE or RETRY_LATER")
        foreign = self._foreign_runs(item.lease for item in request.completions)
        if foreign and len(foreign) == len(request.completions):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, next(iter(foreign.values())))
        mine = [item for position, item in enumerate(request.completions) if position not in foreign]
        submitted = iter(self._wait(self._complete.submit([_completion(item) for item in mine]), context))
        results = []
        for position in range(len(request.completions)):
            if position in foreign:
                results.append(wpb.CompleteResponse(outcome=wpb.NOT_FOUND))
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


def _completion(request: wpb.CompleteRequest) -> Completion:
    return Completion(
        lease=_lease_ref(request.lease),
        worker_id=request.worker_id,
        outcome=_KINDS[request.kind],
        exit_code=request.exit_code,
        error=request.error[:4096],
        output_tail=request.output_tail[-4096:],
        retry_after_us=duration_us(request, "retry_after", 0),
        jitter_ppm=random.randrange(1_000_000),
    )


def _complete_response(event) -> wpb.CompleteResponse:
    if isinstance(event, ev.LeaseFenced):
        return wpb.CompleteResponse(outcome=_fenced_outcome(event))
    return wpb.CompleteResponse(outcome=wpb.OK)
