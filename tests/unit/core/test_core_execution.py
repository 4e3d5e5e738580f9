"""Execution in the core: fenced leases, heartbeats, completions, expiry and retries.

Every test drives the core with explicit commands; instants are chosen at the exact
boundaries (one microsecond before, and at, a lease expiry or a deadline).
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core import (
    State,
    apply,
    decode_command,
    decode_snapshot,
    encode_command,
    encode_snapshot,
    state_digest,
)
from scheduler.core.clock import MAX_DRIFT_PPM, SLACK_US
from scheduler.core.commands import (
    AdvanceTime,
    ApplyJobs,
    ClaimLeadership,
    ClaimRuns,
    Command,
    CompleteRuns,
    Completion,
    ExpireLeases,
    Expiry,
    ExtendLeases,
    GrantLeases,
    JobUpsert,
    LeaseRef,
    RunRef,
    SlotClaim,
)
from scheduler.core.model import (
    CANCELLED,
    FAILED,
    LEASED,
    LIVE_STATUSES,
    QUEUED,
    SECOND_US,
    SUCCEEDED,
    TIMED_OUT,
    Attempt,
    RetryPolicy,
)
from scheduler.core.results import (
    ClaimOutOfPlan,
    CompletionRepeated,
    JobRemoved,
    LeadershipClaimed,
    LeaseExtended,
    LeaseFenced,
    LeaseGranted,
    LeaseNotGranted,
    LeaseStillLive,
    RunClaimed,
    RunEnded,
    RunRetryScheduled,
    RunSucceeded,
)
from scheduler.core.retry import backoff_us
from tests.fakes import (
    T0_US,
    Core,
    FakeClock,
    apply_checking_time,
    claim,
    clock_of,
    completion,
    expiry,
    lease_ref,
    run_ref,
    spec,
    upsert,
)

TEN_S = 10 * SECOND_US
TTL = 30 * SECOND_US
TIMEOUT = 120 * SECOND_US
HOUR = 3600 * SECOND_US
# Three attempts; backoff 10 s, 20 s, 40 s ... capped at 300 s (half of it fixed with jitter 0).
RETRY = RetryPolicy(max_attempts=3, backoff_initial_us=TEN_S, backoff_max_us=300 * SECOND_US, backoff_multiplier=2.0)
ONE_SHOT = RetryPolicy(max_attempts=1)


def slot(k: int) -> int:
    """The k-th slot of an every-10-seconds job."""
    return T0_US + k * TEN_S


def make_core(retry: RetryPolicy = RETRY, timeout_us: int = TIMEOUT, others: tuple = (), **fields) -> Core:
    """Epoch 1; job `a` whose slot(1) is claimed (queued) by an entry issued at slot(1).

    The jobs in `others` are added with `a` (before slot(1), so they owe it) and left unclaimed.
    """
    core = Core(FakeClock())
    core.lead()
    a = upsert(spec("a", retry=retry, timeout_us=timeout_us, **fields), next_due_us=slot(1))
    assert core.apply_jobs((a, *(upsert(other, next_due_us=slot(1)) for other in others))).accepted
    assert core.claim_runs(claim("a", slot(1), slot(2)), issued_at_us=slot(1)).accepted
    return core


@pytest.fixture
def core() -> Core:
    return make_core()


def grant_a(core: Core, at_us: int, ttl_us: int = TTL, worker_id: str = "w1") -> LeaseRef:
    """Grant slot(1) of `a` at `at_us`; returns the lease (its token is the entry's index)."""
    result = core.grant(run_ref("a", slot(1)), worker_id=worker_id, lease_ttl_us=ttl_us, issued_at_us=at_us)
    assert type(result.events[0]) is LeaseGranted, result
    return lease_ref("a", slot(1), result.events[0].fencing_token)


def run_a(core: Core):
    return core.state.get_run("a", slot(1))


def encoded(value) -> bytes:
    return msgspec.msgpack.encode(value)


# == 1. lease grant ====================================================================


def test_grant_stamps_token_attempt_expiry_and_deadline(core: Core) -> None:
    at = slot(1) + 5 * SECOND_US
    result = core.grant(run_ref("a", slot(1)), worker_id="w7", lease_ttl_us=TTL, issued_at_us=at)
    assert result.accepted and result.index == core.index
    token = core.index  # the fencing token is the index of the GrantLeases entry
    assert result.events == (LeaseGranted("a", slot(1), token, 1, at + TTL, at + TIMEOUT),)
    run = run_a(core)
    assert (run.status, run.attempt, run.fencing_token, run.worker_id) == (LEASED, 1, token, "w7")
    assert (run.lease_ttl_us, run.lease_expires_us, run.deadline_us) == (TTL, at + TTL, at + TIMEOUT)
    assert run.started_us == at
    assert run.attempts == (Attempt(number=1, worker_id="w7", fencing_token=token, started_us=at),)
    assert core.state.live_runs == {"a": [slot(1)]}


def test_grant_uses_replicated_time_not_a_slow_proposer_clock(core: Core) -> None:
    core.barrier(issued_at_us=slot(1) + 20 * SECOND_US)
    at = core.state.now_us
    result = core.grant(run_ref("a", slot(1)), issued_at_us=slot(1) - HOUR)
    assert result.events == (LeaseGranted("a", slot(1), core.index, 1, at + TTL, at + TIMEOUT),)


def test_only_a_queued_run_is_granted(core: Core) -> None:
    core.apply_jobs((upsert(spec("b"), next_due_us=slot(1)),))
    core.claim_runs(claim("b", slot(1), slot(2), status="skipped", reason="test"))
    result = core.grant(run_ref("b", slot(1)), run_ref("a", slot(7)), run_ref("ghost", slot(1)))
    assert result.accepted
    assert result.events == (
        LeaseNotGranted("b", slot(1), "not_queued"),
        LeaseNotGranted("a", slot(7), "not_queued"),
        LeaseNotGranted("ghost", slot(1), "not_queued"),
    )


def _fail_first_attempt(core: Core, at_us: int, jitter_ppm: int = 0) -> tuple[LeaseRef, int]:
    """Grant at slot(1)+1s, fail at `at_us`; returns the lease and the retry's not_before."""
    lease = grant_a(core, slot(1) + SECOND_US)
    result = core.complete(completion(lease, "failure", error="boom", jitter_ppm=jitter_ppm), issued_at_us=at_us)
    event = result.events[0]
    assert type(event) is RunRetryScheduled
    return lease, event.not_before_us


def test_a_backing_off_run_is_granted_exactly_at_not_before(core: Core) -> None:
    failed_at = slot(1) + 3 * SECOND_US
    _, not_before = _fail_first_attempt(core, failed_at)
    assert not_before == failed_at + 5 * SECOND_US  # half of the 10 s initial backoff with jitter 0
    early = core.grant(run_ref("a", slot(1)), issued_at_us=not_before - 1)
    assert early.events == (LeaseNotGranted("a", slot(1), "backing_off"),)
    assert run_a(core).status == QUEUED and run_a(core).attempt == 1
    on_time = core.grant(run_ref("a", slot(1)), issued_at_us=not_before)
    assert on_time.events == (LeaseGranted("a", slot(1), core.index, 2, not_before + TTL, not_before + TIMEOUT),)


def test_a_second_grant_in_the_same_batch_is_not_granted(core: Core) -> None:
    result = core.grant(run_ref("a", slot(1)), run_ref("a", slot(1)), issued_at_us=slot(1) + 1)
    assert type(result.events[0]) is LeaseGranted
    assert result.events[1] == LeaseNotGranted("a", slot(1), "not_queued")
    assert run_a(core).attempt == 1 and len(run_a(core).attempts) == 1


def test_a_second_grant_in_a_later_batch_is_not_granted_and_keeps_the_first_lease(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1, worker_id="w1")
    before = encoded(run_a(core))
    result = core.grant(run_ref("a", slot(1)), worker_id="w2", issued_at_us=slot(1) + 2)
    assert result.events == (LeaseNotGranted("a", slot(1), "not_queued"),)
    assert encoded(run_a(core)) == before
    assert run_a(core).fencing_token == lease.fencing_token and run_a(core).worker_id == "w1"


@pytest.mark.parametrize("epoch_delta", [-1, 1])
def test_a_stale_or_future_epoch_rejects_the_whole_grant(epoch_delta: int) -> None:
    core = make_core(others=(spec("b"),))
    core.claim_runs(claim("b", slot(1), slot(2)))
    result = core.grant(run_ref("a", slot(1)), run_ref("b", slot(1)), epoch=core.state.epoch + epoch_delta)
    assert result.rejection is not None and result.rejection.code == "stale_epoch"
    assert result.events == ()
    for job_id in ("a", "b"):
        run = core.state.get_run(job_id, slot(1))
        assert (run.status, run.attempt, run.fencing_token, run.attempts) == (QUEUED, 0, 0, ())


def test_a_grant_from_the_deposed_leader_is_rejected(core: Core) -> None:
    old_epoch = core.state.epoch
    core.lead("n2", term=2)
    result = core.grant(run_ref("a", slot(1)), epoch=old_epoch)
    assert result.rejection.code == "stale_epoch"
    assert run_a(core).status == QUEUED
    assert type(core.grant(run_ref("a", slot(1))).events[0]) is LeaseGranted


@pytest.mark.parametrize("ttl_us", [0, -1])
def test_a_non_positive_ttl_is_rejected(core: Core, ttl_us: int) -> None:
    result = core.grant(run_ref("a", slot(1)), lease_ttl_us=ttl_us)
    assert result.rejection is not None and result.rejection.code == "invalid"
    assert run_a(core).status == QUEUED


@pytest.mark.parametrize("ttl_us", [0, -1])
def test_a_grant_rejected_as_invalid_moves_nothing(ttl_us: int) -> None:
    # A current-epoch grant with a reading the leader's clocks allow: were it accepted, it
    # would move time ten seconds and re-anchor the epoch clock. Rejected, it changes neither.
    core = make_core()
    before, clock = state_digest(core.state), clock_of(core.state)
    now = core.state.now_us
    result = core.grant(run_ref("a", slot(1)), lease_ttl_us=ttl_us, issued_at_us=now + TEN_S)
    assert result.rejection.code == "invalid"
    assert clock_of(core.state) == clock and core.state.now_us == now
    core.state.applied_index -= 1
    assert state_digest(core.state) == before
    # The same reading in an accepted grant does move it.
    assert type(core.grant(run_ref("a", slot(1)), issued_at_us=now + TEN_S).events[0]) is LeaseGranted
    assert core.state.now_us == now + TEN_S


def test_tokens_only_grow_across_re_grants(core: Core) -> None:
    tokens = []
    for attempt in (1, 2, 3):
        at = core.state.now_us + HOUR  # past any backoff
        result = core.grant(run_ref("a", slot(1)), issued_at_us=at, index=core.index + 3)
        event = result.events[0]
        assert event == LeaseGranted("a", slot(1), core.index, attempt, at + TTL, at + TIMEOUT)
        tokens.append(event.fencing_token)
        core.complete(completion(lease_ref("a", slot(1), event.fencing_token), "failure", error="x"))
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    assert [a.fencing_token for a in run_a(core).attempts] == tokens
    assert run_a(core).status == FAILED


# == 2. extension (heartbeats) =========================================================


def test_heartbeat_extends_to_replicated_now_plus_ttl(core: Core) -> None:
    lease = grant_a(core, slot(1))
    beat = slot(1) + 20 * SECOND_US
    result = core.extend(lease, issued_at_us=beat)
    assert result.accepted and result.events == (LeaseExtended("a", slot(1), lease.fencing_token, beat + TTL),)
    assert run_a(core).lease_expires_us == beat + TTL
    # The deadline is not moved by heartbeats.
    assert run_a(core).deadline_us == slot(1) + TIMEOUT


def test_heartbeat_from_a_slow_proposer_extends_from_replicated_time(core: Core) -> None:
    lease = grant_a(core, slot(1))
    core.barrier(issued_at_us=slot(1) + 25 * SECOND_US)
    result = core.extend(lease, issued_at_us=slot(1) + 2 * SECOND_US)
    assert core.state.now_us == slot(1) + 25 * SECOND_US
    assert result.events == (LeaseExtended("a", slot(1), lease.fencing_token, slot(1) + 25 * SECOND_US + TTL),)


def test_heartbeat_never_shortens_a_lease(core: Core) -> None:
    lease = grant_a(core, slot(1) + 20 * SECOND_US)
    expires = run_a(core).lease_expires_us
    # A heartbeat proposed with an older clock, at the same replicated now: the same expiry.
    result = core.extend(lease, issued_at_us=slot(1))
    assert result.events == (LeaseExtended("a", slot(1), lease.fencing_token, expires),)
    assert run_a(core).lease_expires_us == expires


def test_heartbeat_with_a_stale_token_is_fenced(core: Core) -> None:
    old = grant_a(core, slot(1) + 1)
    core.expire(expiry(old), issued_at_us=slot(1) + 1 + TTL)
    new = grant_a(core, core.state.now_us + HOUR)
    assert new.fencing_token > old.fencing_token
    before = encoded(run_a(core))
    result = core.extend(old)
    assert result.events == (LeaseFenced("a", slot(1), old.fencing_token, "stale_token"),)
    assert encoded(run_a(core)) == before


def test_heartbeat_on_a_cancelled_run_is_fenced_cancelled(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1)
    core.apply_jobs(removals=("a",))
    assert core.extend(lease).events == (LeaseFenced("a", slot(1), lease.fencing_token, "cancelled"),)


def test_heartbeat_on_a_run_between_attempts_is_fenced_not_leased(core: Core) -> None:
    lease, _ = _fail_first_attempt(core, slot(1) + 2 * SECOND_US)
    assert core.extend(lease).events == (LeaseFenced("a", slot(1), lease.fencing_token, "not_leased"),)


def test_heartbeat_on_an_unknown_run_is_not_found(core: Core) -> None:
    result = core.extend(lease_ref("a", slot(9), 3), lease_ref("ghost", slot(1), 3))
    assert result.events == (
        LeaseFenced("a", slot(9), 3, "not_found"),
        LeaseFenced("ghost", slot(1), 3, "not_found"),
    )


def test_coalesced_heartbeats_answer_one_event_per_item_in_order() -> None:
    core = make_core(others=(spec("b"), spec("c")))
    core.claim_runs(claim("b", slot(1), slot(2)), claim("c", slot(1), slot(2)))
    granted = core.grant(run_ref("a", slot(1)), run_ref("b", slot(1)), run_ref("c", slot(1)))
    token = granted.events[0].fencing_token
    a, b, c = (lease_ref(job, slot(1), token) for job in "abc")
    core.apply_jobs(removals=("c",))
    beat = slot(1) + 7 * SECOND_US
    result = core.extend(b, lease_ref("a", slot(1), token - 1), c, lease_ref("ghost", 1, 1), a, issued_at_us=beat)
    assert result.events == (
        LeaseExtended("b", slot(1), token, beat + TTL),
        LeaseFenced("a", slot(1), token - 1, "stale_token"),
        LeaseFenced("c", slot(1), token, "cancelled"),
        LeaseFenced("ghost", 1, 1, "not_found"),
        LeaseExtended("a", slot(1), token, beat + TTL),
    )


def test_heartbeats_need_no_epoch_and_survive_a_leader_change(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1)
    core.lead("n2", term=2)
    result = core.extend(lease)
    assert result.events == (LeaseExtended("a", slot(1), lease.fencing_token, core.state.now_us + TTL),)


# == 3. expiry at the exact boundary ===================================================


def test_lease_expiry_one_microsecond_early_is_still_live_and_exact_expiry_ends_it(core: Core) -> None:
    granted_at = slot(1) + 1
    lease = grant_a(core, granted_at)
    expires = granted_at + TTL
    early = core.expire(expiry(lease, "lease_expired"), issued_at_us=expires - 1)
    assert early.events == (LeaseStillLive("a", slot(1), lease.fencing_token),)
    run = run_a(core)
    assert (run.status, run.lease_expires_us, run.attempts[-1].outcome) == (LEASED, expires, "")
    on_time = core.expire(expiry(lease, "lease_expired"), issued_at_us=expires)
    assert on_time.events == (
        RunRetryScheduled("a", slot(1), 2, "lease expired: heartbeats stopped", expires + 5 * SECOND_US),
    )
    run = run_a(core)
    assert (run.status, run.lease_expires_us, run.worker_id) == (QUEUED, 0, "")
    assert (run.attempts[-1].outcome, run.attempts[-1].finished_us) == ("lease_expired", expires)


def test_deadline_passes_even_while_heartbeats_keep_the_lease_alive(core: Core) -> None:
    granted_at = slot(1) + 1
    lease = grant_a(core, granted_at)
    deadline = granted_at + TIMEOUT
    for beat in range(granted_at + 20 * SECOND_US, deadline, 20 * SECOND_US):
        assert type(core.extend(lease, issued_at_us=beat).events[0]) is LeaseExtended
    assert run_a(core).lease_expires_us > deadline
    early = core.expire(expiry(lease, "timed_out"), issued_at_us=deadline - 1)
    assert early.events == (LeaseStillLive("a", slot(1), lease.fencing_token),)
    # At the deadline the lease itself is still healthy: a lease expiry is refused ...
    assert core.expire(expiry(lease, "lease_expired"), issued_at_us=deadline).events == (
        LeaseStillLive("a", slot(1), lease.fencing_token),
    )
    # ... but the run's maximum runtime has passed.
    on_time = core.expire(expiry(lease, "timed_out"), issued_at_us=deadline)
    retry_at = deadline + 5 * SECOND_US
    assert on_time.events == (RunRetryScheduled("a", slot(1), 2, "maximum runtime exceeded", retry_at),)
    assert run_a(core).attempts[-1].outcome == "timed_out"


def test_a_leader_with_a_slow_clock_cannot_expire_early_nor_turn_time_back(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1)
    expires = run_a(core).lease_expires_us
    core.barrier(issued_at_us=expires - 1)
    slow = core.expire(expiry(lease, "lease_expired"), issued_at_us=T0_US)
    assert slow.events == (LeaseStillLive("a", slot(1), lease.fencing_token),)
    assert core.state.now_us == expires - 1
    # Even a stale proposer clock ends the lease once replicated time has reached the expiry.
    core.barrier(issued_at_us=expires)
    assert type(core.expire(expiry(lease), issued_at_us=T0_US).events[0]) is RunRetryScheduled


def test_expiry_with_a_stale_epoch_is_rejected(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1)
    old_epoch = core.state.epoch
    core.lead("n2", term=2)
    result = core.expire(expiry(lease), epoch=old_epoch, issued_at_us=core.state.now_us + HOUR)
    assert result.rejection.code == "stale_epoch"
    assert run_a(core).status == LEASED


def test_expiry_naming_a_stale_token_or_an_unknown_reason_changes_nothing(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1)
    late = core.state.now_us + HOUR
    before = encoded(run_a(core))
    result = core.expire(
        expiry(lease_ref("a", slot(1), lease.fencing_token - 1)),
        expiry(lease, "bored"),
        expiry(lease_ref("a", slot(5), lease.fencing_token)),
        issued_at_us=late,
    )
    assert result.events == (
        LeaseFenced("a", slot(1), lease.fencing_token - 1, "stale_token"),
        LeaseStillLive("a", slot(1), lease.fencing_token),
        LeaseFenced("a", slot(5), lease.fencing_token, "not_found"),
    )
    assert encoded(run_a(core)) == before


def test_an_hour_on_the_leaders_clocks_without_heartbeats_ends_the_lease(core: Core) -> None:
    """A leader clock an hour on, its monotonic clock agreeing: an hour really passed."""
    lease = grant_a(core, slot(1) + 1, ttl_us=300 * SECOND_US)
    beat = slot(1) + 20 * SECOND_US
    core.extend(lease, issued_at_us=beat)
    later = beat + HOUR
    result = core.expire(expiry(lease, "lease_expired"), issued_at_us=later, monotonic_us=later)
    assert core.state.now_us == later and core.state.clock_ignored_us == 0
    assert type(result.events[0]) is RunRetryScheduled
    assert run_a(core).attempts[-1].finished_us == later
    # Replicated time stays there: neither a slow leader clock nor a follower's brings it back.
    core.advance_time(issued_at_us=beat + SECOND_US, monotonic_us=later + SECOND_US)
    core.barrier(issued_at_us=beat + SECOND_US)
    assert core.state.now_us == later


def _jump(core: Core, lease: LeaseRef, beat: int) -> tuple[int, int]:
    """Heartbeat at `beat`; then the leader's wall clock jumps an hour while one second passes."""
    core.extend(lease, issued_at_us=beat)  # the leader ticked to `beat` first (monotonic = wall)
    return beat + HOUR, beat + SECOND_US


@pytest.mark.parametrize("reason", ["lease_expired", "timed_out"])
def test_a_wall_clock_jump_cannot_end_a_freshly_heartbeated_lease(reason: str) -> None:
    core = make_core(timeout_us=600 * SECOND_US)
    lease = grant_a(core, slot(1) + 1, ttl_us=300 * SECOND_US)
    beat = slot(1) + 20 * SECOND_US
    jumped, mono = _jump(core, lease, beat)  # healthy until beat + 300 s, deadline at +600 s
    result = core.expire(expiry(lease, reason), issued_at_us=jumped, monotonic_us=mono)
    assert result.accepted and result.events == (LeaseStillLive("a", slot(1), lease.fencing_token),)
    assert run_a(core).status == LEASED
    bound = beat + SECOND_US + SECOND_US * MAX_DRIFT_PPM // 1_000_000 + SLACK_US
    assert core.state.now_us == bound
    assert core.state.clock_ignored_us == jumped - bound > 0


def test_a_mid_epoch_wall_clock_jump_is_clamped_and_recorded() -> None:
    core = make_core(timeout_us=600 * SECOND_US)
    lease = grant_a(core, slot(1) + 1, ttl_us=300 * SECOND_US)
    beat = slot(3)
    jumped, mono = _jump(core, lease, beat)
    # The jumped clock proposes the job's slots up to its own now: only those up to replicated now are claimed.
    result = core.claim_runs(
        *(claim("a", slot(k), slot(k + 1)) for k in (2, 3, 4, 5)), issued_at_us=jumped, monotonic_us=mono
    )
    assert result.events == (
        RunClaimed("a", slot(2), QUEUED, core.index),
        RunClaimed("a", slot(3), QUEUED, core.index),
        ClaimOutOfPlan("a", slot(4), "not_due_yet"),
        ClaimOutOfPlan("a", slot(5), "not_next_slot"),  # slot(4) is still owed first
    )
    now = core.state.now_us
    assert beat < now < slot(4) and core.state.clock_ignored_us == jumped - now
    assert (core.state.jobs["a"].cursor_us, core.state.jobs["a"].next_due_us) == (slot(3), slot(4))
    # Records are stamped with replicated time, not with the jumped clock.
    assert core.state.get_run("a", slot(3)).claimed_us == now
    # The reaper on the jumped clock, heartbeats healthy: nothing ends.
    reaped = core.expire(expiry(lease), expiry(lease, "timed_out"), issued_at_us=jumped + 1, monotonic_us=mono + 1)
    assert reaped.events == (LeaseStillLive("a", slot(1), lease.fencing_token),) * 2
    # While the wall clock stays ahead, replicated time follows the monotonic clock (bounded) ...
    core.advance_time(issued_at_us=jumped + 100 * SECOND_US, monotonic_us=mono + 100 * SECOND_US)
    elapsed = 101 * SECOND_US
    assert core.state.now_us == beat + elapsed + elapsed * MAX_DRIFT_PPM // 1_000_000 + SLACK_US
    # ... so a lease whose heartbeats stop expires when its TTL has really passed, not before.
    assert run_a(core).lease_expires_us == beat + 300 * SECOND_US
    early = core.expire(expiry(lease), issued_at_us=jumped + 299 * SECOND_US, monotonic_us=beat + 299 * SECOND_US)
    assert early.events == (LeaseStillLive("a", slot(1), lease.fencing_token),)
    late = core.expire(expiry(lease), issued_at_us=jumped + 300 * SECOND_US, monotonic_us=beat + 300 * SECOND_US)
    assert type(late.events[0]) is RunRetryScheduled
    assert core.state.now_us < beat + 301 * SECOND_US and core.state.clock_ignored_us > 0


def test_a_deposed_leader_with_a_fast_clock_cannot_make_healthy_leases_expire(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1, ttl_us=300 * SECOND_US)
    old_epoch = core.state.epoch
    core.lead("n2", term=2, issued_at_us=slot(1) + 10 * SECOND_US)
    beat = slot(1) + 20 * SECOND_US
    core.extend(lease, issued_at_us=beat)  # healthy until beat + 300 s
    stale = core.expire(expiry(lease), epoch=old_epoch, issued_at_us=beat + HOUR)
    assert stale.rejection.code == "stale_epoch"
    assert core.state.now_us == beat and core.state.clock_ignored_us == 0
    # The current leader's reaper, with a correct clock, 10 s later.
    result = core.expire(expiry(lease), issued_at_us=beat + TEN_S)
    assert result.events == (LeaseStillLive("a", slot(1), lease.fencing_token),)


# == 4. completion and retry ===========================================================


def test_success_ends_the_run_and_records_the_attempt(core: Core) -> None:
    granted_at = slot(1) + 1
    lease = grant_a(core, granted_at, worker_id="w1")
    done = granted_at + 7 * SECOND_US
    result = core.complete(completion(lease, "success", output_tail="ok\n"), issued_at_us=done)
    assert result.accepted and result.events == (RunSucceeded("a", slot(1), 1),)
    run = run_a(core)
    assert (run.status, run.finished_us, run.lease_expires_us) == (SUCCEEDED, done, 0)
    assert (run.reason, run.output_tail) == ("", "ok\n")
    assert list(run.attempts) == [
        Attempt(
            number=1,
            worker_id="w1",
            fencing_token=lease.fencing_token,
            started_us=granted_at,
            finished_us=done,
            outcome="success",
        )
    ]
    assert core.state.live_runs == {}
    assert core.state.jobs["a"].last_status == SUCCEEDED


def test_failure_with_attempts_left_queues_a_retry_after_backoff(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1)
    failed_at = slot(1) + 4 * SECOND_US
    result = core.complete(
        completion(lease, "failure", error="exit 3", exit_code=3, jitter_ppm=999_999), issued_at_us=failed_at
    )
    not_before = failed_at + 9_999_995  # 5 s fixed + 5 s * 999_999 ppm, rounded down
    assert result.events == (RunRetryScheduled("a", slot(1), 2, "exit 3", not_before),)
    run = run_a(core)
    assert (run.status, run.not_before_us, run.reason, run.worker_id, run.lease_expires_us) == (
        QUEUED,
        not_before,
        "exit 3",
        "",
        0,
    )
    assert (run.attempt, run.exit_code, run.error) == (1, 3, "exit 3")
    assert run.attempts[-1] == Attempt(
        number=1,
        worker_id="w1",
        fencing_token=lease.fencing_token,
        started_us=slot(1) + 1,
        finished_us=failed_at,
        outcome="failure",
        error="exit 3",
        exit_code=3,
    )
    assert core.state.live_runs == {"a": [slot(1)]}


def test_second_failure_backs_off_twice_as_long(core: Core) -> None:
    _, not_before = _fail_first_attempt(core, slot(1) + 2 * SECOND_US)
    lease = grant_a(core, not_before)
    failed_at = not_before + SECOND_US
    result = core.complete(completion(lease, "failure", error="again"), issued_at_us=failed_at)
    assert result.events == (RunRetryScheduled("a", slot(1), 3, "again", failed_at + TEN_S),)


@pytest.mark.parametrize(
    ("retry_after_us", "expected_delay_us"),
    [
        (0, 5 * SECOND_US),
        (1, 5 * SECOND_US),
        (5 * SECOND_US, 5 * SECOND_US),
        (5 * SECOND_US + 1, 5 * SECOND_US + 1),
        (HOUR, HOUR),
    ],
)
@pytest.mark.parametrize("outcome", ["failure", "retry_later"])
def test_retry_after_is_honoured_as_a_minimum(
    core: Core, outcome: str, retry_after_us: int, expected_delay_us: int
) -> None:
    lease = grant_a(core, slot(1) + 1)
    at = slot(1) + 2 * SECOND_US
    result = core.complete(completion(lease, outcome, retry_after_us=retry_after_us), issued_at_us=at)
    assert result.events == (RunRetryScheduled("a", slot(1), 2, outcome, at + expected_delay_us),)
    assert run_a(core).not_before_us == at + expected_delay_us


def test_attempts_exhausted_fail_the_run_with_a_reason(core: Core) -> None:
    events = []
    for _ in range(3):
        lease = grant_a(core, core.state.now_us + HOUR)
        events.append(core.complete(completion(lease, "failure", error="boom")).events[0])
    assert [type(e) for e in events] == [RunRetryScheduled, RunRetryScheduled, RunEnded]
    assert events[-1] == RunEnded("a", slot(1), FAILED, "boom; 3 of 3 attempts used")
    run = run_a(core)
    assert (run.status, run.reason) == (FAILED, "boom; 3 of 3 attempts used")
    assert (run.finished_us, run.attempt) == (core.state.now_us, 3)
    assert core.state.live_runs == {}
    assert core.state.jobs["a"].last_status == FAILED


@pytest.mark.parametrize(("late_by_us", "closed"), [(0, False), (1, True)])
def test_the_retry_window_closes_exactly_at_slot_plus_within(late_by_us: int, closed: bool) -> None:
    within = 60 * SECOND_US
    core = make_core(retry=RetryPolicy(max_attempts=5, backoff_initial_us=TEN_S, within_us=within))
    lease = grant_a(core, slot(1) + 1)
    # Backoff with jitter 0 is 5 s: the retry would start at exactly slot + within, or 1 us after.
    failed_at = slot(1) + within - 5 * SECOND_US + late_by_us
    result = core.complete(completion(lease, "failure", error="boom"), issued_at_us=failed_at)
    if closed:
        assert result.events == (RunEnded("a", slot(1), FAILED, "boom; retry window of 60s closed"),)
        assert run_a(core).status == FAILED and core.state.live_runs == {}
    else:
        assert result.events == (RunRetryScheduled("a", slot(1), 2, "boom", slot(1) + within),)


def test_timed_out_with_no_attempts_left_ends_timed_out() -> None:
    core = make_core(retry=ONE_SHOT)
    lease = grant_a(core, slot(1) + 1)
    result = core.expire(expiry(lease, "timed_out"), issued_at_us=slot(1) + 1 + TIMEOUT)
    assert result.events == (RunEnded("a", slot(1), TIMED_OUT, "maximum runtime exceeded; 1 of 1 attempts used"),)
    run = run_a(core)
    assert (run.status, run.lease_expires_us) == (TIMED_OUT, 0)
    assert run.attempts[-1].outcome == "timed_out" and run.attempts[-1].error == "maximum runtime exceeded"
    assert core.state.jobs["a"].last_status == TIMED_OUT


def test_lease_expired_with_no_attempts_left_ends_failed() -> None:
    core = make_core(retry=ONE_SHOT)
    lease = grant_a(core, slot(1) + 1)
    result = core.expire(expiry(lease), issued_at_us=slot(1) + 1 + TTL)
    reason = "lease expired: heartbeats stopped; 1 of 1 attempts used"
    assert result.events == (RunEnded("a", slot(1), FAILED, reason),)


@pytest.mark.parametrize("outcome", ["success", "failure"])
def test_a_repeated_completion_is_answered_as_before_and_changes_nothing(core: Core, outcome: str) -> None:
    lease = grant_a(core, slot(1) + 1)
    first = core.complete(completion(lease, outcome, error="e"), issued_at_us=slot(1) + 3 * SECOND_US)
    assert first.accepted
    before = encoded(core.state.runs)
    again = core.complete(completion(lease, outcome, error="e"), issued_at_us=slot(1) + 4 * SECOND_US)
    assert again.events == (CompletionRepeated("a", slot(1), lease.fencing_token),)
    assert encoded(core.state.runs) == before


def test_a_completion_with_another_outcome_after_the_first_is_fenced(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1)
    core.complete(completion(lease, "failure"))
    result = core.complete(completion(lease, "success"))
    assert result.events == (LeaseFenced("a", slot(1), lease.fencing_token, "not_leased"),)
    assert run_a(core).status == QUEUED


def test_after_a_re_grant_the_old_tokens_completion_is_fenced(core: Core) -> None:
    old = grant_a(core, slot(1) + 1, worker_id="w1")
    core.expire(expiry(old), issued_at_us=slot(1) + 1 + TTL)
    new = grant_a(core, core.state.now_us + HOUR, worker_id="w2")
    # The first worker was alive after all and reports success: its token is no longer current.
    result = core.complete(completion(old, "success", worker_id="w1"))
    assert result.events == (LeaseFenced("a", slot(1), old.fencing_token, "stale_token"),)
    run = run_a(core)
    assert (run.status, run.fencing_token, run.worker_id) == (LEASED, new.fencing_token, "w2")
    assert core.complete(completion(new, "success", worker_id="w2")).events == (RunSucceeded("a", slot(1), 2),)


def test_a_completion_with_an_unknown_outcome_is_fenced_and_the_lease_stays(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1)
    result = core.complete(completion(lease, "maybe"))
    assert result.events == (LeaseFenced("a", slot(1), lease.fencing_token, "bad_outcome"),)
    assert run_a(core).status == LEASED and run_a(core).attempts[-1].outcome == ""


def test_every_attempt_is_recorded(core: Core) -> None:
    t1 = slot(1) + 1
    first = grant_a(core, t1, worker_id="w1")
    failed = completion(first, "failure", worker_id="w1", error="disk full", exit_code=2)
    core.complete(failed, issued_at_us=t1 + SECOND_US)
    t2 = t1 + HOUR
    second = grant_a(core, t2, worker_id="w2")
    core.expire(expiry(second), issued_at_us=t2 + TTL)
    t3 = t2 + 2 * HOUR
    third = grant_a(core, t3, worker_id="w3")
    core.complete(completion(third, "success", worker_id="w3"), issued_at_us=t3 + 5)
    assert list(run_a(core).attempts) == [
        Attempt(1, "w1", first.fencing_token, t1, t1 + SECOND_US, "failure", "disk full", 2),
        Attempt(2, "w2", second.fencing_token, t2, t2 + TTL, "lease_expired", "lease expired: heartbeats stopped", 0),
        Attempt(3, "w3", third.fencing_token, t3, t3 + 5, "success", "", 0),
    ]
    run = run_a(core)
    assert (run.status, run.attempt, run.started_us, run.finished_us) == (SUCCEEDED, 3, t1, t3 + 5)


def test_completions_answer_one_event_per_item_in_order() -> None:
    core = make_core(others=(spec("b", retry=RETRY),))
    core.claim_runs(claim("b", slot(1), slot(2)))
    granted = core.grant(run_ref("a", slot(1)), run_ref("b", slot(1)))
    token = granted.events[0].fencing_token
    a, b = lease_ref("a", slot(1), token), lease_ref("b", slot(1), token)
    at = slot(1) + 3 * SECOND_US
    result = core.complete(
        completion(b, "failure", error="x"),
        completion(lease_ref("ghost", 5, 5), "success"),
        completion(a, "success"),
        completion(a, "success"),
        issued_at_us=at,
    )
    assert result.events == (
        RunRetryScheduled("b", slot(1), 2, "x", at + 5 * SECOND_US),
        LeaseFenced("ghost", 5, 5, "not_found"),
        RunSucceeded("a", slot(1), 1),
        CompletionRepeated("a", slot(1), token),
    )


# -- backoff_us, exactly ----------------------------------------------------------------

DOUBLING = RetryPolicy(backoff_initial_us=TEN_S, backoff_max_us=300 * SECOND_US, backoff_multiplier=2.0)
BY_HALF = RetryPolicy(backoff_initial_us=SECOND_US, backoff_max_us=HOUR, backoff_multiplier=1.5)
TENFOLD = RetryPolicy(backoff_initial_us=TEN_S, backoff_max_us=300 * SECOND_US, backoff_multiplier=10.0)
TINY = RetryPolicy(backoff_initial_us=3, backoff_max_us=3, backoff_multiplier=1.0)


@pytest.mark.parametrize(
    ("policy", "attempt", "jitter_ppm", "expected_us"),
    [
        (DOUBLING, 1, 0, 5_000_000),
        (DOUBLING, 1, 999_999, 9_999_995),
        (DOUBLING, 1, 500_000, 7_500_000),
        (DOUBLING, 2, 0, 10_000_000),
        (DOUBLING, 2, 999_999, 19_999_990),
        (DOUBLING, 3, 0, 20_000_000),
        (DOUBLING, 3, 999_999, 39_999_980),
        (DOUBLING, 5, 0, 80_000_000),
        (DOUBLING, 5, 999_999, 159_999_920),
        (DOUBLING, 6, 0, 150_000_000),  # 320 s capped at 300 s
        (DOUBLING, 6, 999_999, 299_999_850),
        (DOUBLING, 60, 999_999, 299_999_850),
        (DOUBLING, 0, 0, 5_000_000),  # treated as the first attempt
        (DOUBLING, 1, -7, 5_000_000),  # out-of-range draws are clamped
        (DOUBLING, 1, 5_000_000, 9_999_995),
        (BY_HALF, 1, 0, 500_000),
        (BY_HALF, 2, 0, 750_000),
        (BY_HALF, 3, 0, 1_125_000),
        (BY_HALF, 5, 0, 2_531_250),
        (BY_HALF, 5, 999_999, 5_062_497),
        (TENFOLD, 3, 0, 150_000_000),
        (RetryPolicy(backoff_initial_us=500 * SECOND_US, backoff_max_us=300 * SECOND_US), 1, 0, 150_000_000),
        (TINY, 4, 0, 1),
        (TINY, 4, 499_999, 1),
        (TINY, 4, 500_000, 2),
        (TINY, 4, 999_999, 2),
    ],
)
def test_backoff_values_are_exact(policy: RetryPolicy, attempt: int, jitter_ppm: int, expected_us: int) -> None:
    assert backoff_us(policy, attempt, jitter_ppm) == expected_us


def test_backoff_is_monotonic_in_the_draw_and_within_half_to_full_base() -> None:
    for attempt in range(1, 10):
        values = [backoff_us(DOUBLING, attempt, ppm) for ppm in range(0, 1_000_000, 9_999)]
        assert values == sorted(values)
        base = min(300 * SECOND_US, TEN_S * 2 ** (attempt - 1))
        assert base // 2 <= values[0] and values[-1] < base


# == 5. a new leader extends every live lease ==========================================


def test_claim_leadership_extends_every_live_lease_by_one_ttl_from_the_new_now() -> None:
    core = make_core(others=(spec("b"), spec("c")))
    core.claim_runs(claim("b", slot(1), slot(2)), claim("c", slot(1), slot(2)), issued_at_us=slot(1))
    a = grant_a(core, slot(1) + 1, ttl_us=TTL)
    core.grant(run_ref("b", slot(1)), lease_ttl_us=90 * SECOND_US, issued_at_us=slot(1) + 2)
    # c stays queued; a final run of a later slot of `a` stays final.
    core.extend(a, issued_at_us=slot(1) + 10 * SECOND_US)
    before = {job: core.state.get_run(job, slot(1)).lease_expires_us for job in "abc"}
    assert before == {"a": slot(1) + 10 * SECOND_US + TTL, "b": slot(1) + 2 + 90 * SECOND_US, "c": 0}
    new_now = slot(1) + 25 * SECOND_US
    result = core.apply(ClaimLeadership(issued_at_us=new_now, node_id="n2", term=2))
    assert result.events == (LeadershipClaimed("n2", 2, 2),)
    after = {job: core.state.get_run(job, slot(1)).lease_expires_us for job in "abc"}
    assert after == {"a": new_now + TTL, "b": new_now + 90 * SECOND_US, "c": 0}
    assert all(after[job] >= before[job] for job in "abc")
    # Deadlines are not extended: a new leader does not grant extra runtime.
    assert core.state.get_run("a", slot(1)).deadline_us == slot(1) + 1 + TIMEOUT


def test_a_new_leader_with_a_slow_clock_extends_from_the_high_water_mark_and_never_shortens(core: Core) -> None:
    lease = grant_a(core, slot(1) + 1)
    mark = slot(1) + 40 * SECOND_US
    core.extend(lease, issued_at_us=mark)
    assert run_a(core).lease_expires_us == mark + TTL
    core.apply(ClaimLeadership(issued_at_us=slot(1) - HOUR, node_id="n2", term=2))
    assert core.state.now_us == mark
    assert run_a(core).lease_expires_us == mark + TTL
    # So the new leader cannot expire it before one full TTL after the mark.
    early = core.expire(expiry(lease), issued_at_us=mark + TTL - 1)
    assert early.events == (LeaseStillLive("a", slot(1), lease.fencing_token),)


def test_a_rejected_leadership_claim_extends_nothing(core: Core) -> None:
    core.lead("n2", term=5)
    lease = grant_a(core, slot(1) + 1)
    expires = run_a(core).lease_expires_us
    result = core.apply(ClaimLeadership(issued_at_us=slot(1) + 20 * SECOND_US, node_id="n1", term=4))
    assert result.rejection.code == "stale_term"
    assert run_a(core).lease_expires_us == expires
    assert lease.fencing_token == run_a(core).fencing_token


# == 7. job removal cancels its live runs ==============================================


def test_removing_a_job_cancels_its_live_runs_fences_their_leases_and_keeps_history() -> None:
    core = make_core(retry=ONE_SHOT)
    done = grant_a(core, slot(1) + 1)
    core.complete(completion(done, "success"), issued_at_us=slot(1) + 2)
    core.claim_runs(claim("a", slot(2), slot(3)), claim("a", slot(3), slot(4)), issued_at_us=slot(3))
    leased = core.grant(run_ref("a", slot(2)), issued_at_us=slot(3) + 1).events[0]
    lease = lease_ref("a", slot(2), leased.fencing_token)
    # Removed through a node whose clock is 5 s ahead: judged and stamped at replicated time.
    removed_at = core.state.now_us
    result = core.apply_jobs(removals=("a",), issued_at_us=removed_at + 5 * SECOND_US)
    assert core.state.now_us == removed_at == slot(3) + 1
    assert result.events == (
        RunEnded("a", slot(2), CANCELLED, "job deleted"),
        RunEnded("a", slot(3), CANCELLED, "job deleted"),
        JobRemoved("a", 1),
    )
    assert "a" not in core.state.jobs and core.state.live_runs == {}
    statuses = [(r.scheduled_us, r.status) for r in core.state.runs["a"]]
    assert statuses == [(slot(1), SUCCEEDED), (slot(2), CANCELLED), (slot(3), CANCELLED)]
    cancelled = core.state.get_run("a", slot(2))
    assert (cancelled.finished_us, cancelled.lease_expires_us, cancelled.reason) == (removed_at, 0, "job deleted")
    assert len(cancelled.attempts) == 1 and cancelled.attempts[0].fencing_token == lease.fencing_token
    # The holder learns it was cancelled, whatever it sends.
    fenced = LeaseFenced("a", slot(2), lease.fencing_token, "cancelled")
    assert core.extend(lease).events == (fenced,)
    assert core.complete(completion(lease, "success")).events == (fenced,)
    assert core.expire(expiry(lease, "timed_out"), issued_at_us=removed_at + HOUR).events == (fenced,)
    assert core.grant(run_ref("a", slot(3))).events == (LeaseNotGranted("a", slot(3), "not_queued"),)
    assert core.state.get_run("a", slot(2)).status == CANCELLED


# == 8. the live_runs index and replica agreement, by property =========================

JOBS = ("a", "b", "c", "d")
OVERLAPS = {"a": "allow", "b": "forbid", "c": "queue", "d": "replace"}
KINDS = (
    "claim",
    "claim",
    "grant",
    "grant",
    "extend",
    "complete",
    "complete",
    "expire",
    "expire",
    "lead",
    "jobs",
    "tick",
)
# How far a worker's or a follower's clock is off the leader's; a step of the leader's wall clock alone.
SKEWS = (0, 0, -20 * SECOND_US, 20 * SECOND_US, HOUR)
JUMPS = (0, 0, 0, 0, 0, 300 * SECOND_US, -300 * SECOND_US)
PROPERTY_RETRY = RetryPolicy(max_attempts=2, backoff_initial_us=2 * SECOND_US, backoff_max_us=8 * SECOND_US)


def _property_spec(job_id: str, within_us: int = 0):
    retry = msgspec.structs.replace(PROPERTY_RETRY, within_us=within_us)
    return spec(job_id, overlap=OVERLAPS[job_id], retry=retry, timeout_us=40 * SECOND_US)


def _slot_after(instant_us: int) -> int:
    return T0_US + ((instant_us - T0_US) // TEN_S + 1) * TEN_S


class ExecutionGenerator:
    """Plausible execution commands against a live state, mixed with stale and bogus ones.

    The leader's wall clock may step back and forth or jump; its monotonic clock only moves
    on. Heartbeats and completions carry the (skewed) clocks of other nodes; job changes, a
    replica's view of replicated time or, at times, such a clock.
    """

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.clock_us = T0_US
        self.mono_us = 0

    def _pass(self, elapsed_us: int) -> None:
        """Time passes for the leader: both of its clocks move on."""
        self.clock_us += elapsed_us
        self.mono_us += max(elapsed_us, 0)

    def draw(self, strategy, label: str | None = None):
        return self.data.draw(strategy, label=label)

    def preamble(self) -> list[Command]:
        self.clock_us += SECOND_US
        first = _slot_after(self.clock_us)
        return [
            ClaimLeadership(issued_at_us=self.clock_us, node_id="n1", term=1, monotonic_us=self.mono_us),
            ApplyJobs(
                issued_at_us=self.clock_us,
                author="setup",
                request_id="",
                upserts=tuple(JobUpsert(_property_spec(j), 0, first) for j in JOBS),
            ),
        ]

    def _pick_run(self, state: State, wanted: str = ""):
        """A retained run, usually a live one (of status `wanted` when there is one); None rarely."""
        runs = [run for job_runs in state.runs.values() for run in job_runs]
        live = [run for run in runs if run.status in LIVE_STATUSES]
        preferred = [run for run in live if run.status == wanted]
        # Hypothesis favours small draws: 0 picks the common path.
        pool = (preferred or live) if live and self.draw(st.integers(0, 4)) < 4 else runs
        if not pool or self.draw(st.integers(0, 9)) == 9:
            return None
        return self.draw(st.sampled_from(pool))

    def _lease(self, state: State, wanted: str = LEASED) -> LeaseRef:
        run = self._pick_run(state, wanted)
        if run is None:
            return LeaseRef(self.draw(st.sampled_from(JOBS + ("ghost",))), _slot_after(self.clock_us), 1)
        token = run.fencing_token - (self.draw(st.integers(0, 4)) == 4)
        return LeaseRef(run.job_id, run.scheduled_us, token)

    def _epoch(self, state: State) -> int:
        return state.epoch if self.draw(st.integers(0, 9)) < 9 else state.epoch + self.draw(st.sampled_from((-1, 1)))

    def command(self, state: State) -> Command:
        self._pass(self.draw(st.integers(-5, 25)) * SECOND_US // 2)
        self.clock_us += self.draw(st.sampled_from(JUMPS), label="wall jump")
        issued = self.clock_us
        skewed = issued + self.draw(st.sampled_from(SKEWS), label="skew")
        kind = self.draw(st.sampled_from(KINDS))
        if kind == "lead":
            term = state.leader_term + self.draw(st.integers(-1, 1))
            return ClaimLeadership(issued_at_us=issued, node_id="n2", term=term, monotonic_us=self.mono_us)
        if kind == "tick":
            return AdvanceTime(issued_at_us=issued, epoch=self._epoch(state), monotonic_us=self.mono_us)
        if kind == "jobs":
            # The API servicer stamps its replica's view of replicated time (lagging at times);
            # other proposers, their own clocks (refused as stale plans when they start slots).
            view = state.now_us - self.draw(st.sampled_from((0, 0, 2 * SECOND_US, 40 * SECOND_US)), label="lag")
            return self._jobs(state, self.draw(st.sampled_from((view, view, skewed)), label="stamp"))
        if kind == "claim":
            claims = []
            for job_id in self.draw(st.lists(st.sampled_from(JOBS), min_size=1, max_size=4, unique=True)):
                job = state.jobs.get(job_id)
                if job is None or not job.next_due_us:
                    continue
                due = job.next_due_us
                for _ in range(self.draw(st.integers(1, 2))):
                    claims.append(SlotClaim(job_id, due, due + TEN_S, job.version))
                    due += TEN_S
            latest_us = max((c.scheduled_us for c in claims), default=issued)
            if latest_us > issued and self.draw(st.booleans()):
                self._pass(latest_us - issued)  # the leader waits until its plan is due
                issued = self.clock_us
            return ClaimRuns(
                issued_at_us=issued, epoch=self._epoch(state), claims=tuple(claims), monotonic_us=self.mono_us
            )
        if kind == "grant":
            refs = []
            for _ in range(self.draw(st.integers(1, 3))):
                lease = self._lease(state, QUEUED)
                refs.append(RunRef(lease.job_id, lease.scheduled_us))
            return GrantLeases(
                issued_at_us=issued,
                epoch=self._epoch(state),
                worker_id=self.draw(st.sampled_from(("w1", "w2"))),
                lease_ttl_us=self.draw(st.sampled_from((5 * SECOND_US, 20 * SECOND_US, 5 * SECOND_US, 0))),
                grants=tuple(refs),
                monotonic_us=self.mono_us,
            )
        if kind == "extend":
            leases = tuple(self._lease(state) for _ in range(self.draw(st.integers(1, 3))))
            return ExtendLeases(issued_at_us=skewed, leases=leases)
        if kind == "complete":
            items = tuple(
                Completion(
                    lease=self._lease(state),
                    worker_id="w1",
                    outcome=self.draw(st.sampled_from(("success", "failure", "retry_later", "bogus"))),
                    error=self.draw(st.sampled_from(("", "boom"))),
                    retry_after_us=self.draw(st.sampled_from((0, 0, 30 * SECOND_US))),
                    jitter_ppm=self.draw(st.integers(0, 999_999)),
                )
                for _ in range(self.draw(st.integers(1, 3)))
            )
            return CompleteRuns(issued_at_us=skewed, completions=items)
        if kind == "expire":
            items = []
            for _ in range(self.draw(st.integers(1, 3))):
                lease, reason = self._lease(state), self.draw(st.sampled_from(("lease_expired", "timed_out")))
                run = state.get_run(lease.job_id, lease.scheduled_us)
                if run is not None and run.status == LEASED and self.draw(st.booleans()):
                    # A reaper proposing exactly at (or a microsecond before) the instant it is owed.
                    due = run.deadline_us if reason == "timed_out" else run.lease_expires_us
                    self._pass(max(0, due - self.draw(st.integers(0, 1)) - self.clock_us))
                    issued = self.clock_us
                items.append(Expiry(lease, reason, self.draw(st.integers(0, 999_999))))
            return ExpireLeases(
                issued_at_us=issued, epoch=self._epoch(state), expiries=tuple(items), monotonic_us=self.mono_us
            )
        raise AssertionError(kind)

    def _jobs(self, state: State, issued: int) -> ApplyJobs:
        job_id = self.draw(st.sampled_from(JOBS))
        current = state.jobs.get(job_id)
        if current is not None and self.draw(st.booleans()):
            return ApplyJobs(issued_at_us=issued, author="op", request_id="", removals=(job_id,))
        retained = state.runs.get(job_id)
        # Where the core restarts the job's slots: the proposer's view, never ahead of replicated time.
        cursor = max(min(issued, state.now_us), retained[-1].scheduled_us if retained else 0)
        within = self.draw(st.sampled_from((0, 15 * SECOND_US)))
        if current is not None:
            cursor = current.cursor_us  # the schedule is unchanged: the cursor carries over
        new = JobUpsert(_property_spec(job_id, within), current.version if current else 0, _slot_after(cursor))
        return ApplyJobs(issued_at_us=issued, author="op", request_id="", upserts=(new,))


def _assert_live_index_exact(state: State) -> None:
    expected = {
        (run.job_id, run.scheduled_us) for runs in state.runs.values() for run in runs if run.status in LIVE_STATUSES
    }
    indexed = {(job_id, instant) for job_id, instants in state.live_runs.items() for instant in instants}
    assert indexed == expected
    for job_id, instants in state.live_runs.items():
        assert instants, f"empty live list kept for {job_id}"
        assert instants == sorted(set(instants)), f"live list of {job_id} not sorted or has duplicates"
    for run in (run for runs in state.runs.values() for run in runs):
        if run.status == LEASED:
            assert run.attempts and run.attempts[-1].fencing_token == run.fencing_token
            assert run.lease_expires_us > 0 and run.attempts[-1].outcome == ""
        tokens = [attempt.fencing_token for attempt in run.attempts]
        assert tokens == sorted(set(tokens)), "fencing tokens must only grow"
        assert [attempt.number for attempt in run.attempts] == list(range(1, run.attempt + 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_live_index_is_exact_and_replicas_agree_after_any_execution_sequence(data: st.DataObject) -> None:
    gen = ExecutionGenerator(data)
    leader, follower = State(), State()
    commands = gen.preamble()
    steps = data.draw(st.integers(1, 60), label="steps")
    index = 0
    for step in range(len(commands) + steps):
        command = commands[step] if step < len(commands) else gen.command(leader)
        index += 1 if step < len(commands) else data.draw(st.integers(1, 2))
        expected = apply_checking_time(leader, command, index)
        assert apply(follower, decode_command(encode_command(command)), index) == expected
        _assert_live_index_exact(leader)
        assert state_digest(follower) == state_digest(leader)
    assert follower.run_count == sum(len(runs) for runs in follower.runs.values())
    # A replica restored from a snapshot has the same index, and goes on agreeing.
    restored = decode_snapshot(encode_snapshot(leader))
    assert restored.live_runs == leader.live_runs and state_digest(restored) == state_digest(leader)


def test_a_leader_clock_past_year_9999_is_read_as_the_last_instant_a_snapshot_holds(core: Core) -> None:
    # Found by test_apply_never_raises_for_a_decodable_command: every u64 decodes, and a new
    # leader's clock near 2**64 us pushed live lease expiries past what a snapshot can encode.
    from scheduler.core.clock import MAX_TIME_US
    from scheduler.core.codec import decode_snapshot, encode_snapshot

    grant_a(core, slot(1))
    assert core.lead("n2", term=2, issued_at_us=2**64 - 1).accepted
    assert core.state.now_us == MAX_TIME_US
    restored = decode_snapshot(encode_snapshot(core.state))
    assert restored.now_us == MAX_TIME_US and restored.get_run("a", slot(1)).lease_expires_us > MAX_TIME_US
