"""Leases belong to their principal (hostile callers, finding 10): the worker id is the client's
choice, so a token serving the same target could heartbeat, complete or fail another worker's
lease. Two worker tokens serve one target; B reports A's lease in every way it can: refused and
never applied, and A's own outcome is still accepted."""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration

from scheduler.core.model import JobSpec
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb
from scheduler.security.principals import ADMIN, WORKER, Principal
from tests.security.principals_cluster import assert_responsive, refused, secured_cluster
from worker.api.v1 import worker_pb2 as wpb

pytestmark = [pytest.mark.security, pytest.mark.integration]

PRINCIPALS = [
    Principal("admin", ADMIN),
    Principal("worker-a", WORKER, targets=("reports.*",)),
    Principal("worker-b", WORKER, targets=("reports.*",)),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = secured_cluster(tmp_path_factory.mktemp("leases"), PRINCIPALS)
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        with cluster.client(timeout_s=10) as root:
            jobs = [
                JobSpec(
                    id=f"report-{i}",
                    schedule="0 0 1 1 *",
                    target_kind="handler",
                    target="reports.build",
                    jitter="pinned",
                )
                for i in range(2)
            ]
            root.apply_jobs(jobs=[spec_to_pb(job) for job in jobs])
        yield cluster
    finally:
        cluster.stop()


def lease_one(cluster, principal: str, worker_id: str, job_id: str) -> wpb.LeaseRef:
    with cluster.client(timeout_s=10) as root:
        root.trigger_job(job_id=job_id)
    with cluster.client(role=principal, timeout_s=20) as worker:
        request = wpb.LeaseRequest(
            worker_id=worker_id, targets=["reports.build"], max_runs=1, wait=Duration(seconds=10)
        )
        (grant,) = worker.lease(request, timeout_s=20).leases
    assert grant.job_id == job_id
    return wpb.LeaseRef(job_id=grant.job_id, scheduled_at=grant.scheduled_at, fencing_token=grant.fencing_token)


def run_of(cluster, ref: wpb.LeaseRef):
    with cluster.client(timeout_s=10) as root:
        return root.get_run(job_id=ref.job_id, scheduled_at=ref.scheduled_at, linearizable=True).run


def test_another_principal_cannot_heartbeat_complete_or_fail_a_lease(cluster):
    leader = cluster.wait_for_leader()
    a_ref = lease_one(cluster, "worker-a", "a-host", "report-0")
    b_ref = lease_one(cluster, "worker-b", "b-host", "report-1")
    guessed = wpb.LeaseRef(
        job_id=a_ref.job_id, scheduled_at=a_ref.scheduled_at, fencing_token=a_ref.fencing_token + 10**6
    )
    with cluster.client(role="worker-b", timeout_s=10) as b:
        # B even claims A's worker id: the principal is what counts, not the id it sends.
        for worker_id in ("b-host", "a-host"):
            for call in (
                lambda: b.heartbeat(worker_id=worker_id, leases=[a_ref]),
                lambda: b.complete(lease=a_ref, worker_id=worker_id, kind=wpb.SUCCESS),
                lambda: b.complete(lease=a_ref, worker_id=worker_id, kind=wpb.FAILURE, error="sabotage"),
                lambda: b.complete_many(
                    worker_id=worker_id,
                    completions=[wpb.CompleteRequest(lease=a_ref, worker_id=worker_id, kind=wpb.RETRY_LATER)],
                ),
            ):
                assert "worker-b does not hold lease" in refused(call)
        # A token it guessed for A's run (a lease that does not exist yet) is refused too, unproposed.
        refused(lambda: b.complete(lease=guessed, worker_id="b-host", kind=wpb.SUCCESS))
        # In a batch with its own lease, A's is answered FENCED and B's own goes through.
        results = b.heartbeat(worker_id="b-host", leases=[a_ref, b_ref]).results
        assert [r.outcome for r in results] == [wpb.FENCED, wpb.OK]
        mixed = [wpb.CompleteRequest(lease=ref, worker_id="b-host", kind=wpb.SUCCESS) for ref in (a_ref, b_ref)]
        assert [r.outcome for r in b.complete_many(worker_id="b-host", completions=mixed).results] == [
            wpb.FENCED,
            wpb.OK,
        ]

    run = run_of(cluster, a_ref)
    assert (STATUS_FROM_PB[run.status], run.fencing_token, run.worker_id) == (
        "leased",
        a_ref.fencing_token,
        "worker-a/a-host",
    )
    assert [attempt.outcome for attempt in run.attempts] == [""]  # nothing B sent was applied
    assert STATUS_FROM_PB[run_of(cluster, b_ref).status] == "succeeded"

    # A's own heartbeat and outcome, from another of its processes too, are accepted.
    with cluster.client(role="worker-a", timeout_s=10) as a:
        assert a.heartbeat(worker_id="a-host", leases=[a_ref]).results[0].outcome == wpb.OK
        assert a.complete(lease=a_ref, worker_id="a-host-2", kind=wpb.SUCCESS).outcome == wpb.OK
    assert STATUS_FROM_PB[run_of(cluster, a_ref).status] == "succeeded"
    assert_responsive(cluster, leader)
