"""Stop the whole cluster across several slots, restart it: every slot ends with an outcome
its job's misfire policy explains, and none is lost or doubled."""

from __future__ import annotations

import signal
import time

import pytest

from scheduler.core.model import SECOND_US, JobSpec, MisfirePolicy
from scheduler.local import wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb, timestamp_us
from tests.integration.conftest import assert_clean_logs
from worker.api.v1 import runs_pb2

pytestmark = pytest.mark.integration

OUTAGE_S = 6
GRACE_US = 2 * SECOND_US
JOBS = {
    "fire-late": MisfirePolicy(policy="fire_late", grace_us=GRACE_US),
    "skip": MisfirePolicy(policy="skip", grace_us=GRACE_US),
    "catch-up": MisfirePolicy(policy="catch_up", grace_us=GRACE_US, max_catch_up=2),
    "paused": MisfirePolicy(),
}


def _runs(cluster, job_id: str) -> list:
    with cluster.client(timeout_s=10) as client:
        response = client.list_runs(runs_pb2.ListRunsRequest(job_id=job_id, page_size=1000, newest_first=False))
    return list(response.runs)


def test_every_slot_of_an_outage_is_accounted_by_policy(make_cluster):
    cluster = make_cluster(3)
    cluster.start()
    cluster.wait_for_leader()
    # Paused from the start (in its spec), so no slot of it can be claimed before the pause.
    specs = [
        JobSpec(
            id=job_id,
            schedule="* * * * * *",
            target_kind="handler",
            target="noop",
            jitter="pinned",
            misfire=policy,
            paused=job_id == "paused",
        )
        for job_id, policy in JOBS.items()
    ]
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(s) for s in specs], author="test")
    wait_until(lambda: all(len(_runs(cluster, j)) >= 2 for j in JOBS), 20, "slots before the outage")

    for member in cluster.members:
        cluster.kill(member.node_id, signal.SIGKILL)
    outage_start_us = time.time_ns() // 1000
    time.sleep(OUTAGE_S)  # the fault itself: the whole cluster is down for this long
    cluster.start()
    cluster.wait_for_leader()
    restarted_us = time.time_ns() // 1000
    wait_until(
        lambda: all(timestamp_us(_runs(cluster, j)[-1].scheduled_at) > restarted_us for j in JOBS),
        30,
        "every job to account past the restart",
    )

    for job_id, policy in JOBS.items():
        runs = _runs(cluster, job_id)
        instants = [timestamp_us(r.scheduled_at) for r in runs]
        assert instants == sorted(set(instants)), f"{job_id}: a slot doubled"
        gaps = [b - a for a, b in zip(instants, instants[1:]) if b - a != SECOND_US]
        assert not gaps, f"{job_id}: slots vanished: {gaps}"
        in_outage = [r for r in runs if outage_start_us < timestamp_us(r.scheduled_at) < restarted_us - GRACE_US]
        assert len(in_outage) >= OUTAGE_S - 3, f"{job_id}: expected several slots inside the outage"
        late = [r for r in runs if timestamp_us(r.claimed_at) - timestamp_us(r.scheduled_at) > policy.grace_us]
        statuses = [STATUS_FROM_PB[r.status] for r in late]
        if job_id == "paused":
            assert {STATUS_FROM_PB[r.status] for r in runs} == {"skipped"}
            assert all(r.reason == "paused" for r in runs)
        elif job_id == "fire-late":
            assert statuses and set(statuses) == {"missed"}, statuses
            assert all("not firing" in r.reason for r in late)
        elif job_id == "skip":
            assert statuses and set(statuses) == {"skipped"}, statuses
        else:
            assert statuses[-policy.max_catch_up :] == ["queued"] * policy.max_catch_up, statuses
            assert set(statuses[: -policy.max_catch_up]) == {"missed"}, statuses
        on_time = [r for r in runs if r not in late and job_id != "paused"]
        assert all(STATUS_FROM_PB[r.status] == "queued" for r in on_time), job_id
    cluster.wait_converged()
    assert_clean_logs(cluster)
