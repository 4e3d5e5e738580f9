"""Each attempt keeps its own output: stdout and stderr tails, exception type, HTTP status."""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core import decode_snapshot, encode_command, encode_snapshot
from scheduler.core.commands import CompleteRuns, Expiry, SetClusterVersion
from scheduler.core.log_format import required_log_format
from scheduler.core.model import QUEUED, SECOND_US, SUCCEEDED, RetryPolicy
from scheduler.core.vocabulary import ExpiryReason, FenceReason
from tests.fakes import T0_US, Core, FakeClock, claim, completion, lease_ref, run_ref, spec, upsert

TEN_S = 10 * SECOND_US
SLOT = T0_US + TEN_S


def _core() -> Core:
    core = Core(FakeClock())
    core.lead()
    assert core.apply(SetClusterVersion(core.clock.tick(), 3, core.state.epoch)).accepted
    core.advance(T0_US + 2 * SECOND_US)
    retry = RetryPolicy(max_attempts=5, backoff_initial_us=SECOND_US, backoff_max_us=SECOND_US)
    core.apply_jobs((upsert(spec("a", retry=retry), next_due_us=SLOT),))
    assert core.claim_runs(claim("a", SLOT, SLOT + TEN_S)).accepted
    return core


def _attempt(core: Core, **fields):
    core.advance(core.state.get_run("a", SLOT).not_before_us)
    assert core.grant(run_ref("a", SLOT)).accepted
    return core.complete(completion(lease_ref("a", SLOT, core.index), **fields))


def test_each_attempt_keeps_its_own_streams_and_how_it_ended() -> None:
    core = _core()
    _attempt(core, outcome="failure", exit_code=3, error="exit code 3", stdout_tail="one\n", stderr_tail="bad\n")
    assert core.state.get_run("a", SLOT).status == QUEUED
    _attempt(core, outcome="failure", error="KeyError: 'x'", exception_type="KeyError", stderr_tail="Traceback")
    _attempt(core, outcome="success", stdout_tail="pong", http_status=200)
    run = core.state.get_run("a", SLOT)
    assert run.status == SUCCEEDED
    first, second, third = run.attempts
    assert (first.stdout_tail, first.stderr_tail, first.exit_code) == ("one\n", "bad\n", 3)
    assert (first.exception_type, first.http_status) == (UNSET, UNSET)
    assert (second.exception_type, second.stderr_tail, second.stdout_tail) == ("KeyError", "Traceback", UNSET)
    assert (third.stdout_tail, third.http_status, third.stderr_tail) == ("pong", 200, UNSET)


def test_a_completion_without_output_leaves_the_attempt_as_before() -> None:
    core = _core()
    _attempt(core, outcome="success", output_tail="combined\n")
    (attempt,) = core.state.get_run("a", SLOT).attempts
    assert (attempt.stdout_tail, attempt.stderr_tail, attempt.exception_type, attempt.http_status) == (UNSET,) * 4
    assert core.state.get_run("a", SLOT).output_tail == "combined\n"


def test_only_a_completion_with_attempt_output_needs_log_format_3() -> None:
    lease = lease_ref("a", 1, 2)
    quiet = CompleteRuns(1, (completion(lease, outcome="success", output_tail="x"),))
    assert required_log_format(quiet) == 1
    assert b"stdout_tail" not in encode_command(quiet)
    for field, value in (("stdout_tail", "x"), ("stderr_tail", "y"), ("exception_type", "E"), ("http_status", 500)):
        assert required_log_format(CompleteRuns(1, (completion(lease, outcome="failure", **{field: value}),))) == 3


def test_attempt_output_survives_a_snapshot() -> None:
    core = _core()
    _attempt(core, outcome="failure", stdout_tail="out", stderr_tail="err", exception_type="OSError")
    restored = decode_snapshot(encode_snapshot(core.state))
    (attempt,) = restored.get_run("a", SLOT).attempts
    assert (attempt.stdout_tail, attempt.stderr_tail, attempt.exception_type) == ("out", "err", "OSError")


def test_a_run_keeps_the_streams_of_its_first_attempt_and_its_last_two() -> None:
    core = _core()
    for number in range(1, 6):
        _attempt(core, outcome="failure", error=f"try {number}", stdout_tail=f"out {number}", exception_type="E")
    attempts = core.state.get_run("a", SLOT).attempts
    assert [a.stdout_tail for a in attempts] == ["out 1", UNSET, UNSET, "out 4", "out 5"]
    assert [a.error for a in attempts] == [f"try {n}" for n in range(1, 6)]  # how each ended stays
    assert {a.exception_type for a in attempts} == {"E"}


def _timed_out_attempt(core: Core, worker_id: str = "w1") -> int:
    """Lease the run and let the reaper end the attempt `timed_out`; the attempt's token."""
    core.advance(core.state.get_run("a", SLOT).not_before_us)
    assert core.grant(run_ref("a", SLOT), worker_id=worker_id).accepted
    token = core.index
    run = core.state.get_run("a", SLOT)
    core.advance(run.deadline_us)
    assert core.expire(Expiry(lease_ref("a", SLOT, token), ExpiryReason.TIMED_OUT)).accepted
    assert run.attempts[-1].outcome == ExpiryReason.TIMED_OUT
    return token


def test_a_late_report_of_an_attempt_the_reaper_timed_out_keeps_its_output_not_its_outcome() -> None:
    core = _core()
    token = _timed_out_attempt(core)
    run = core.state.get_run("a", SLOT)
    status, reason = run.status, run.reason
    late = completion(lease_ref("a", SLOT, token), outcome="failure", error="deadline exceeded", stdout_tail="hang\n")
    (event,) = core.complete(late).events
    assert event.reason == FenceReason.NOT_LEASED  # the worker is still told its outcome was discarded
    (attempt,) = run.attempts
    assert (attempt.outcome, attempt.stdout_tail, attempt.error) == (
        ExpiryReason.TIMED_OUT,
        "hang\n",
        "maximum runtime exceeded",
    )
    assert (run.status, run.reason) == (status, reason)
    # Once: a second report changes nothing.
    core.complete(completion(lease_ref("a", SLOT, token), outcome="failure", stdout_tail="other\n"))
    assert attempt.stdout_tail == "hang\n"


def test_a_late_report_after_the_run_was_leased_again_lands_on_its_own_attempt() -> None:
    core = _core()
    first = _timed_out_attempt(core)
    second = _timed_out_attempt(core)
    core.complete(completion(lease_ref("a", SLOT, first), outcome="failure", stdout_tail="first\n"))
    run = core.state.get_run("a", SLOT)
    assert [a.stdout_tail for a in run.attempts] == ["first\n", UNSET]
    assert second != first


def test_no_late_output_from_another_worker_or_onto_an_attempt_that_reported_itself() -> None:
    core = _core()
    token = _timed_out_attempt(core, worker_id="w1")
    core.complete(completion(lease_ref("a", SLOT, token), outcome="failure", stdout_tail="x", worker_id="w2"))
    assert core.state.get_run("a", SLOT).attempts[0].stdout_tail is UNSET
    # An attempt that ended by its own report keeps what that report said.
    _attempt(core, outcome="failure", error="exit code 1", stdout_tail="mine\n")
    reported = core.state.get_run("a", SLOT).attempts[-1]
    core.complete(completion(lease_ref("a", SLOT, reported.fencing_token), outcome="failure", stdout_tail="again\n"))
    assert reported.stdout_tail == "mine\n"


def test_before_format_3_a_late_report_changes_nothing() -> None:
    core = Core(FakeClock())
    core.lead()
    core.advance(T0_US + 2 * SECOND_US)
    core.apply_jobs((upsert(spec("a"), next_due_us=SLOT),))
    assert core.claim_runs(claim("a", SLOT, SLOT + TEN_S)).accepted
    token = _timed_out_attempt(core)
    core.complete(completion(lease_ref("a", SLOT, token), outcome="failure", stdout_tail="hang\n"))
    assert core.state.get_run("a", SLOT).attempts[0].stdout_tail is UNSET
