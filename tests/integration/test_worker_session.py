"""WorkerService.Session against a real cluster: grants only against credits, heartbeats and
outcomes answered on the stream (a stale one fenced exactly as the unary call fences it), a
follower that names the leader, and a worker that carries on when the leader dies."""

from __future__ import annotations

import queue
import threading

import grpc
import pytest

from scheduler.core.model import JobSpec
from scheduler.local import LocalCluster, wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb
from tests.integration.conftest import FAST_RAFT, free_port_base
from worker import Worker
from worker.api.v1 import worker_pb2 as wpb
from worker.api.v1 import worker_pb2_grpc
from worker.api.v1.metadata import LEADER_ADDRESS

pytestmark = pytest.mark.integration

ANSWER_S = 15.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("session"),
        nodes=3,
        port_base=free_port_base(3),
        overrides={**FAST_RAFT, "lease_ttl_s": 2.0},
    )
    cluster.start()
    cluster.wait_for_leader()
    yield cluster
    cluster.stop()


def leader_of(cluster):
    return cluster.member(cluster.wait_for_leader())


def trigger_jobs(cluster, prefix: str, target: str, n: int) -> list[str]:
    jobs = [
        JobSpec(id=f"{prefix}-{i}", schedule="0 0 1 1 *", target_kind="handler", target=target, jitter="pinned")
        for i in range(n)
    ]
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(job) for job in jobs], author="test")
        return [client.trigger_job(job_id=job.id, author="test").run.run_key for job in jobs]


def statuses(cluster, node_id: str, run_keys: list[str]) -> list[str]:
    with cluster.client(node_id) as client:  # the leader: it answers what it applied
        return [STATUS_FROM_PB[client.get_run(run_key=key).run.status] for key in run_keys]


class RawSession:
    """A session driven by hand: every message the node sends lands in `inbox`."""

    def __init__(self, address: str, worker_id: str, targets: list[str]) -> None:
        self.channel = grpc.insecure_channel(address)
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.inbox: queue.Queue = queue.Queue()
        self.outbox.put(wpb.SessionRequest(open=wpb.SessionOpen(worker_id=worker_id, targets=targets)))
        self.call = worker_pb2_grpc.WorkerServiceStub(self.channel).Session(iter(self.outbox.get, None))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for message in self.call:
                self.inbox.put(message)
        except grpc.RpcError as error:
            self.inbox.put(error)

    def send(self, **fields) -> None:
        self.outbox.put(wpb.SessionRequest(**fields))

    def expect(self, kind: str):
        message = self.inbox.get(timeout=ANSWER_S)
        assert not isinstance(message, grpc.RpcError), f"the session ended: {message!r}"
        assert message.WhichOneof("kind") == kind, message
        return message

    def close(self) -> None:
        self.outbox.put(None)
        self.call.cancel()
        self.channel.close()


def ref_of(grant: wpb.LeaseGrant) -> wpb.LeaseRef:
    return wpb.LeaseRef(job_id=grant.job_id, scheduled_at=grant.scheduled_at, fencing_token=grant.fencing_token)


def success(worker_id: str, grant: wpb.LeaseGrant) -> wpb.CompleteRequest:
    return wpb.CompleteRequest(worker_id=worker_id, lease=ref_of(grant), kind=wpb.SUCCESS)


def test_grants_never_exceed_the_credits_and_a_stale_outcome_is_fenced_as_unary(cluster):
    keys = trigger_jobs(cluster, "credits", "s.credits", 5)
    leader = leader_of(cluster)
    session = RawSession(leader.grpc_address, "w-raw", ["s.credits"])
    try:
        session.expect("opened")
        session.send(credits=2)
        grants = list(session.expect("grants").grants.leases)
        while len(grants) < 2:
            grants += session.expect("grants").grants.leases
        assert len(grants) == 2
        # Answered on the session, in order with what came before it: the node holds no credit now.
        session.send(seq=1, heartbeat=wpb.HeartbeatRequest(worker_id="w-raw", leases=[ref_of(g) for g in grants]))
        beat = session.expect("heartbeat")
        assert beat.seq == 1 and [r.outcome for r in beat.heartbeat.results] == [wpb.OK, wpb.OK]
        assert sorted(statuses(cluster, leader.node_id, keys)) == ["leased"] * 2 + ["queued"] * 3
        session.send(credits=1)
        third = session.expect("grants").grants.leases
        assert len(third) == 1
        assert sorted(statuses(cluster, leader.node_id, keys)) == ["leased"] * 3 + ["queued"] * 2

        session.send(
            seq=2,
            complete=wpb.CompleteManyRequest(worker_id="w-raw", completions=[success("w-raw", g) for g in grants]),
        )
        done = session.expect("complete")
        assert done.seq == 2 and [r.outcome for r in done.complete.results] == [wpb.OK, wpb.OK]

        # The third lease is not heartbeated: it expires (TTL 2 s).
        stale = third[0]
        wait_until(lambda: statuses(cluster, leader.node_id, [stale.run_key]) != ["leased"], 30, "the lease to expire")
        expired = statuses(cluster, leader.node_id, [stale.run_key])
        request = wpb.CompleteManyRequest(worker_id="w-raw", completions=[success("w-raw", stale)])
        session.send(seq=3, complete=request)
        fenced = session.expect("complete")
        with cluster.client(leader.node_id) as client:
            unary = client.complete_many(request)
        assert fenced.seq == 3 and list(fenced.complete.results) == list(unary.results)
        assert fenced.complete.results[0].outcome == wpb.FENCED
        assert statuses(cluster, leader.node_id, [stale.run_key]) == expired
        # A message the unary call would refuse is refused alone; the session goes on.
        session.send(seq=4, heartbeat=wpb.HeartbeatRequest(worker_id=""))
        refused = session.expect("refused")
        assert refused.seq == 4 and refused.refused.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        session.send(seq=5, heartbeat=wpb.HeartbeatRequest(worker_id="w-raw", leases=[ref_of(stale)]))
        assert session.expect("heartbeat").seq == 5
    finally:
        session.close()


def test_a_follower_ends_a_session_naming_the_leader(cluster):
    leader = leader_of(cluster)
    follower = next(m for m in cluster.members if m.node_id != leader.node_id)

    def named() -> bool:
        session = RawSession(follower.grpc_address, "w-probe", ["s.nothing"])
        try:
            ended = session.inbox.get(timeout=ANSWER_S)
        finally:
            session.close()
        assert isinstance(ended, grpc.RpcError) and ended.code() == grpc.StatusCode.UNAVAILABLE, ended
        # A follower learns who leads from the leader's first append.
        return dict(ended.trailing_metadata() or ()).get(LEADER_ADDRESS) == leader.grpc_address

    wait_until(named, 30, "the follower to name the leader")


def run_worker(cluster, worker_id: str, addresses: list[str], stream: bool, target: str):
    ran: list[str] = []
    worker = Worker(
        addresses,
        concurrency=2,
        worker_id=worker_id,
        handlers={target: lambda ctx: ran.append(ctx.run_key)},
        lease_wait_s=1.0,
        drain_timeout_s=2.0,
        stream=stream,
    )
    unary_leases: list[int] = []
    worker.start()
    real = worker._lease_client.lease
    worker._lease_client.lease = lambda *a, **k: unary_leases.append(1) or real(*a, **k)
    return worker, ran, unary_leases


def test_without_streams_the_worker_leases_with_unary_calls(cluster):
    worker, ran, unary_leases = run_worker(cluster, "w-unary", cluster.addresses, stream=False, target="s.unary")
    try:
        keys = trigger_jobs(cluster, "unary", "s.unary", 2)
        wait_until(lambda: set(ran) == set(keys), 30, "both runs to run")
        assert unary_leases and worker._calls.session is None
    finally:
        worker.stop()


def test_the_worker_follows_the_leader_on_a_session_and_carries_on_when_it_dies(cluster):
    leader = leader_of(cluster)
    followers_first = sorted(cluster.addresses, key=lambda address: address == leader.grpc_address)
    worker, ran, unary_leases = run_worker(cluster, "w-session", followers_first, stream=True, target="s.work")
    try:
        wait_until(lambda: worker._calls.session is not None, 30, "a session to open")
        assert worker._calls.session.address == leader.grpc_address
        keys = trigger_jobs(cluster, "before", "s.work", 4)
        wait_until(lambda: statuses(cluster, leader.node_id, keys) == ["succeeded"] * 4, 30, "the runs to succeed")
        assert unary_leases == []  # every grant came on the session

        cluster.kill(leader.node_id)
        new_leader = cluster.member(cluster.wait_for_leader(exclude=(leader.node_id,)))
        keys = trigger_jobs(cluster, "after", "s.work", 4)
        wait_until(
            lambda: statuses(cluster, new_leader.node_id, keys) == ["succeeded"] * 4, 60, "the runs to succeed after"
        )
        session = worker._calls.session
        assert session is None or session.address == new_leader.grpc_address
        wait_until(
            lambda: worker._calls.session is not None and worker._calls.session.address == new_leader.grpc_address,
            30,
            "a session on the new leader",
        )
    finally:
        worker.stop()
        cluster.start(leader.node_id)
