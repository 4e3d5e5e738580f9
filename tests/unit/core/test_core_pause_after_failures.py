"""pause_after_failures: the Nth failed run in a row pauses the job, with a recorded reason and an
alert; a success in between starts the count again, and so does a resume."""

from __future__ import annotations

import pytest

from scheduler.core.commands import ApplyJobs, SetClusterVersion, SetJobPaused
from scheduler.core.log_format import required_log_format
from scheduler.core.model import SECOND_US, SKIPPED, RetryPolicy
from tests.fakes import T0_US, Core, FakeClock, claim, completion, lease_ref, run_ref, spec, upsert

TEN_S = 10 * SECOND_US


def slot(k: int) -> int:
    return T0_US + k * TEN_S


def _core(limit: int = 3, cluster_version: int = 3) -> Core:
    core = Core(FakeClock())
    core.lead()
    assert core.apply(SetClusterVersion(core.clock.tick(), cluster_version, core.state.epoch)).accepted
    core.advance(T0_US + 2 * SECOND_US)
    job = spec("a", retry=RetryPolicy(max_attempts=1), pause_after_failures=limit)
    assert core.apply_jobs((upsert(job, next_due_us=slot(1)),)).accepted
    return core


def _run(core: Core, k: int, outcome: str) -> str:
    """Claim slot k and end its one attempt with `outcome`; the claimed run's status."""
    assert core.claim_runs(claim("a", slot(k), slot(k + 1))).accepted
    run = core.state.get_run("a", slot(k))
    if run.status == SKIPPED:
        return run.status
    assert core.grant(run_ref("a", slot(k))).accepted
    core.complete(completion(lease_ref("a", slot(k), core.index), outcome=outcome, error="boom"))
    return core.state.get_run("a", slot(k)).status


def test_the_third_failure_in_a_row_pauses_the_job_with_its_reason_and_one_alert() -> None:
    core = _core(limit=3)
    assert [_run(core, k, "failure") for k in (1, 2)] == ["failed", "failed"]
    assert not core.state.jobs["a"].paused
    assert _run(core, 3, "failure") == "failed"
    job = core.state.jobs["a"]
    assert job.paused and job.paused_by == "raftcron"
    assert "paused after 3 failed runs in a row (pause_after_failures: 3)" in job.paused_reason
    (alert,) = [a for a in core.state.alerts.values() if a.kind == "paused"]
    assert (alert.scheduled_us, alert.since_us, alert.count) == (slot(3), slot(1), 3)
    assert _run(core, 4, "failure") == SKIPPED  # paused: its next slot is skipped, not run


def test_a_success_in_between_starts_the_count_again() -> None:
    core = _core(limit=2)
    _run(core, 1, "failure")
    _run(core, 2, "success")
    _run(core, 3, "failure")
    assert not core.state.jobs["a"].paused


def test_a_resume_clears_the_pause_and_the_count() -> None:
    core = _core(limit=2)
    _run(core, 1, "failure")
    _run(core, 2, "failure")
    assert core.state.jobs["a"].paused
    resume = SetJobPaused(core.clock.tick(), "a", False, "bob", "fixed upstream", "r1")
    assert core.apply(resume).accepted
    assert not core.state.jobs["a"].paused
    _run(core, 3, "failure")  # one failure after the resume: not two in a row
    assert not core.state.jobs["a"].paused


def test_reapplying_the_spec_keeps_the_jobs_own_pause() -> None:
    core = _core(limit=1)
    _run(core, 1, "failure")
    job = core.state.jobs["a"]
    assert core.apply_jobs((upsert(job.spec, expected_version=job.version, next_due_us=job.next_due_us),)).accepted
    assert core.state.jobs["a"].paused


def test_before_the_format_nothing_pauses_itself() -> None:
    core = _core(limit=1, cluster_version=2)
    _run(core, 1, "failure")
    _run(core, 2, "failure")
    assert not core.state.jobs["a"].paused


@pytest.mark.parametrize(("fields", "needed"), [({}, 1), ({"pause_after_failures": 5}, 3)])
def test_only_a_spec_with_the_limit_needs_log_format_3(fields, needed: int) -> None:
    command = ApplyJobs(1, "alice", "r", (upsert(spec("a", **fields), next_due_us=slot(1)),))
    assert required_log_format(command) == needed
