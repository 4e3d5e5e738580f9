"""ApplyJobs and SetJobPaused: compare-and-set versions, all-or-nothing, request-id dedup, cursors."""

from __future__ import annotations

import msgspec
import pytest

from scheduler.core import codec
from scheduler.core.commands import ApplyJobs, SetJobPaused
from scheduler.core.jobs import MAX_PLAN_SKEW_US
from scheduler.core.model import SECOND_US, RetryPolicy
from scheduler.core.results import (
    JobAdded,
    JobChanged,
    JobPaused,
    JobRemoved,
    JobResumed,
    JobUnchanged,
    Result,
)
from scheduler.core.state import State
from tests.fakes import Core, FakeClock, claim, spec, upsert

TEN_S = 10 * SECOND_US
THIRTY_S = 30 * SECOND_US


def durable_view(state: State) -> str:
    """Digest of everything except the log position and replicated time."""
    return codec.state_digest(msgspec.structs.replace(state, applied_index=0, now_us=0))


@pytest.fixture
def core() -> Core:
    core = Core(FakeClock())
    core.lead()
    return core


def add(core: Core, job_id: str = "a", **fields) -> Result:
    due = core.clock.now_us + TEN_S
    return core.apply_jobs((upsert(spec(job_id, **fields), next_due_us=due),))


# -- add / change / unchanged / remove ------------------------------------------------


def test_add_creates_version_one_with_cursor_at_issue_time(core: Core) -> None:
    issued = core.clock.tick()
    core.advance(issued)  # the leader's clock has reached the proposer's: they agree
    result = core.apply_jobs((upsert(spec("a"), next_due_us=issued + TEN_S),), issued_at_us=issued, author="alice")
    assert result.accepted and result.events == (JobAdded("a", 1),)
    job = core.state.jobs["a"]
    assert job.version == 1 and job.author == "alice"
    assert job.cursor_us == issued
    assert job.next_due_us == issued + TEN_S
    assert job.updated_us == core.state.now_us == issued
    assert job.spec == spec("a")


@pytest.mark.parametrize("skew_s", [-3600, 3600])
def test_apply_jobs_never_moves_time_and_is_stamped_with_replicated_time(core: Core, skew_s: int) -> None:
    now = core.state.now_us
    issued = now + skew_s * SECOND_US  # a client's or a node's wall clock, an hour off
    before = durable_view(core.state)
    # A job planned from that clock would owe slots from the wrong instant: refused, retryably.
    refused = core.apply_jobs((upsert(spec("a"), next_due_us=_first_slot_after(issued)),), issued_at_us=issued)
    assert refused.rejection.code == "stale_plan" and refused.rejection.retryable
    assert core.state.now_us == now and durable_view(core.state) == before
    # Planned again from replicated time, it is added.
    assert core.apply_jobs((upsert(spec("a"), next_due_us=_first_slot_after(now)),)).events == (JobAdded("a", 1),)
    # A change that keeps the job's slots is no plan: accepted from any clock, stamped at replicated time.
    changed = core.apply_jobs((upsert(spec("a", owner="ops"), expected_version=1),), issued_at_us=issued)
    assert changed.events == (JobChanged("a", 2),)
    assert core.state.now_us == now and core.state.jobs["a"].updated_us == now
    # A new schedule is a plan again: refused from that clock, though its next due is right.
    rescheduled = spec("a", owner="ops", schedule="*/30 * * * * *")
    refused = core.apply_jobs(
        (upsert(rescheduled, expected_version=2, next_due_us=_first_slot_after(now, THIRTY_S)),), issued_at_us=issued
    )
    assert refused.rejection.code == "stale_plan" and refused.rejection.retryable
    assert core.state.jobs["a"].version == 2 and core.state.jobs["a"].spec == spec("a", owner="ops")
    core.apply(SetJobPaused(issued_at_us=issued, job_id="a", paused=True, author="bob", reason="", request_id=""))
    assert core.state.now_us == now
    # Removals are no plan either.
    assert core.apply_jobs(removals=("a",), issued_at_us=issued).events == (JobRemoved("a", 2),)
    assert core.state.now_us == now


def _first_slot_after(instant_us: int, period_us: int = TEN_S) -> int:
    """The first slot of an every-`period_us` job (10 s or 30 s) strictly after `instant_us`."""
    return (instant_us // period_us + 1) * period_us


@pytest.mark.parametrize("skew_s", [-600, -61, 61, 600])
def test_a_new_jobs_slots_are_owed_from_replicated_time_whatever_the_proposers_clock(core: Core, skew_s: int) -> None:
    now = core.state.now_us
    issued = now + skew_s * SECOND_US
    # The proposer plans the first slot after its own clock, as the API servicer once did.
    result = core.apply_jobs((upsert(spec("a"), next_due_us=_first_slot_after(issued)),), issued_at_us=issued)
    # Behind, the job would owe slots from before it existed; ahead, it would skip those between
    # replicated now and that clock. Refused, retryably, and nothing is added.
    assert result.rejection.code == "stale_plan" and result.rejection.retryable
    assert core.state.jobs == {} and core.state.now_us == now
    # The proposer plans again from replicated time (its view of it): every slot strictly after
    # replicated now is owed, none at or before it.
    result = core.apply_jobs((upsert(spec("a"), next_due_us=_first_slot_after(now)),))
    assert result.events == (JobAdded("a", 1),)
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (now, _first_slot_after(now))


@pytest.mark.parametrize("lag_s", [0, 1, 30])
def test_a_new_jobs_cursor_is_the_proposers_view_of_replicated_time(core: Core, lag_s: int) -> None:
    # The proposer's view is replicated time as its replica had applied it: never ahead, and
    # behind by the time the entry took to commit (milliseconds; a minute at most is tolerated).
    view = core.state.now_us
    core.advance(view + lag_s * SECOND_US)
    result = core.apply_jobs((upsert(spec("a"), next_due_us=_first_slot_after(view)),), issued_at_us=view)
    assert result.events == (JobAdded("a", 1),)
    job = core.state.jobs["a"]
    # Owed from the instant the plan was made from, so the plan's next due is the first slot owed.
    assert (job.cursor_us, job.next_due_us) == (view, _first_slot_after(view))
    assert job.updated_us == core.state.now_us == view + lag_s * SECOND_US


@pytest.mark.parametrize("change", ["add", "reschedule"])
@pytest.mark.parametrize("direction", [-1, 1])
def test_a_plan_is_accepted_exactly_at_the_skew_limit_and_refused_one_microsecond_past_it(
    core: Core, change: str, direction: int
) -> None:
    if change == "reschedule":
        add(core)
        planned = spec("a", schedule="*/30 * * * * *")
    else:
        planned = spec("a")
    old_cursor = core.state.jobs["a"].cursor_us if change == "reschedule" else 0
    # Replicated time moves well past the old cursor, so that where the new one lands shows.
    core.advance(core.state.now_us + 300 * SECOND_US)
    now = core.state.now_us
    expected_version = 1 if change == "reschedule" else 0
    due = _first_slot_after(now + MAX_PLAN_SKEW_US, THIRTY_S)  # after any cursor below
    before = durable_view(core.state)

    # Behind, a view may lag by up to the skew limit; ahead, not at all (its next due would
    # skip the slots between replicated now and its clock).
    limit_us = MAX_PLAN_SKEW_US if direction < 0 else 0
    past = core.apply_jobs((upsert(planned, expected_version, due),), issued_at_us=now + direction * (limit_us + 1))
    assert past.rejection.code == "stale_plan" and past.rejection.retryable
    assert durable_view(core.state) == before and core.state.now_us == now

    at_limit = now + direction * limit_us
    result = core.apply_jobs((upsert(planned, expected_version, due),), issued_at_us=at_limit)
    assert result.accepted and core.state.now_us == now
    job = core.state.jobs["a"]
    # The proposer's view is where the slots start.
    assert job.cursor_us == max(old_cursor, at_limit)
    assert (job.version, job.next_due_us, job.spec) == (expected_version + 1, due, planned)


@pytest.mark.parametrize("change", ["add", "reschedule"])
@pytest.mark.parametrize("ahead_s", [10, 30, 60])
def test_a_plan_from_a_view_ahead_of_replicated_time_cannot_skip_slots(core: Core, change: str, ahead_s: int) -> None:
    if change == "reschedule":
        add(core)
    planned, period = (spec("a", schedule="*/30 * * * * *"), THIRTY_S) if change == "reschedule" else (spec("a"), TEN_S)
    expected_version = 1 if change == "reschedule" else 0
    now = core.state.now_us
    issued = now + ahead_s * SECOND_US
    assert _first_slot_after(now, period) < _first_slot_after(issued, period)  # a slot lies between
    result = core.apply_jobs(
        (upsert(planned, expected_version, _first_slot_after(issued, period)),), issued_at_us=issued
    )
    if result.accepted:
        # Owed: every slot strictly after the cursor; the next due is the first of them.
        job = core.state.jobs["a"]
        assert job.next_due_us == _first_slot_after(job.cursor_us, period)
    else:
        # Or the plan is refused, and the proposer plans again.
        assert result.rejection.code == "stale_plan" and result.rejection.retryable


def test_same_spec_is_unchanged_and_keeps_version(core: Core) -> None:
    add(core)
    before = core.state.jobs["a"]
    before_fields = msgspec.structs.asdict(before)
    result = core.apply_jobs((upsert(spec("a"), expected_version=1, next_due_us=0),), author="carol")
    assert result.events == (JobUnchanged("a", 1),)
    assert msgspec.structs.asdict(core.state.jobs["a"]) == before_fields


def test_non_schedule_change_bumps_version_and_keeps_cursor(core: Core) -> None:
    add(core)
    old = msgspec.structs.replace(core.state.jobs["a"])
    result = core.apply_jobs(
        (upsert(spec("a", owner="ops", retry=RetryPolicy(max_attempts=5)), expected_version=1, next_due_us=123),),
        author="dave",
    )
    assert result.events == (JobChanged("a", 2),)
    job = core.state.jobs["a"]
    assert job.version == 2 and job.author == "dave" and job.spec.owner == "ops"
    # The proposer's next due is ignored: slots did not change.
    assert (job.cursor_us, job.next_due_us) == (old.cursor_us, old.next_due_us)
    assert job.updated_us == core.state.now_us


def test_remove(core: Core) -> None:
    add(core)
    result = core.apply_jobs(removals=("a",))
    assert result.events == (JobRemoved("a", 1),)
    assert "a" not in core.state.jobs


def test_add_change_and_remove_in_one_command(core: Core) -> None:
    add(core, "a")
    add(core, "b")
    due = core.clock.now_us + TEN_S
    result = core.apply_jobs(
        (
            upsert(spec("a", owner="x"), expected_version=1),
            upsert(spec("c"), next_due_us=due + TEN_S),
            upsert(spec("b"), expected_version=1),
        ),
        removals=(),
    )
    assert result.events == (JobChanged("a", 2), JobAdded("c", 1), JobUnchanged("b", 1))
    result = core.apply_jobs(removals=("a", "c"))
    assert result.events == (JobRemoved("a", 2), JobRemoved("c", 1))
    assert sorted(core.state.jobs) == ["b"]


# -- compare-and-set and all-or-nothing ------------------------------------------------


@pytest.mark.parametrize("expected", [0, 2, 7])
def test_version_conflict_is_retryable_and_changes_nothing(core: Core, expected: int) -> None:
    add(core)
    before = durable_view(core.state)
    result = core.apply_jobs((upsert(spec("a", owner="x"), expected_version=expected),))
    assert result.rejection is not None
    assert result.rejection.code == "version_conflict"
    assert result.rejection.retryable
    assert durable_view(core.state) == before


def test_new_job_with_nonzero_expected_version_conflicts(core: Core) -> None:
    result = core.apply_jobs((upsert(spec("new"), expected_version=1),))
    assert result.rejection.code == "version_conflict" and result.rejection.retryable
    assert core.state.jobs == {}


def _bad_items(core: Core) -> dict[str, ApplyJobs]:
    due = core.clock.now_us + 100 * TEN_S
    good = upsert(spec("fresh"), next_due_us=due)
    change = upsert(spec("a", owner="changed"), expected_version=1)
    return {
        "version_conflict": ((good, change, upsert(spec("b"), expected_version=3)), ()),
        "invalid_repeat": ((good, change, upsert(spec("fresh"), next_due_us=due)), ()),
        "invalid_empty_id": ((good, change, upsert(spec(""), next_due_us=due)), ()),
        "invalid_negative_due": ((good, change, upsert(spec("c"), next_due_us=-1)), ()),
        "invalid_upsert_and_remove": ((good, change), ("a",)),
        "not_found": ((good, change), ("b", "ghost")),
        "stale_plan": ((good, change, upsert(spec("b", schedule="0 * * * *"), expected_version=1, next_due_us=1)), ()),
    }


@pytest.mark.parametrize(
    "case, code",
    [
        ("version_conflict", "version_conflict"),
        ("invalid_repeat", "invalid"),
        ("invalid_empty_id", "invalid"),
        ("invalid_negative_due", "invalid"),
        ("invalid_upsert_and_remove", "invalid"),
        ("not_found", "not_found"),
        ("stale_plan", "stale_plan"),
    ],
)
def test_any_bad_item_rejects_the_whole_command(core: Core, case: str, code: str) -> None:
    add(core, "a")
    add(core, "b")
    upserts, removals = _bad_items(core)[case]
    before = durable_view(core.state)
    result = core.apply_jobs(upserts, removals=removals)
    assert result.rejection is not None and result.rejection.code == code
    assert result.events == ()
    assert durable_view(core.state) == before
    assert "fresh" not in core.state.jobs
    assert core.state.jobs["a"].version == 1


# -- request ids ---------------------------------------------------------------------


def test_repeated_request_id_returns_the_first_result_and_changes_nothing(core: Core) -> None:
    due = core.clock.now_us + TEN_S
    command = ApplyJobs(
        issued_at_us=core.state.now_us,
        author="alice",
        request_id="req-1",
        upserts=(upsert(spec("a"), next_due_us=due),),
    )
    first = core.apply(command)
    assert first.events == (JobAdded("a", 1),)
    before = durable_view(core.state)
    # The same command again (an unknown-outcome retry), later in the log: no version conflict,
    # no second add, the first result verbatim (its index is the first entry's).
    again = core.apply(msgspec.structs.replace(command, issued_at_us=core.clock.tick()))
    assert again == first
    assert durable_view(core.state) == before
    # Even a different command under the same id is answered from memory.
    other = core.apply_jobs(removals=("a",), request_id="req-1")
    assert other == first
    assert "a" in core.state.jobs


def test_final_rejection_is_replayed_for_a_repeated_request_id(core: Core) -> None:
    first = core.apply_jobs(removals=("ghost",), request_id="req-y")
    assert first.rejection.code == "not_found" and not first.rejection.retryable
    add(core, "ghost")
    again = core.apply_jobs(removals=("ghost",), request_id="req-y")
    assert again == first
    assert "ghost" in core.state.jobs


def test_retryable_rejection_is_not_remembered(core: Core) -> None:
    change = (upsert(spec("a", owner="x"), expected_version=1),)
    first = core.apply_jobs(change, request_id="req-x")
    assert first.rejection.code == "version_conflict" and first.rejection.retryable
    assert "req-x" not in core.state.request_results
    add(core, "a")
    # The retry under the same id gets a fresh evaluation, and is then remembered.
    retried = core.apply_jobs(change, request_id="req-x")
    assert retried.events == (JobChanged("a", 2),)
    assert core.apply_jobs(change, request_id="req-x") == retried


def test_empty_request_id_is_never_deduplicated(core: Core) -> None:
    add(core)
    assert core.pause("a", request_id="").accepted
    second = core.pause("a", request_id="")
    assert second.index == core.index  # a fresh result, not a replay


def test_request_memory_is_bounded_and_fifo(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler.core import state as state_module

    monkeypatch.setattr(state_module, "REQUEST_MEMORY", 3)
    add(core)
    firsts = [core.pause("a", paused=bool(i % 2), request_id=f"r{i}") for i in range(4)]
    assert core.state.request_fifo == ["r1", "r2", "r3"]
    assert sorted(core.state.request_results) == ["r1", "r2", "r3"]
    assert core.pause("a", paused=True, request_id="r3") == firsts[3]
    # r0 was forgotten: applied anew.
    fresh = core.pause("a", paused=False, request_id="r0")
    assert fresh.index == core.index and fresh != firsts[0]


def test_set_job_paused_dedups_by_request_id(core: Core) -> None:
    add(core)
    first = core.pause("a", paused=True, request_id="p-1")
    core.pause("a", paused=False, request_id="p-2")
    assert core.pause("a", paused=True, request_id="p-1") == first
    assert not core.state.jobs["a"].paused


# -- schedule changes restart the cursor -----------------------------------------------


def test_schedule_change_restarts_cursor_at_issue_time_when_ahead_of_cursor(core: Core) -> None:
    add(core)
    job = core.state.jobs["a"]
    core.claim_runs(claim("a", job.next_due_us, job.next_due_us + TEN_S))
    cursor = core.state.jobs["a"].cursor_us
    issued = core.clock.set(cursor + 3 * TEN_S)
    core.advance(issued)  # replicated time has reached the proposer's clock
    result = core.apply_jobs(
        (upsert(spec("a", schedule="*/30 * * * * *"), expected_version=1, next_due_us=issued + 1),),
        issued_at_us=issued,
    )
    assert result.events == (JobChanged("a", 2),)
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (issued, issued + 1)


@pytest.mark.parametrize("field", ["schedule", "timezone", "dst_gap", "dst_repeat"])
def test_schedule_change_keeps_cursor_when_cursor_is_ahead(core: Core, field: str) -> None:
    add(core)
    due = core.state.jobs["a"].next_due_us
    # Claimed by a leader whose clock ran ahead: the cursor is after the next proposer's clock.
    core.claim_runs(claim("a", due, due + TEN_S), issued_at_us=due)
    issued = core.clock.set(due - 5 * SECOND_US)
    changed = {"schedule": "*/30 * * * * *", "timezone": "Europe/Paris", "dst_gap": "skip", "dst_repeat": "both"}
    new_spec = msgspec.structs.replace(spec("a"), **{field: changed[field]})
    result = core.apply_jobs((upsert(new_spec, expected_version=1, next_due_us=due + 1),), issued_at_us=issued)
    assert result.events == (JobChanged("a", 2),)
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (due, due + 1)


def test_schedule_change_with_next_due_not_after_restarted_cursor_is_stale_plan(core: Core) -> None:
    add(core)
    due = core.state.jobs["a"].next_due_us
    core.claim_runs(claim("a", due, due + TEN_S), issued_at_us=due)
    before = durable_view(core.state)
    issued = core.clock.set(due - 5 * SECOND_US)
    for stale_due in (due, due - 1, issued):
        result = core.apply_jobs(
            (upsert(spec("a", schedule="*/30 * * * * *"), expected_version=1, next_due_us=stale_due),),
            issued_at_us=issued,
        )
        assert result.rejection is not None
        assert result.rejection.code == "stale_plan" and result.rejection.retryable
        assert durable_view(core.state) == before


def test_new_job_with_next_due_not_after_issue_time_is_stale_plan(core: Core) -> None:
    issued = core.state.now_us  # the proposer's view of replicated time: the new job's cursor
    for due in (issued, issued - 1):
        result = core.apply_jobs((upsert(spec("a"), next_due_us=due),), issued_at_us=issued)
        assert result.rejection.code == "stale_plan"
    assert core.state.jobs == {}


def test_schedule_without_slots_is_accepted_with_next_due_zero(core: Core) -> None:
    result = core.apply_jobs((upsert(spec("a", schedule="0 0 30 2 *"), next_due_us=0),))
    assert result.accepted and core.state.jobs["a"].next_due_us == 0


# -- pause / resume --------------------------------------------------------------------


def test_pause_and_resume_keep_version_and_record_who(core: Core) -> None:
    add(core)
    result = core.pause("a", True, reason="disk full")
    assert result.events == (JobPaused("a", 1),)
    job = core.state.jobs["a"]
    assert job.paused and job.paused_by == "bob" and job.paused_reason == "disk full"
    assert job.version == 1
    result = core.pause("a", False)
    assert result.events == (JobResumed("a", 1),)
    job = core.state.jobs["a"]
    assert not job.paused and job.paused_by == "" and job.paused_reason == ""


def test_pause_unknown_job_is_not_found(core: Core) -> None:
    result = core.pause("ghost")
    assert result.rejection.code == "not_found" and not result.rejection.retryable


def test_operator_pause_survives_an_unrelated_spec_change(core: Core) -> None:
    add(core)
    core.pause("a", True)
    core.apply_jobs((upsert(spec("a", owner="x"), expected_version=1),))
    job = core.state.jobs["a"]
    assert job.version == 2 and job.paused and job.paused_by == "bob"


def test_spec_paused_flag_pauses_new_and_changed_jobs(core: Core) -> None:
    add(core, "a", paused=True)
    assert core.state.jobs["a"].paused
    add(core, "b")
    core.apply_jobs((upsert(spec("b", paused=True), expected_version=1),))
    assert core.state.jobs["b"].paused
    core.apply_jobs((upsert(spec("b", paused=False), expected_version=2),))
    assert not core.state.jobs["b"].paused


def test_the_specs_flag_turning_on_keeps_an_operators_pause_and_turning_off_ends_any_pause(core: Core) -> None:
    add(core)
    core.pause("a", True, reason="disk full")
    core.apply_jobs((upsert(spec("a", paused=True), expected_version=1),))
    job = core.state.jobs["a"]
    assert job.paused and (job.paused_by, job.paused_reason) == ("bob", "disk full")
    core.apply_jobs((upsert(spec("a", paused=False), expected_version=2),))
    job = core.state.jobs["a"]
    assert not job.paused and (job.paused_by, job.paused_reason) == ("", "")


def test_a_readded_job_continues_the_versions_of_the_deleted_one() -> None:
    """Found by the simulation (seed 287990453): with versions restarting at 1, a claim the leader
    planned against the deleted job passed as current for the new one, and its next slot (from
    the old schedule) skipped the new schedule's slots in between without a record."""
    core = Core()
    core.lead()
    start = core.state.now_us
    old = spec("a", schedule="*/5 * * * * *")
    core.apply_jobs((upsert(old, next_due_us=start + 5 * SECOND_US),))
    stale = claim("a", start + 5 * SECOND_US, start + 10 * SECOND_US, spec_version=1)
    core.apply_jobs(removals=("a",))
    added = core.apply_jobs((upsert(spec("a", schedule="* * * * * *"), next_due_us=core.state.now_us + SECOND_US),))
    assert added.events == (JobAdded("a", 2),)
    result = core.claim_runs(stale)
    assert [type(e).__name__ for e in result.events] == ["ClaimOutOfPlan"] and result.events[0].reason == "stale_spec"
