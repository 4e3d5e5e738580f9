"""Job dependencies on real nodes with a shell worker: a parent every 2 s that fails on some slots,
a child after it (and a grandchild), and a fan-in child of two parents; each child slot ran or was
skipped naming the parent that did not succeed. One cluster for the module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from scheduler.cli.runs import explain
from scheduler.core.model import SECOND_US, JobSpec, RetryPolicy
from scheduler.local import LocalCluster, wait_until
from scheduler.planning import format_us
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb, timestamp_us
from tests.integration.conftest import FAST_RAFT, assert_clean_logs, free_port_base
from worker.api.v1 import runs_pb2

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# The slot's second, from RAFTCRON_SCHEDULED_AT (…THH:MM:SSZ); `1$s - 100` keeps "08" out of octal.
SECOND = "$(( 1$(echo $RAFTCRON_SCHEDULED_AT | cut -c18-19) - 100 ))"
ONCE = RetryPolicy(max_attempts=1)


def _shell(job_id: str, command: str, **fields) -> JobSpec:
    return JobSpec(id=job_id, target_kind="shell", target=command, retry=ONCE, jitter="pinned", **fields)


# extract fails on slots whose second is 2 mod 4; fa on those that are 0 mod 8.
JOBS = (
    _shell("extract", f"test $(( {SECOND} % 4 )) -ne 2", schedule="*/2 * * * * *"),
    _shell("fa", f"test $(( {SECOND} % 8 )) -ne 0", schedule="*/2 * * * * *"),
    _shell("load", "true", schedule="", after=("extract",)),
    _shell("report", "true", schedule="", after=("load",)),
    _shell("both", "true", schedule="", after=("extract", "fa")),
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("deps"), nodes=3, port_base=free_port_base(3), overrides=FAST_RAFT)
    worker = None
    try:
        cluster.start()
        cluster.wait_for_leader()
        with cluster.client(timeout_s=10) as client:
            wait_until(lambda: client.status().cluster_version >= 3, 30, "the cluster version to reach 3")
            client.apply_jobs(jobs=[spec_to_pb(spec) for spec in JOBS], author="test")
        log = open(cluster.data_dir / "worker.log", "ab")
        command = [sys.executable, "-m", "scheduler.cli", "worker", "--cluster", cluster.cluster_arg]
        worker = subprocess.Popen(
            [*command, "--shell", "--worker-id", "w1", "--concurrency", "8", "--lease-wait", "1"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        yield cluster
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=30)
        cluster.stop()


def _runs(client, job_id: str) -> dict[int, runs_pb2.Run]:
    response = client.list_runs(runs_pb2.ListRunsRequest(job_id=job_id, page_size=1000, newest_first=False))
    return {timestamp_us(run.scheduled_at): run for run in response.runs}


def _status(run) -> str:
    return STATUS_FROM_PB.get(run.status, "")


FINAL = {"succeeded", "failed", "skipped", "missed", "cancelled", "timed_out"}


def test_children_run_or_skip_per_parent_slot(cluster):
    with cluster.client(timeout_s=10) as client:

        def decided() -> list[int]:
            """Slots every job has decided (final), the grandchild included."""
            runs = {job.id: _runs(client, job.id) for job in JOBS}
            return [
                s for s in runs["extract"] if all(_status(runs[j].get(s, 0) or runs_pb2.Run()) in FINAL for j in runs)
            ]

        wait_until(lambda: len(decided()) >= 4, 40, "four slots decided down every chain")
        runs = {job.id: _runs(client, job.id) for job in JOBS}
        slots = decided()
        for slot_us in slots:
            second = slot_us // SECOND_US % 60
            key = format_us(slot_us)
            load, report, both = runs["load"][slot_us], runs["report"][slot_us], runs["both"][slot_us]
            assert load.kind == report.kind == both.kind == "dependency"
            if second % 4 == 2:  # extract failed
                assert (_status(load), load.reason) == ("skipped", f"parent extract@{slot_us} failed"), key
                assert (_status(report), report.reason) == ("skipped", f"parent load@{slot_us} skipped"), key
                assert (_status(both), both.reason) == ("skipped", f"parent extract@{slot_us} failed"), key
            elif second % 8 == 0:  # fa failed, extract succeeded
                assert _status(load) == _status(report) == "succeeded", key
                assert (_status(both), both.reason) == ("skipped", f"parent fa@{slot_us} failed"), key
            else:
                assert _status(load) == _status(report) == _status(both) == "succeeded", key
        assert {slot // SECOND_US % 4 for slot in slots} == {0, 2}, "both outcomes were seen"
        failed = next(s for s in slots if s // SECOND_US % 4 == 2)
        text = explain(client, "load", format_us(failed), as_json=False)
        assert f"parent extract@{format_us(failed)} failed" in text and "runs before: report" in text
    cluster.wait_converged()
    assert_clean_logs(cluster)


def test_a_cycle_and_a_parent_removal_are_refused_with_the_jobs_named(cluster):
    with cluster.client(timeout_s=10) as client:
        cycle = _shell("extract", "true", schedule="", after=("report",))
        for dry_run in (True, False):  # `raftcron plan` refuses what the apply would
            with pytest.raises(grpc.RpcError) as refused:
                client.apply_jobs(jobs=[spec_to_pb(cycle)], author="test", dry_run=dry_run)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "makes a cycle (extract -> report -> load -> extract)" in refused.value.details()
        with pytest.raises(grpc.RpcError) as refused:
            client.delete_job(job_id="fa", author="test")
        assert "'fa' cannot be removed: 'both' runs after it" in refused.value.details()
