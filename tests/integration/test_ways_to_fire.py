"""A multi-schedule job and an `every:` job applied to real nodes: once the cluster version is 3
they fire, each run of the multi-schedule job names the schedule that produced it, and the
interval job's slots are whole multiples of its interval."""

from __future__ import annotations

import pytest

from scheduler.core.model import SECOND_US, JobSpec
from scheduler.local import wait_until
from scheduler.rpc.convert import spec_to_pb, timestamp_us
from tests.integration.conftest import assert_clean_logs
from worker.api.v1 import runs_pb2

pytestmark = pytest.mark.integration

EVERY_US = 2 * SECOND_US


def _runs(cluster, job_id: str) -> list:
    with cluster.client(timeout_s=10) as client:
        response = client.list_runs(runs_pb2.ListRunsRequest(job_id=job_id, page_size=1000, newest_first=False))
    return list(response.runs)


def _cluster_version(cluster) -> int:
    with cluster.client(timeout_s=10) as client:
        return client.status().cluster_version


def test_a_multi_schedule_job_and_an_interval_job_fire_and_read_back(make_cluster):
    cluster = make_cluster(3)
    cluster.start()
    cluster.wait_for_leader()
    # The leader raises the version once every voter has advertised format 3 in its keepalives.
    wait_until(lambda: _cluster_version(cluster) >= 3, 30, "the cluster version to reach 3")
    multi = JobSpec(
        id="multi",
        schedule="",
        schedules=("*/2 * * * * *", "*/3 * * * * *"),  # every 2nd and every 3rd second: 0 and 6 from both
        target_kind="handler",
        target="noop",
        jitter="pinned",
    )
    interval = JobSpec(
        id="interval", schedule="", every_us=EVERY_US, target_kind="handler", target="noop", jitter="pinned"
    )
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(multi), spec_to_pb(interval)], author="test")
    wait_until(lambda: len(_runs(cluster, "multi")) >= 8, 30, "runs of the multi-schedule job")
    wait_until(lambda: len(_runs(cluster, "interval")) >= 3, 30, "runs of the interval job")

    runs = _runs(cluster, "multi")
    instants = [timestamp_us(r.scheduled_at) for r in runs]
    assert instants == sorted(set(instants)), "an instant fired twice"
    for run, at_us in zip(runs, instants):
        second = at_us // SECOND_US
        assert second % 2 == 0 or second % 3 == 0, f"{at_us} is in neither schedule"
        assert run.HasField("schedule_index")
        assert run.schedule_index == (0 if second % 2 == 0 else 1), f"{second}: first schedule that hits it"
    # The union has no holes: every instant of either schedule between the first and last run is there.
    first, last = instants[0] // SECOND_US, instants[-1] // SECOND_US
    assert [s * SECOND_US for s in range(first, last + 1) if s % 2 == 0 or s % 3 == 0] == instants

    interval_instants = [timestamp_us(r.scheduled_at) for r in _runs(cluster, "interval")]
    assert all(at_us % EVERY_US == 0 for at_us in interval_instants)
    assert [b - a for a, b in zip(interval_instants, interval_instants[1:])] == [EVERY_US] * (
        len(interval_instants) - 1
    )
    assert not any(r.HasField("schedule_index") for r in _runs(cluster, "interval"))
    cluster.wait_converged()
    assert_clean_logs(cluster)
