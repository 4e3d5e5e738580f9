"""Kill the leader while 1,000 run keys per second are being claimed: nothing doubled, nothing lost."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from scheduler.core.model import SECOND_US, JobSpec
from scheduler.local import wait_until
from scheduler.rpc.convert import spec_to_pb, timestamp_us
from tests.integration.conftest import assert_clean_logs
from worker.api.v1 import common_pb2, runs_pb2

pytestmark = pytest.mark.integration

JOBS = 1000


def _run_count(cluster, node_id: str) -> int:
    status = cluster.status(node_id)
    return status.run_count if status else -1


def _all_runs(cluster, node_id: str) -> list[tuple[str, int, str]]:
    runs, token = [], ""
    with cluster.client(node_id, timeout_s=30) as client:
        while True:
            page = client.list_runs(runs_pb2.ListRunsRequest(page_size=1000, page_token=token))
            runs += [(r.job_id, timestamp_us(r.scheduled_at), r.status) for r in page.runs]
            token = page.next_page_token
            if not token:
                return runs


def _kill_just_after_a_second_boundary(cluster, node_id: str) -> None:
    # The trigger loop claims the 1,000 keys of a second right at the boundary: a kill a
    # few milliseconds later lands while that batch is proposed or replicating.
    now = time.time()
    time.sleep(1 - (now - int(now)) + 0.004)
    cluster.kill(node_id)


def _status_leaders_via_cli(cluster) -> set[str]:
    leaders = set()
    for member in cluster.members:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "scheduler.cli",
                "--cluster",
                cluster.cluster_arg,
                "status",
                "--json",
                "--node",
                member.grpc_address,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        leaders.add(json.loads(out.stdout)["leader"])
    return leaders


def test_leader_killed_mid_claim_batch(make_cluster):
    cluster = make_cluster(3)
    cluster.start()
    first_leader = cluster.wait_for_leader()
    # A follower names the leader once the leader's first append reaches it, which can trail
    # the leader opening its epoch by a heartbeat: wait for every node to agree.
    wait_until(lambda: _status_leaders_via_cli(cluster) == {first_leader}, 15, "every node to name the leader")

    specs = [
        JobSpec(
            id=f"every-second-{i:04d}", schedule="* * * * * *", target_kind="handler", target="noop", jitter="pinned"
        )
        for i in range(JOBS)
    ]
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(s) for s in specs], author="test")
    wait_until(lambda: _run_count(cluster, first_leader) >= 3 * JOBS, 30, "three seconds of claims")

    _kill_just_after_a_second_boundary(cluster, first_leader)
    killed_at_us = time.time_ns() // 1000
    second_leader = cluster.wait_for_leader(exclude=(first_leader,))
    baseline = _run_count(cluster, second_leader)
    wait_until(lambda: _run_count(cluster, second_leader) >= baseline + 3 * JOBS, 30, "claims under the new leader")

    cluster.start(first_leader)  # the old leader comes back as a follower and catches up
    with cluster.client() as client:
        client.apply_jobs(jobs=[], prune=True, author="test")  # stop claiming so replicas can settle
    digest = cluster.wait_converged(timeout_s=30)
    assert digest

    runs_by_node = {m.node_id: _all_runs(cluster, m.node_id) for m in cluster.members}
    reference = runs_by_node[first_leader]
    for node_id, runs in runs_by_node.items():
        keys = [(job_id, scheduled_us) for job_id, scheduled_us, _ in runs]
        assert len(keys) == len(set(keys)), f"{node_id}: a run key was claimed twice"
        assert sorted(runs) == sorted(reference), f"{node_id} disagrees with {first_leader}"

    slots: dict[str, list[int]] = {}
    for job_id, scheduled_us, status in reference:
        # Never run (no worker here): queued, then cancelled when the jobs were deleted.
        assert status in (common_pb2.QUEUED, common_pb2.CANCELLED), (job_id, scheduled_us, status)
        slots.setdefault(job_id, []).append(scheduled_us)
    assert len(slots) == JOBS
    for job_id, instants in slots.items():
        instants.sort()
        gaps = [b - a for a, b in zip(instants, instants[1:]) if b - a != SECOND_US]
        assert not gaps, f"{job_id}: cursor skipped or repeated slots: {gaps[:5]}"
        assert instants[0] < killed_at_us < instants[-1], f"{job_id} did not fire across the failover"
    assert_clean_logs(cluster)
