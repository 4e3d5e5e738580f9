"""A fake WorkerService on a real in-process gRPC server, shared by the worker SDK tests.

The fake grants leases from a scripted queue, records every Lease, Heartbeat and Complete call,
and answers FENCED (or any LeaseOutcome) for a fencing token on demand. It counts how many
leases are outstanding (granted and not completed) so tests can check a worker's concurrency
from the cluster's side.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import grpc

from worker.api.v1 import common_pb2, worker_pb2, worker_pb2_grpc

WAIT_S = 5.0  # how long a test waits for a condition before failing
SLOT = datetime(2026, 1, 1, 2, 0, tzinfo=timezone.utc)


def make_grant(
    job_id: str = "job",
    token: int = 1,
    *,
    handler: str | None = None,
    shell: str | None = None,
    ttl_s: float = 3.0,
    deadline_s: float | None = 30.0,
    payload=None,
    attempt: int = 1,
    scheduled_at: datetime = SLOT,
) -> worker_pb2.LeaseGrant:
    """A grant for `job_id` at `scheduled_at`; the target is `handler` (default job_id) or `shell`."""
    target = common_pb2.Target(shell=shell) if shell is not None else common_pb2.Target(handler=handler or job_id)
    grant = worker_pb2.LeaseGrant(
        job_id=job_id,
        run_key=f"{job_id}@{scheduled_at.strftime('%Y-%m-%dT%H:%M:%SZ')}",
        fencing_token=token,
        attempt=attempt,
        target=target,
        payload_json="" if payload is None else json.dumps(payload),
    )
    grant.scheduled_at.FromDatetime(scheduled_at)
    grant.lease_ttl.FromNanoseconds(round(ttl_s * 1e9))
    if deadline_s is not None:
        grant.deadline.FromDatetime(datetime.now(timezone.utc) + timedelta(seconds=deadline_s))
    return grant


def _matches(grant: worker_pb2.LeaseGrant, targets) -> bool:
    if not targets:
        return True
    kind = grant.target.WhichOneof("kind")
    return (grant.target.handler if kind == "handler" else kind) in targets


class FakeWorkerService(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.queue: list[worker_pb2.LeaseGrant] = []
        self.lease_requests: list[worker_pb2.LeaseRequest] = []
        self.lease_call_times: list[float] = []
        self.heartbeats: list[worker_pb2.HeartbeatRequest] = []
        self.completions: list[worker_pb2.CompleteRequest] = []  # the ones answered
        self.complete_attempts = 0
        self.heartbeat_verdicts: dict[int, int] = {}  # token -> LeaseOutcome
        self.complete_verdicts: dict[int, int] = {}
        self.fail_leases: grpc.StatusCode | None = None
        self.fail_heartbeats = 0  # the next N Heartbeat calls fail UNAVAILABLE
        self.fail_completes = 0  # the next N Complete calls fail UNAVAILABLE
        self.complete_many = True  # False: an older node, CompleteMany answers UNIMPLEMENTED
        self.complete_many_calls: list[int] = []  # completions per CompleteMany call
        self.extra_grants = 0  # grant this many more than max_runs (a misbehaving server)
        self.ignore_targets = False  # grant whatever is queued (a misbehaving server)
        self.max_wait_s: float | None = None  # cap the long poll (None: honour `wait`)
        self.leader_address = ""  # answered with every Lease, as a follower that forwarded it does
        self.outstanding: set[int] = set()
        self.max_outstanding = 0
        self.completes_held = threading.Event()  # set: every Complete waits until it is cleared
        self.completes_held_count = 0  # Complete calls waiting now

    # Scripting
    def add(self, *grants: worker_pb2.LeaseGrant) -> None:
        with self.cond:
            self.queue.extend(grants)
            self.cond.notify_all()

    def fence(self, token: int, outcome: int = worker_pb2.FENCED) -> None:
        with self.cond:
            self.heartbeat_verdicts[token] = outcome
            self.complete_verdicts[token] = outcome

    def release_completes(self) -> None:
        with self.cond:
            self.completes_held.clear()
            self.cond.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float = WAIT_S) -> bool:
        with self.cond:
            return self.cond.wait_for(predicate, timeout_s)

    def completion(self, token: int) -> worker_pb2.CompleteRequest | None:
        with self.cond:
            return next((c for c in self.completions if c.lease.fencing_token == token), None)

    def completed_tokens(self) -> list[int]:
        with self.cond:
            return [c.lease.fencing_token for c in self.completions]

    # WorkerService
    def Lease(self, request, context):  # noqa: N802 (gRPC method name)
        wait_s = request.wait.ToNanoseconds() / 1e9 if request.HasField("wait") else 0.0
        if self.max_wait_s is not None:
            wait_s = min(wait_s, self.max_wait_s)
        give_up_at = time.monotonic() + wait_s
        with self.cond:
            self.lease_requests.append(request)
            self.lease_call_times.append(time.monotonic())
            self.cond.notify_all()
            if self.fail_leases is not None:
                context.abort(self.fail_leases, "fake: lease fails on purpose")
            while context.is_active():
                matching = [g for g in self.queue if self.ignore_targets or _matches(g, request.targets)]
                left_s = give_up_at - time.monotonic()
                if matching or left_s <= 0:
                    break
                self.cond.wait(min(left_s, 0.05))
            granted = matching[: max(1, request.max_runs) + self.extra_grants] if context.is_active() else []
            for grant in granted:
                self.queue.remove(grant)
                self.outstanding.add(grant.fencing_token)
            self.max_outstanding = max(self.max_outstanding, len(self.outstanding))
            self.cond.notify_all()
        return worker_pb2.LeaseResponse(leases=granted, leader_address=self.leader_address)

    def Heartbeat(self, request, context):  # noqa: N802 (gRPC method name)
        with self.cond:
            if self.fail_heartbeats > 0:
                self.fail_heartbeats -= 1
                self.cond.notify_all()
                context.abort(grpc.StatusCode.UNAVAILABLE, "fake: heartbeat fails on purpose")
            self.heartbeats.append(request)
            results = [
                worker_pb2.LeaseResult(lease=ref, outcome=self.heartbeat_verdicts.get(ref.fencing_token, worker_pb2.OK))
                for ref in request.leases
            ]
            self.cond.notify_all()
        return worker_pb2.HeartbeatResponse(results=results)

    def Complete(self, request, context):  # noqa: N802 (gRPC method name)
        with self.cond:
            self.complete_attempts += 1
            self.cond.notify_all()
            if self.completes_held.is_set():
                self.completes_held_count += 1
                self.cond.notify_all()
                self.cond.wait_for(lambda: not self.completes_held.is_set() or not context.is_active(), WAIT_S)
                self.completes_held_count -= 1
            if self.fail_completes > 0:
                self.fail_completes -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "fake: complete fails on purpose")
            self.completions.append(request)
            self.outstanding.discard(request.lease.fencing_token)
            outcome = self.complete_verdicts.get(request.lease.fencing_token, worker_pb2.OK)
            self.cond.notify_all()
        return worker_pb2.CompleteResponse(outcome=outcome)

    def CompleteMany(self, request, context):  # noqa: N802 (gRPC method name)
        if not self.complete_many:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "fake: an older node without CompleteMany")
        with self.cond:
            self.complete_many_calls.append(len(request.completions))
        # Each completion as if sent alone; a failing one fails the whole call, as a real node would.
        return worker_pb2.CompleteManyResponse(results=[self.Complete(item, context) for item in request.completions])


@contextmanager
def fake_cluster(service: FakeWorkerService | None = None) -> Iterator[tuple[FakeWorkerService, str]]:
    """Serve a FakeWorkerService on 127.0.0.1:<free port>; yields it and its address."""
    service = service or FakeWorkerService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield service, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def closed_address() -> str:
    """A loopback address on which nothing listens (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def wait_until(predicate: Callable[[], bool], timeout_s: float = WAIT_S, step_s: float = 0.01) -> bool:
    """Poll `predicate` until it holds or `timeout_s` passes (for state outside the fake)."""
    give_up_at = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= give_up_at:
            return False
        time.sleep(step_s)
    return True


def test_fake_grants_only_matching_targets_and_at_most_max_runs() -> None:
    with fake_cluster() as (service, address):
        later = SLOT + timedelta(hours=1)
        service.add(make_grant("a", 1), make_grant("b", 2), make_grant("a", 3, scheduled_at=later))
        channel = grpc.insecure_channel(address)
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        response = stub.Lease(worker_pb2.LeaseRequest(worker_id="w", targets=["a"], max_runs=1), timeout=WAIT_S)
        assert [g.fencing_token for g in response.leases] == [1]
        response = stub.Lease(worker_pb2.LeaseRequest(worker_id="w", targets=["a", "b"], max_runs=5), timeout=WAIT_S)
        assert [g.fencing_token for g in response.leases] == [2, 3]
        channel.close()
