"""A failure declared final ends the run at once, whatever attempts its retry policy has left."""

from __future__ import annotations

from scheduler.core.commands import CompleteRuns, SetClusterVersion
from scheduler.core.log_format import required_log_format
from scheduler.core.model import FAILED, QUEUED, SECOND_US, SUCCEEDED, RetryPolicy
from scheduler.core.results import RunEnded, RunRetryScheduled
from tests.fakes import T0_US, Core, FakeClock, claim, completion, lease_ref, run_ref, spec, upsert

TEN_S = 10 * SECOND_US


def _leased_run(core: Core | None = None):
    core = core or Core(FakeClock())
    core.lead()
    assert core.apply(SetClusterVersion(core.clock.tick(), 3, core.state.epoch)).accepted
    core.advance(T0_US + 2 * SECOND_US)
    core.apply_jobs((upsert(spec("a", retry=RetryPolicy(max_attempts=5)), next_due_us=T0_US + TEN_S),))
    assert core.claim_runs(claim("a", T0_US + TEN_S, T0_US + 2 * TEN_S)).accepted
    assert core.grant(run_ref("a", T0_US + TEN_S)).accepted
    return core, lease_ref("a", T0_US + TEN_S, core.index)


def test_a_final_failure_is_not_retried() -> None:
    core, lease = _leased_run()
    result = core.complete(completion(lease, outcome="failure", error="account closed", final=True))
    assert result.events == (RunEnded("a", lease.scheduled_us, FAILED, "account closed; final: not retried"),)
    run = core.state.get_run("a", lease.scheduled_us)
    assert (run.status, run.attempt) == (FAILED, 1)


def test_a_plain_failure_is_retried_as_before() -> None:
    core, lease = _leased_run()
    result = core.complete(completion(lease, outcome="failure", error="flaky"))
    assert isinstance(result.events[0], RunRetryScheduled)
    assert core.state.get_run("a", lease.scheduled_us).status == QUEUED


def test_final_on_a_success_changes_nothing() -> None:
    core, lease = _leased_run()
    core.complete(completion(lease, outcome="success", final=True))
    assert core.state.get_run("a", lease.scheduled_us).status == SUCCEEDED


def test_only_a_final_completion_needs_log_format_3() -> None:
    lease = lease_ref("a", 1, 2)
    assert required_log_format(CompleteRuns(1, (completion(lease, outcome="failure"),))) == 1
    assert required_log_format(CompleteRuns(1, (completion(lease, outcome="failure", final=True),))) == 3


def _leased_shell_run(final_exit_codes):
    core = Core(FakeClock())
    core.lead()
    assert core.apply(SetClusterVersion(core.clock.tick(), 3, core.state.epoch)).accepted
    core.advance(T0_US + 2 * SECOND_US)
    retry = RetryPolicy(max_attempts=5, final_exit_codes=final_exit_codes)
    job = spec("sh", target_kind="shell", target="./import.sh", retry=retry)
    core.apply_jobs((upsert(job, next_due_us=T0_US + TEN_S),))
    assert core.claim_runs(claim("sh", T0_US + TEN_S, T0_US + 2 * TEN_S)).accepted
    assert core.grant(run_ref("sh", T0_US + TEN_S)).accepted
    return core, lease_ref("sh", T0_US + TEN_S, core.index)


def test_a_shell_exit_code_listed_final_is_not_retried_and_others_are() -> None:
    core, lease = _leased_shell_run((2,))
    ended = core.complete(completion(lease, outcome="failure", error="exit 2", exit_code=2))
    assert ended.events[0].reason == "exit 2; exit code 2 is final: not retried"
    core, lease = _leased_shell_run((2,))
    retried = core.complete(completion(lease, outcome="failure", error="exit 1", exit_code=1))
    assert isinstance(retried.events[0], RunRetryScheduled)


def test_final_exit_codes_need_log_format_3() -> None:
    from scheduler.core.commands import ApplyJobs

    job = spec("sh", target_kind="shell", target="x", retry=RetryPolicy(final_exit_codes=(2,)))
    assert required_log_format(ApplyJobs(1, "a", "r", (upsert(job),))) == 3
    assert required_log_format(ApplyJobs(1, "a", "r", (upsert(spec("sh")),))) == 1
