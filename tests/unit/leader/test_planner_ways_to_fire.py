"""The leader's planner for jobs that fire other than by one plain schedule: claims chain through
`next_owed_slot`, carry the schedule each slot came from, stop at the window and the runs left."""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core.commands import ApplyJobs, ClaimRuns
from scheduler.core.model import SECOND_US, ActiveWindow, Job, MisfirePolicy
from scheduler.leader.clock import LeaderClock
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.leader.planner import plan_due_slots, plan_job_slots
from scheduler.leader.trigger import TriggerLoop
from scheduler.planning.jobs import first_due_after
from tests.fakes import T0_US, Core, ImmediateRaftLog, spec, upsert

MINUTE_US = 60 * SECOND_US
HOUR_US = 60 * MINUTE_US
DAY_US = 24 * HOUR_US
MIDNIGHT_US = T0_US - T0_US % DAY_US  # 2023-11-14T00:00:00Z


def job_of(job_spec, next_due_us: int, counted_runs=UNSET) -> Job:
    job = Job.of(job_spec, version=1, author="t", updated_us=T0_US, cursor_us=T0_US, next_due_us=next_due_us)
    job.counted_runs = counted_runs
    return job


def test_a_plain_schedule_has_no_sources_and_plans_as_before() -> None:
    job = job_of(spec("a", "* * * * *"), MIDNIGHT_US + DAY_US)
    claims, sources = plan_job_slots(job, MIDNIGHT_US + DAY_US + 2 * MINUTE_US, 100)
    assert sources is None and [c.scheduled_us for c in claims] == [
        MIDNIGHT_US + DAY_US + k * MINUTE_US for k in range(3)
    ]


def test_several_schedules_chain_through_their_union_with_each_slots_source() -> None:
    job_spec = spec("a", "", schedules=("0 9 * * *", "0 9,17 * * *"))
    first = first_due_after(job_spec, MIDNIGHT_US + DAY_US)
    assert first == MIDNIGHT_US + DAY_US + 9 * HOUR_US
    claims, sources = plan_job_slots(job_of(job_spec, first), MIDNIGHT_US + 2 * DAY_US + 10 * HOUR_US, 100)
    assert [(c.scheduled_us - MIDNIGHT_US) // HOUR_US for c in claims] == [33, 41, 57]
    assert sources == [0, 1, 0]
    assert [c.next_due_us for c in claims[:-1]] == [c.scheduled_us for c in claims[1:]]
    assert claims[-1].next_due_us == MIDNIGHT_US + 2 * DAY_US + 17 * HOUR_US


def test_an_interval_job_claims_every_slot_up_to_now() -> None:
    job_spec = spec("a", "", every_us=90 * SECOND_US, misfire=MisfirePolicy(grace_us=DAY_US))
    first = first_due_after(job_spec, T0_US)
    claims, sources = plan_job_slots(job_of(job_spec, first), first + 5 * 90 * SECOND_US, 100)
    assert sources is None
    assert [c.scheduled_us - first for c in claims] == [k * 90 * SECOND_US for k in range(6)]
    assert all(c.status == "queued" for c in claims)


def test_a_one_shot_claims_its_slot_with_no_next() -> None:
    job_spec = spec("a", "", at_us=T0_US + HOUR_US)
    claims = plan_due_slots(job_of(job_spec, T0_US + HOUR_US), T0_US + 2 * HOUR_US, 100)
    assert [(c.scheduled_us, c.next_due_us) for c in claims] == [(T0_US + HOUR_US, 0)]


def test_slots_after_the_window_are_neither_claimed_nor_missed() -> None:
    window = ActiveWindow(from_us=0, until_us=T0_US + 3 * MINUTE_US)
    job_spec = spec("a", "", every_us=MINUTE_US, active=window)
    first = first_due_after(job_spec, T0_US)
    # A long outage: everything after the window's end is simply not owed.
    claims = plan_due_slots(job_of(job_spec, first), T0_US + DAY_US, 100)
    assert first == T0_US + 40 * SECOND_US  # minutes since the epoch
    assert [c.scheduled_us - first for c in claims] == [0, MINUTE_US, 2 * MINUTE_US]
    assert claims[-1].next_due_us == 0


def test_the_planner_claims_at_most_the_runs_left_and_the_core_ends_the_slots() -> None:
    job_spec = spec("a", "", every_us=MINUTE_US, max_runs=3, misfire=MisfirePolicy(grace_us=DAY_US))
    core = Core()
    core.lead()
    core.advance(T0_US)
    first = first_due_after(job_spec, T0_US)
    assert core.apply_jobs((upsert(job_spec, next_due_us=first),)).accepted
    now_us = first + 10 * MINUTE_US
    core.advance(now_us)
    claims, _ = plan_job_slots(core.state.jobs["a"], now_us, 100)
    assert len(claims) == 3 and claims[-1].next_due_us == first + 3 * MINUTE_US  # the limit is the core's
    assert core.apply(ClaimRuns(now_us, core.state.epoch, tuple(claims))).accepted
    job = core.state.jobs["a"]
    assert job.counted_runs == 3 and job.next_due_us == 0
    assert plan_due_slots(job, now_us + DAY_US, 100) == []


def _trigger_loop(core: Core, batch_size: int, now):
    state = core.state
    clock = LeaderClock(
        state.clock_anchor_now_us,
        state.clock_anchor_mono_us,
        now,
        now,
        lambda: (state.clock_anchor_now_us, state.clock_anchor_mono_us),
    )
    raftlog = ImmediateRaftLog(state, core.index)
    return raftlog, TriggerLoop(LeaderTerm(state.epoch, 1, clock), raftlog, batch_size, 1.0, 1.0)


def test_the_trigger_loop_sends_each_claims_source_across_batches() -> None:
    core = Core()
    core.lead()
    now = [core.state.now_us]
    raftlog, loop = _trigger_loop(core, batch_size=3, now=lambda: now[0])
    start_us = (now[0] // HOUR_US + 1) * HOUR_US
    multi = spec("multi", "", schedules=("0 * * * *", "30 * * * *"), jitter="pinned")
    plain = [spec(f"plain{i}", "*/30 * * * *", jitter="pinned") for i in range(4)]
    upserts = [upsert(multi, next_due_us=start_us)] + [upsert(s, next_due_us=start_us) for s in plain]
    assert raftlog.propose(ApplyJobs(core.state.now_us, "alice", "", tuple(upserts))).result().accepted
    with loop.attached():
        now[0] = start_us + 30 * MINUTE_US
        loop.step()
    multi_runs = core.state.runs["multi"]
    assert [(r.scheduled_us - start_us, r.schedule_index) for r in multi_runs] == [(0, 0), (30 * MINUTE_US, 1)]
    assert all(r.schedule_index is UNSET for i in range(4) for r in core.state.runs[f"plain{i}"])
    assert len(core.state.runs["plain3"]) == 2
