"""apply(): log index discipline and replicated time (the leader's, never backwards)."""

from __future__ import annotations

import pytest

from scheduler.core import apply, state_digest
from scheduler.core.clock import MAX_DRIFT_PPM, SLACK_US, bounded_now_us
from scheduler.core.commands import (
    AdvanceTime,
    ClaimLeadership,
    ClaimRuns,
    Command,
    CompleteRuns,
    ExpireLeases,
    ExtendLeases,
    GrantLeases,
    ReadBarrier,
)
from scheduler.core.model import SECOND_US
from scheduler.core.results import JobAdded, JobChanged
from scheduler.core.state import State
from tests.fakes import T0_US, Core, FakeClock, claim, clock_of, spec, upsert

TEN_S = 10 * SECOND_US
HOUR = 3600 * SECOND_US


def slot(k: int) -> int:
    return T0_US + k * TEN_S


# -- log indices ---------------------------------------------------------------------


@pytest.mark.parametrize("second_index", [5, 4, 0, -3])
def test_index_must_increase(second_index: int) -> None:
    core = Core()
    core.lead(term=1)
    core.apply(ClaimLeadership(issued_at_us=core.clock.tick(), node_id="n1", term=1), index=5)
    before = state_digest(core.state)
    result = core.apply(
        ClaimLeadership(issued_at_us=core.clock.tick(100 * SECOND_US), node_id="n2", term=9), index=second_index
    )
    assert result.rejection is not None and result.rejection.code == "index_not_increasing"
    assert result.index == second_index
    # Nothing moved: not the epoch, not the log position, not the time.
    assert state_digest(core.state) == before
    assert core.state.applied_index == 5


def test_gaps_in_indices_are_fine() -> None:
    # pysyncobj's own no-op and membership entries never reach the core.
    core = Core()
    core.lead()
    assert core.apply(ClaimLeadership(issued_at_us=core.clock.tick(), node_id="n2", term=2), index=10).accepted
    assert core.state.applied_index == 10


def test_read_barrier_changes_nothing_but_position() -> None:
    core = Core()
    core.lead()
    core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)),))
    before = state_digest(core.state)
    now = core.state.now_us
    # Whatever the proposer's clock says: a read barrier is not the leader's clock tick.
    result = core.apply(ReadBarrier(issued_at_us=now + 3600 * SECOND_US))
    assert result.accepted and result.events == () and result.index == core.index
    assert (core.state.applied_index, core.state.now_us) == (core.index, now)
    core.state.applied_index = 2
    assert state_digest(core.state) == before


def _stale_term(core: Core, issued: int) -> Command:
    return ClaimLeadership(issued_at_us=issued, node_id="old", term=1, monotonic_us=issued)


def _stale_epoch_tick(core: Core, issued: int) -> Command:
    return AdvanceTime(issued_at_us=issued, epoch=core.state.epoch - 1, monotonic_us=issued)


def _future_epoch_claim(core: Core, issued: int) -> Command:
    return ClaimRuns(
        issued_at_us=issued, epoch=core.state.epoch + 1, claims=(claim("a", slot(1), slot(2)),), monotonic_us=issued
    )


def _epoch_zero_grant(core: Core, issued: int) -> Command:
    return GrantLeases(issued_at_us=issued, epoch=0, worker_id="w", lease_ttl_us=TEN_S, grants=(), monotonic_us=issued)


def _stale_epoch_expiry(core: Core, issued: int) -> Command:
    return ExpireLeases(issued_at_us=issued, epoch=core.state.epoch - 1, expiries=(), monotonic_us=issued)


@pytest.mark.parametrize(
    ("build", "code"),
    [
        (_stale_term, "stale_term"),
        (_stale_epoch_tick, "stale_epoch"),
        (_future_epoch_claim, "stale_epoch"),
        (_epoch_zero_grant, "stale_epoch"),
        (_stale_epoch_expiry, "stale_epoch"),
    ],
)
def test_rejected_commands_consume_their_entry_and_move_nothing_else(build, code: str) -> None:
    core = Core()
    core.lead(term=3)
    core.lead("n2", term=3)  # epoch 2: epoch 1 is stale
    core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)),))
    before = state_digest(core.state)
    now = core.state.now_us
    # A deposed leader's clock, an hour ahead and backed by its own monotonic clock.
    result = core.apply(build(core, now + 3600 * SECOND_US))
    assert result.rejection.code == code
    assert (core.state.applied_index, core.state.now_us) == (core.index, now)
    core.state.applied_index -= 1
    assert state_digest(core.state) == before


def test_without_a_leader_nothing_moves_time() -> None:
    core = Core()
    result = core.apply(AdvanceTime(issued_at_us=T0_US, epoch=0, monotonic_us=T0_US))
    assert result.rejection.code == "stale_epoch"
    # Without replicated time to go by, a job planned from a wall clock is a plan far from it.
    planned = core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)),), issued_at_us=T0_US)
    assert planned.rejection.code == "stale_plan" and planned.rejection.retryable
    core.apply(ReadBarrier(issued_at_us=T0_US))
    assert core.state.now_us == 0 and core.state.applied_index == core.index == 3
    assert core.state.jobs == {}


# -- replicated time: assigned by the leader, never backwards -------------------------


def test_only_the_leaders_epoch_commands_and_a_new_epoch_move_time() -> None:
    core = Core()
    opened = core.lead().index
    assert core.state.now_us == core.clock.now_us == T0_US + SECOND_US and opened == 1
    ahead = core.state.now_us + 300 * SECOND_US
    # Clients, workers and followers with clocks five minutes ahead: judged at replicated time.
    # A job planned from such a clock is refused (its slots would start at the wrong instant) ...
    far = core.apply_jobs((upsert(spec("a"), next_due_us=ahead + TEN_S),), issued_at_us=ahead)
    assert far.rejection.code == "stale_plan" and "a" not in core.state.jobs
    # ... one planned from replicated time is added; a change that keeps its slots is not a plan.
    assert core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)),)).events == (JobAdded("a", 1),)
    changed = core.apply_jobs((upsert(spec("a", owner="x"), expected_version=1),), issued_at_us=ahead)
    assert changed.events == (JobChanged("a", 2),)
    assert core.state.jobs["a"].updated_us == core.state.jobs["a"].cursor_us == T0_US + SECOND_US
    assert core.state.now_us == T0_US + SECOND_US
    core.pause("a", reason="x")
    core.apply(ExtendLeases(issued_at_us=ahead, leases=()))
    core.apply(CompleteRuns(issued_at_us=ahead, completions=()))
    core.apply(ReadBarrier(issued_at_us=ahead))
    assert core.state.now_us == T0_US + SECOND_US
    # Each of the leader's epoch commands moves it.
    for command_type, fields in [
        (AdvanceTime, {}),
        (ClaimRuns, {"claims": ()}),
        (GrantLeases, {"worker_id": "w", "lease_ttl_us": TEN_S, "grants": ()}),
        (ExpireLeases, {"expiries": ()}),
    ]:
        at = core.state.now_us + SECOND_US
        assert core.apply(command_type(issued_at_us=at, epoch=1, monotonic_us=at, **fields)).accepted
        assert core.state.now_us == at, command_type.__name__
        assert core.state.clock_ignored_us == 0


def test_older_issued_at_does_not_move_time_backwards() -> None:
    clock = FakeClock()
    core = Core(clock)
    core.lead()
    core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)),))
    fast = clock.set(slot(1) + 30 * SECOND_US)
    core.claim_runs(claim("a", slot(1), slot(2)), issued_at_us=fast)
    assert core.state.now_us == fast
    # A new leader whose clock is two minutes behind.
    slow = clock.back(120 * SECOND_US)
    core.lead("n2", term=2, issued_at_us=slow)
    assert core.state.now_us == fast
    assert (core.state.clock_anchor_now_us, core.state.clock_anchor_mono_us) == (fast, slow)
    core.claim_runs(claim("a", slot(2), slot(3)), issued_at_us=slow + SECOND_US)
    assert core.state.now_us == fast and core.state.clock_ignored_us == 0
    # Records stamped by the core use replicated time, not the proposer's clock.
    assert core.state.get_run("a", slot(2)).claimed_us == fast
    core.apply_jobs((upsert(spec("a", owner="x"), expected_version=1),), issued_at_us=slow)
    assert core.state.jobs["a"].updated_us == fast
    # A follower's clock past the mark moves nothing; the leader's clock, once past it, does.
    later = fast + SECOND_US
    core.apply(ReadBarrier(issued_at_us=later))
    assert core.state.now_us == fast
    core.advance_time(issued_at_us=later)
    assert core.state.now_us == later and core.state.clock_ignored_us == 0


def test_time_never_decreases_and_only_the_leaders_ticks_move_it() -> None:
    clock = FakeClock()
    core = Core(clock)
    core.lead()
    mono = clock.now_us
    seen, walls = [core.state.now_us], [clock.now_us]
    for step in [5, -3, 7, -20, 1, 1, -1, 30, -30]:
        # The leader's wall clock is stepped back and forth; its monotonic clock only moves on.
        issued = clock.tick(step * SECOND_US)
        mono += max(step, 1) * SECOND_US
        walls.append(issued)
        # A follower's clock a minute ahead of the leader's changes nothing.
        core.apply(ReadBarrier(issued_at_us=issued + 60 * SECOND_US))
        assert core.state.now_us == seen[-1]
        assert core.advance_time(issued_at_us=issued, monotonic_us=mono).accepted
        seen.append(core.state.now_us)
        assert core.state.clock_ignored_us == 0
    assert seen == sorted(seen)
    assert seen[-1] == max(walls) == T0_US + 21 * SECOND_US


def test_a_wall_clock_jump_within_an_epoch_is_clamped_to_the_monotonic_clock() -> None:
    core = Core()
    core.lead(issued_at_us=T0_US, monotonic_us=5 * SECOND_US)
    # The wall clock jumps an hour ahead while one second passes on the monotonic clock.
    result = core.advance_time(issued_at_us=T0_US + 3600 * SECOND_US, monotonic_us=6 * SECOND_US)
    assert result.accepted
    bound = T0_US + SECOND_US + SECOND_US * MAX_DRIFT_PPM // 1_000_000 + SLACK_US
    assert core.state.now_us == bounded_now_us(core.state, 6 * SECOND_US) == bound
    assert core.state.clock_ignored_us == T0_US + 3600 * SECOND_US - bound
    # While the wall clock stays ahead, replicated time follows the monotonic clock.
    core.advance_time(issued_at_us=T0_US + 3700 * SECOND_US, monotonic_us=105 * SECOND_US)
    assert core.state.now_us == T0_US + 100 * SECOND_US + 100 * SECOND_US // 1000 + SLACK_US
    assert core.state.clock_ignored_us > 0
    # A reading within the bound is taken as is and clears what was ignored.
    within = core.state.now_us + SECOND_US
    core.advance_time(issued_at_us=within, monotonic_us=106 * SECOND_US)
    assert (core.state.now_us, core.state.clock_ignored_us) == (within, 0)
    # A new leader's clock opens its epoch as it is (never backwards).
    core.lead("n2", term=2, issued_at_us=T0_US + 3600 * SECOND_US, monotonic_us=SECOND_US)
    assert (core.state.now_us, core.state.clock_ignored_us) == (T0_US + 3600 * SECOND_US, 0)


def test_a_new_epoch_clears_what_the_deposed_leaders_clock_had_ignored() -> None:
    core = Core()
    core.lead(issued_at_us=T0_US, monotonic_us=0)
    core.advance_time(issued_at_us=T0_US + HOUR, monotonic_us=SECOND_US)
    assert core.state.clock_ignored_us > 0
    # The new leader's clock is within anything its own epoch could bound: nothing is ignored,
    # and its epoch clock is anchored at its own reading.
    opened = core.state.now_us + SECOND_US
    core.lead("n2", term=2, issued_at_us=opened, monotonic_us=7 * SECOND_US)
    assert clock_of(core.state) == (opened, opened, 7 * SECOND_US, 0)
    # Even a new leader whose clock is behind the mark: time stays, the epoch anchors there.
    mark = core.state.now_us
    core.advance_time(issued_at_us=mark + HOUR, monotonic_us=8 * SECOND_US)
    assert core.state.clock_ignored_us > 0
    mark = core.state.now_us
    core.lead("n3", term=3, issued_at_us=mark - HOUR, monotonic_us=0)
    assert clock_of(core.state) == (mark, mark, 0, 0)


@pytest.mark.parametrize("reading", ["within_bound", "clock_jump"])
def test_a_rejected_epoch_command_restores_time_and_the_clock_anchor_exactly(reading: str) -> None:
    core = Core()
    core.lead(issued_at_us=T0_US, monotonic_us=0)
    # A jump within the epoch: time is clamped, the anchor kept, what was ignored recorded,
    # so every part of the clock differs from every other.
    core.advance_time(issued_at_us=T0_US + HOUR, monotonic_us=SECOND_US)
    clock = clock_of(core.state)
    now, anchor_now, anchor_mono, ignored = clock
    assert (anchor_now, anchor_mono) == (T0_US, 0) and now > anchor_now and ignored > 0
    before = state_digest(core.state)
    mono = 3 * SECOND_US
    bound = bounded_now_us(core.state, mono)
    issued = {"within_bound": now + SECOND_US, "clock_jump": T0_US + 2 * HOUR}[reading]
    # The current epoch's grant, rejected by its handler (a TTL of zero) after time was moved.
    result = core.grant(lease_ttl_us=0, issued_at_us=issued, monotonic_us=mono)
    assert result.rejection.code == "invalid" and result.index == core.index
    assert clock_of(core.state) == clock
    core.state.applied_index -= 1
    assert state_digest(core.state) == before
    core.state.applied_index += 1
    # The same reading, accepted, would have changed each part of the clock.
    assert core.advance_time(issued_at_us=issued, monotonic_us=mono).accepted
    if reading == "within_bound":
        assert clock_of(core.state) == (issued, issued, mono, 0)
    else:
        assert clock_of(core.state) == (bound, anchor_now, anchor_mono, issued - bound)
        assert bound > now and issued - bound != ignored


def test_apply_on_a_plain_state_object() -> None:
    # The public entry point, without the test harness.
    state = State()
    result = apply(state, ClaimLeadership(issued_at_us=1, node_id="n", term=1), 3)
    assert result.index == 3 and state.applied_index == 3 and state.epoch == 1
