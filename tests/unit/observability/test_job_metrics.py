"""Per-job series: last success (and its duration) and last failure, capped by metrics_max_jobs."""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace

import pytest

from scheduler.core.commands import AdvanceTime
from scheduler.core.model import RetryPolicy
from scheduler.core.state import State
from scheduler.observability import build_registry
from scheduler.observability.job_metrics import JobOutcomes
from tests.unit.observability.test_observability import T0, Cluster, FakeRaftLog, S, make_config, spec, value

ONE_SHOT = RetryPolicy(max_attempts=1)


def _setup(max_jobs: int = 1000):
    config = dataclasses.replace(make_config(), metrics_max_jobs=max_jobs)
    log = FakeRaftLog(config)
    registry, observer = build_registry(log, config, lambda: None, lambda: 1)
    log.add_apply_listener(observer)
    return SimpleNamespace(log=log, registry=registry, observer=observer, cluster=Cluster(log))


def _run_once(c: Cluster, job: str, slot: int, took_s: int, outcome: str = "success") -> None:
    c.at(slot)
    c.claim((job, slot, slot + 10 * S))
    (grant,) = c.grant((job, slot))
    c.at(slot + took_s * S)
    c.log.apply(AdvanceTime(c.now_us, c.epoch, monotonic_us=c.now_us - T0))  # replicated time moves on
    c.complete(job, slot, grant.fencing_token, outcome)


def test_last_success_its_duration_and_last_failure_per_job() -> None:
    t = _setup()
    t.cluster.jobs(spec("payroll", owner="finance", retry=ONE_SHOT), spec("quiet"))
    slot = T0 + 10 * S
    _run_once(t.cluster, "payroll", slot, 3)
    _run_once(t.cluster, "payroll", slot + 10 * S, 1, outcome="failure")
    labels = {"job": "payroll", "owner": "finance"}
    assert value(t.registry, "raftcron_job_last_success_timestamp_seconds", **labels) == (slot + 3 * S) / S
    assert value(t.registry, "raftcron_job_last_success_duration_seconds", **labels) == 3
    assert value(t.registry, "raftcron_job_last_failure_timestamp_seconds", **labels) == (slot + 11 * S) / S
    # A job that never ended a run has no series (absent(), not a fake 0, is the alert).
    assert value(t.registry, "raftcron_job_last_success_timestamp_seconds", job="quiet", owner="") is None
    assert value(t.registry, "raftcron_job_metrics_dropped_jobs") == 0


def test_past_the_cap_only_the_first_jobs_by_id_have_series_and_the_rest_are_counted() -> None:
    t = _setup(max_jobs=2)
    t.cluster.jobs(spec("c"), spec("a"), spec("b"))
    c, slot = t.cluster, T0 + 10 * S
    c.at(slot)
    c.claim(*((job, slot, slot + 10 * S) for job in "abc"))
    for grant, job in zip(c.grant(*((job, slot) for job in "abc")), "abc"):
        c.complete(job, slot, grant.fencing_token)
    success = "raftcron_job_last_success_timestamp_seconds"
    assert [value(t.registry, success, job=j, owner="") is not None for j in "abc"] == [True, True, False]
    assert value(t.registry, "raftcron_job_metrics_dropped_jobs") == 1
    t.cluster.jobs(removals=("a",), request_id="r2")  # a removal frees a place: c gets its series
    assert value(t.registry, success, job="c", owner="") is not None
    assert value(t.registry, "raftcron_job_metrics_dropped_jobs") == 0


def test_a_restored_snapshot_looks_the_last_outcomes_up_from_the_runs() -> None:
    t = _setup()
    t.cluster.jobs(spec("a", retry=ONE_SHOT))
    slot = T0 + 10 * S
    _run_once(t.cluster, "a", slot, 2)
    _run_once(t.cluster, "a", slot + 10 * S, 1, outcome="failure")
    t.log.restore_snapshot()
    assert value(t.registry, "raftcron_job_last_success_timestamp_seconds", job="a", owner="") == (slot + 2 * S) / S
    assert value(t.registry, "raftcron_job_last_success_duration_seconds", job="a", owner="") == 2
    assert value(t.registry, "raftcron_job_last_failure_timestamp_seconds", job="a", owner="") == (slot + 11 * S) / S


@pytest.mark.parametrize("jobs", [100_000])
def test_a_scrape_with_100000_jobs_stays_cheap(jobs: int) -> None:
    state = State()
    for i in range(jobs):
        state.jobs[f"job-{i:06d}"] = SimpleNamespace(body=SimpleNamespace(owner="team"))
    outcomes = JobOutcomes(max_jobs=1000)
    outcomes.gather(state)  # the first scrape picks the jobs and looks them up once
    started = time.perf_counter()
    for _ in range(10):
        gathered = outcomes.gather(state)
    per_scrape_s = (time.perf_counter() - started) / 10
    assert len(gathered["rows"]) == 1000 and gathered["dropped"] == jobs - 1000
    assert per_scrape_s < 0.05, per_scrape_s  # about 1 ms measured; generous for a loaded host
