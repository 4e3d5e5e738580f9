"""Finding 12: a submitter could create unlimited jobs, backfills and writes. Probes against a
real node with small quotas: each excess is refused RESOURCE_EXHAUSTED naming the limit, nothing
of it is applied, and the node keeps answering (Status in time, the same term)."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
import yaml

from scheduler.core.model import JobSpec
from scheduler.local import LocalCluster, wait_until
from scheduler.rpc.convert import spec_to_pb, timestamp
from scheduler.rpc.quotas import RETRY_AFTER_KEY
from scheduler.security.devcerts import ensure_dev_credentials
from scheduler.security.principals import ADMIN, SUBMITTER, Principal, principals_document
from tests.security.conftest import FAST_RAFT, free_port_base

pytestmark = [pytest.mark.security, pytest.mark.integration]

PRINCIPALS = [
    Principal("admin", ADMIN),
    Principal("fin", SUBMITTER, owners=("finance",)),
    Principal("burst", SUBMITTER, owners=("burst",)),
]
QUOTAS = {"max_jobs_per_owner": 5, "max_backfill_runs_per_call": 20, "writes_per_s": 1.0, "write_burst": 10}


def every_second(job_id: str, owner: str) -> JobSpec:
    return JobSpec(
        id=job_id, schedule="* * * * * *", target_kind="handler", target="reports.build", owner=owner, jitter="pinned"
    )


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    directory = tmp_path_factory.mktemp("quotas")
    credentials = ensure_dev_credentials(directory / "credentials")
    tokens = [(p, f"token-of-{p.name}-0123456789") for p in PRINCIPALS]
    (credentials.directory / "principals.yaml").write_text(yaml.safe_dump(principals_document(tokens)))
    for principal, token in tokens:
        Path(credentials.token_file(principal.name)).write_text(token)
    cluster = LocalCluster(
        directory,
        nodes=1,
        port_base=free_port_base(1),
        credentials=credentials,
        overrides={**FAST_RAFT, "quotas": QUOTAS},
    )
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        yield cluster
    finally:
        cluster.stop()


def refused(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value.details()
    return caught.value


def assert_responsive(cluster: LocalCluster, term: int) -> None:
    status = cluster.status("n1")
    assert status is not None and status.role == "leader" and status.term == term


def test_jobs_past_the_owner_quota_are_refused(node):
    term = node.status("n1").term
    with node.client(role="fin", timeout_s=10) as fin:
        fin.apply_jobs(jobs=[spec_to_pb(every_second(f"fin-{i}", "finance")) for i in range(4)])
        error = refused(
            lambda: fin.apply_jobs(jobs=[spec_to_pb(every_second(f"fin-{i}", "finance")) for i in range(4, 7)])
        )
        assert "owner 'finance' has 4 jobs and this adds 3; the limit is 5" in error.details()
        assert {job.spec.id for job in fin.list_jobs(owner="finance").jobs} == {f"fin-{i}" for i in range(4)}
        fin.apply_jobs(jobs=[spec_to_pb(every_second("fin-4", "finance"))])  # up to the limit is fine
    assert_responsive(node, term)


def test_a_backfill_past_its_size_is_refused(node):
    term = node.status("n1").term
    with node.client(role="fin", timeout_s=10) as fin:
        wait_until(lambda: fin.get_job(job_id="fin-0").job.spec.id, 10, "fin-0 applied")
        now_us = int(time.time() * 1e6)
        backfill = dict(
            job_id="fin-0",
            rate_per_s=1000.0,
            to=timestamp(now_us - 2_000_000),
            **{"from": timestamp(now_us - 200_000_000)},
        )
        error = refused(lambda: fin.backfill_job(**backfill))
        assert "backfill of 21 runs for owner 'finance'; the limit per call is 20" in error.details()
        runs = fin.list_runs(job_id="fin-0", page_size=1000).runs
        assert not [run for run in runs if run.scheduled_at.seconds < (now_us - 150_000_000) // 1_000_000]
    assert_responsive(node, term)


def test_a_burst_of_writes_past_the_rate_is_refused_with_a_retry_hint(node):
    term = node.status("n1").term
    with node.client(role="admin", timeout_s=10) as admin:
        admin.apply_jobs(jobs=[spec_to_pb(every_second("burst-job", "burst"))])
    with node.client(role="burst", timeout_s=10) as burst:
        wait_until(lambda: burst.get_job(job_id="burst-job").job.spec.id, 10, "burst-job applied")
        codes = []
        for i in range(40):
            try:
                burst.pause_job(job_id="burst-job", reason=f"probe {i}")
                codes.append("OK")
            except grpc.RpcError as error:
                codes.append(error.code().name)
                last = error
        assert codes.count("RESOURCE_EXHAUSTED") >= 20, codes
        assert codes.count("OK") <= 15, codes
        assert "principal 'burst' is over its write rate" in last.details()
        assert float(dict(last.trailing_metadata())[RETRY_AFTER_KEY]) > 0
    with node.client(role="fin", timeout_s=10) as fin:  # another principal has its own budget
        fin.pause_job(job_id="fin-1", reason="still admitted")
    assert_responsive(node, term)
