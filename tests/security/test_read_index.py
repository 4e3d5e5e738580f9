"""Finding 12 (reads): every linearizable read appended a log entry, so a reader could grow the
log at will. On a real 3-node cluster: linearizable reads at the leader and at a follower (which
forwards them) see every earlier write and leave the log as it was but for the leader's clock
ticks; a leader whose followers are silent refuses a linearizable read instead of answering
from what may be stale state."""

from __future__ import annotations

import signal

import grpc
import pytest

from scheduler.core.model import JobSpec
from scheduler.local import wait_until
from scheduler.rpc.convert import spec_to_pb
from tests.security.conftest import assert_clean_logs, make_cluster  # noqa: F401
from worker import ClusterClient

pytestmark = [pytest.mark.security, pytest.mark.integration]

READS = 100
YEARLY = JobSpec(
    id="yearly", schedule="0 0 1 1 *", target_kind="handler", target="reports.build", owner="ops", jitter="pinned"
)


@pytest.fixture
def cluster(make_cluster):  # noqa: F811 (the fixture imported above)
    cluster = make_cluster(3)
    cluster.start()
    leader = cluster.wait_for_leader(60)
    with cluster.client(leader, timeout_s=10) as client:
        wait_until(lambda: client.apply_jobs(jobs=[spec_to_pb(YEARLY)]), 30, "the job applied")
    return cluster


def via(cluster, node_id: str) -> ClusterClient:
    """A client that asks `node_id` first (the others only if it answers UNAVAILABLE, e.g. while
    a busy machine has the cluster electing)."""
    first = cluster.member(node_id).grpc_address
    return ClusterClient([first, *(a for a in cluster.addresses if a != first)], timeout_s=10)


def test_linearizable_reads_see_every_write_and_append_no_entry(cluster):
    leader = cluster.wait_for_leader(60)
    followers = [m.node_id for m in cluster.members if m.node_id != leader]
    with (
        via(cluster, leader) as at_leader,
        via(cluster, followers[0]) as at_follower,
        via(cluster, followers[1]) as at_other,
    ):
        for paused in (True, False, True, False):  # a write through one follower, read through the other
            (at_follower.pause_job if paused else at_follower.resume_job)(job_id="yearly", reason="probe")
            answer = at_other.get_job(job_id="yearly", linearizable=True)
            assert answer.job.paused is paused and answer.read.from_leader
        before = cluster.status(leader).commit_index
        for client in (at_leader, at_follower):
            for _ in range(READS):
                assert client.get_job(job_id="yearly", linearizable=True).job.spec.id == "yearly"
            assert client.list_runs(job_id="yearly", linearizable=True).read.from_leader
        grown = cluster.status(leader).commit_index - before
    # Only the leader's clock ticks (AdvanceTime, at most two a second while idle) may have landed.
    assert grown < READS // 2, f"{2 * READS} linearizable reads grew the log by {grown} entries"
    assert_clean_logs(cluster)


def test_a_leader_cut_off_from_its_followers_refuses_linearizable_reads(cluster):
    leader = cluster.wait_for_leader(60)
    term = cluster.status(leader).term
    followers = [m.node_id for m in cluster.members if m.node_id != leader]
    try:
        for node_id in followers:
            cluster.kill(node_id, signal.SIGSTOP)
        with cluster.client(leader, timeout_s=10) as client:
            assert client.get_job(job_id="yearly").job.spec.id == "yearly"  # a local read still answers

            def refused() -> grpc.RpcError | None:
                # Answers the followers sent before they stopped may still confirm a read or two:
                # no other leader can exist yet, so those reads are not stale.
                try:
                    client.get_job(job_id="yearly", linearizable=True)
                except grpc.RpcError as error:
                    return error
                return None

            error = wait_until(refused, 30, "a linearizable read refused", interval_s=0.01)
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
            assert "linearizable read" in error.details()
    finally:
        for node_id in followers:
            cluster.kill(node_id, signal.SIGCONT)
    cluster.wait_for_leader(60)
    assert cluster.status(followers[0]) is not None and cluster.status(followers[0]).term >= term
