"""The trigger loop's due index, alone and driven pass by pass through a TriggerLoop."""

from __future__ import annotations

import threading

from scheduler.core.commands import ApplyJobs, ClaimRuns
from scheduler.core.model import SECOND_US, MisfirePolicy
from scheduler.leader import trigger
from scheduler.leader.clock import LeaderClock
from scheduler.leader.due_index import DueIndex
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.leader.trigger import TriggerLoop
from tests.fakes import Core, ImmediateRaftLog, spec, upsert

S = SECOND_US


def test_jobs_pop_by_instant_each_once_earliest_first():
    index = DueIndex()
    assert index.rebuild([("a", 30), ("b", 10), ("c", 20), ("none", 0)]) == 3
    index.add("b", 10)  # the same job added again at the same instant
    index.add("d", 10)
    index.add("a0", 10)  # added last, queued first among its instant's jobs (by id)
    assert index.earliest_us() == 10
    assert index.pop_due(9) == []
    assert index.pop_due(20) == ["a0", "b", "d", "c"]
    assert index.earliest_us() == 30 and len(index) == 1
    assert index.pop_due(100) == ["a"] and index.earliest_us() is None and len(index) == 0


def test_stale_entries_ask_for_a_rebuild_once_they_outnumber_the_jobs():
    index = DueIndex()
    index.rebuild((f"j{i}", 1_000 + i) for i in range(2_000))
    for step in range(2_000 + 1_024):
        assert not index.needs_rebuild(), step
        index.add(f"j{step % 2_000}", 5_000)  # each job moved to a later instant: its old entry is stale
    index.add("j0", 6_000)
    assert index.needs_rebuild()
    assert index.rebuild((f"j{i}", 5_000) for i in range(2_000)) == 2_000 and not index.needs_rebuild()


class Leader:
    """A core led by n1, a TriggerLoop on it, and the leader's clock under the test's hand."""

    def __init__(self, batch_size: int = 1_000) -> None:
        self.core = Core()
        self.core.lead()
        self.now_us = self.core.state.now_us
        state = self.core.state
        clock = LeaderClock(
            state.clock_anchor_now_us,
            state.clock_anchor_mono_us,
            lambda: self.now_us,
            lambda: self.now_us,
            lambda: (state.clock_anchor_now_us, state.clock_anchor_mono_us),
        )
        self.raftlog = ImmediateRaftLog(state, self.core.index)
        self.loop = TriggerLoop(LeaderTerm(state.epoch, 1, clock), self.raftlog, batch_size, 1.0, 1.0)

    def apply(self, *upserts, removals=()) -> None:
        # Through the fake Raft log, so the loop hears of it as it would of a committed entry.
        command = ApplyJobs(self.core.state.now_us, "alice", "", tuple(upserts), tuple(removals))
        result = self.raftlog.propose(command).result()
        assert result.accepted, result.rejection

    def pass_at(self, now_us: int) -> set[tuple[str, int]]:
        """One pass of the loop at `now_us`: the run keys it claimed."""
        self.now_us = now_us
        before = {(r.job_id, r.scheduled_us) for runs in self.core.state.runs.values() for r in runs}
        self.loop.step()
        return {(r.job_id, r.scheduled_us) for runs in self.core.state.runs.values() for r in runs} - before


def test_the_loop_claims_due_jobs_follows_changes_and_forgets_deleted_ones():
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S  # the next 10-second slot
    leader.apply(
        upsert(spec("a", jitter="pinned"), next_due_us=t),
        upsert(spec("b", jitter="pinned"), next_due_us=t),
        upsert(spec("gone", jitter="pinned"), next_due_us=t),
    )
    with leader.loop.attached():
        assert leader.pass_at(t - 1) == set()
        assert leader.pass_at(t) == {("a", t), ("b", t), ("gone", t)}
        # b moves to a schedule with slots a minute apart; gone is deleted.
        every_minute = spec("b", schedule="0 * * * * *", jitter="pinned")
        next_minute = (t // (60 * S) + 1) * 60 * S
        leader.apply(upsert(every_minute, expected_version=1, next_due_us=next_minute), removals=("gone",))
        claimed = set()
        for now_us in range(t + 10 * S, next_minute + 1, 10 * S):
            claimed |= leader.pass_at(now_us)
        a_slots = {("a", u) for u in range(t + 10 * S, next_minute + 1, 10 * S)}
        assert claimed == a_slots | {("b", next_minute)}


def test_reapplying_unchanged_jobs_keeps_the_index_bounded():
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    specs = [spec(f"j{i}", jitter="pinned") for i in range(100)]
    leader.apply(*(upsert(s, next_due_us=t) for s in specs))
    with leader.loop.attached():
        for _ in range(200):  # a deploy pipeline that applies the same files over and over
            leader.apply(*(upsert(s, expected_version=1) for s in specs))
            leader.pass_at(t - 1)
            assert len(leader.loop._due) <= 2 * 100 + 1_024 + 100
        assert leader.pass_at(t) == {(s.id, t) for s in specs}


def test_an_instant_is_planned_ahead_and_claimed_without_planning_at_the_instant(monkeypatch):
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    leader.apply(*(upsert(spec(f"j{i}", jitter="pinned"), next_due_us=t) for i in range(5)))
    with leader.loop.attached():
        leader.now_us = t - S
        assert leader.loop.plan_ahead(t) == 5
        planned_at_instant = []
        real = trigger.plan_job_slots
        monkeypatch.setattr(
            trigger, "plan_job_slots", lambda *a, **k: planned_at_instant.append(a[0].id) or real(*a, **k)
        )
        assert leader.pass_at(t) == {(f"j{i}", t) for i in range(5)}
        assert planned_at_instant == []
        # Each job's cursor moved on exactly as a claim planned at the instant moves it.
        assert {job.next_due_us for job in leader.core.state.jobs.values()} == {t + 10 * S}


def test_a_job_changed_deleted_or_paused_after_planning_ahead_is_claimed_as_it_is_at_the_instant():
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    leader.apply(*(upsert(spec(name, jitter="pinned"), next_due_us=t) for name in ("same", "changed", "gone")))
    with leader.loop.attached():
        leader.now_us = t - S
        assert leader.loop.plan_ahead(t) == 3
        # After planning: one job gets a new spec (version 2) at the same instant, one is deleted.
        leader.apply(
            upsert(spec("changed", jitter="pinned", payload_json='{"v": 2}'), expected_version=1, next_due_us=t),
            removals=("gone",),
        )
        assert leader.pass_at(t) == {("same", t), ("changed", t)}
        runs = {job_id: runs[0] for job_id, runs in leader.core.state.runs.items()}
        assert runs["changed"].spec_version == 2 and runs["same"].spec_version == 1


def test_a_pass_later_than_the_grace_plans_again_so_the_misfire_policy_decides():
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    late = spec("late", schedule="0 0 0 1 1 *", jitter="pinned", misfire=MisfirePolicy("skip", grace_us=S))
    leader.apply(upsert(late, next_due_us=t))
    with leader.loop.attached():
        leader.now_us = t - S
        assert leader.loop.plan_ahead(t) == 1
        assert leader.pass_at(t + 5 * S) == {("late", t)}
        run = leader.core.state.runs["late"][0]
        assert run.status == "skipped" and "beyond the 1s grace; policy skip" in run.reason


def test_the_loop_plans_ahead_while_it_sleeps_toward_a_near_instant():
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    leader.apply(upsert(spec("soon", jitter="pinned"), next_due_us=t))
    with leader.loop.attached():
        leader.loop.step()
        leader.now_us = t - trigger.PLAN_AHEAD_US - S
        leader.loop._wake.set()  # each sleep below returns at once
        leader.loop._sleep_until_due()  # too far ahead: nothing planned
        assert leader.loop._ahead is None
        leader.now_us = t - trigger.PLAN_AHEAD_US + 1
        leader.loop._wake.set()
        leader.loop._sleep_until_due()
        assert leader.loop._ahead is not None and set(leader.loop._ahead.plans) == {"soon"}


def test_a_new_leader_builds_its_index_outside_the_state_lock(monkeypatch):
    """The tick thread applies under the state lock: building the index for a million jobs
    under it stalled Raft on every new leader. Only the copy of the records may hold it."""
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    leader.apply(*(upsert(spec(f"j{i}", jitter="pinned"), next_due_us=t) for i in range(3)))
    lock = leader.raftlog._lock
    held_while_built = []
    real_rebuild = DueIndex.rebuild

    def rebuild(index, pairs):
        # Another thread tries the lock: an RLock held by this thread would let this one in.
        probe = threading.Thread(target=lambda: held_while_built.append(not _try(lock)))
        probe.start()
        probe.join()
        return real_rebuild(index, pairs)

    monkeypatch.setattr(DueIndex, "rebuild", rebuild)
    with leader.loop.attached():
        assert held_while_built == [False]
        assert leader.pass_at(t) == {(f"j{i}", t) for i in range(3)}


def test_a_job_applied_while_the_index_is_built_is_claimed(monkeypatch):
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    leader.apply(upsert(spec("a", jitter="pinned"), next_due_us=t))
    real_rebuild = DueIndex.rebuild

    def rebuild(index, pairs):
        pairs = list(pairs)  # the copy was taken: a job applied now is not in it
        leader.apply(upsert(spec("late", jitter="pinned"), next_due_us=t))
        return real_rebuild(index, pairs)

    monkeypatch.setattr(DueIndex, "rebuild", rebuild)
    with leader.loop.attached():
        assert leader.pass_at(t) == {("a", t), ("late", t)}


def _try(lock) -> bool:
    if lock.acquire(blocking=False):
        lock.release()
        return True
    return False


def test_a_new_leader_claims_what_is_due_before_it_indexes_the_jobs_due_later(monkeypatch):
    """Indexing a million jobs took 0.2-0.5 s before the first claim of every failover."""
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    leader.apply(
        upsert(spec("due", jitter="pinned"), next_due_us=t),
        *(upsert(spec(f"later{i}", jitter="pinned"), next_due_us=t + 3600 * S) for i in range(50)),
    )
    events = []
    real_rebuild, real_extend, real_propose = DueIndex.rebuild, DueIndex.extend, leader.raftlog.propose

    def indexed(real):
        def record(index, pairs):
            pairs = list(pairs)
            events.extend(job_id for job_id, _ in pairs)
            return real(index, pairs)

        return record

    monkeypatch.setattr(DueIndex, "rebuild", indexed(real_rebuild))
    monkeypatch.setattr(DueIndex, "extend", indexed(real_extend))
    monkeypatch.setattr(
        leader.raftlog, "propose", lambda command: events.append(type(command).__name__) or real_propose(command)
    )
    leader.now_us = t
    with leader.loop.attached():
        assert leader.pass_at(t) == {("due", t)}
        assert events.index("ClaimRuns") < min(events.index(f"later{i}") for i in range(50))
        assert len(leader.loop._due) >= 50  # indexed by the end of the pass, before any sleep
        assert {(f"later{i}", t + 3600 * S) for i in range(50)} <= leader.pass_at(t + 3600 * S)


def test_a_job_due_within_the_first_pass_horizon_is_claimed_while_the_rest_is_still_indexed(monkeypatch):
    """A new leader ready shortly before the next every-second instant indexed its million
    deferred jobs (0.3-0.4 s) before it looked at the clock again, and claimed that instant
    0.42-0.45 s after it was ready (`bench failover --state-jobs 1000000`). Indexing here takes
    20 ms a job on the leader's clock; the rest is indexed a chunk at a time, between passes."""
    leader = Leader()
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    leader.apply(
        upsert(spec("soon", jitter="pinned"), next_due_us=t + S // 2),
        *(upsert(spec(f"later{i}", jitter="pinned"), next_due_us=t + 3600 * S) for i in range(50)),
    )
    per_job_us, chunk_jobs = 20_000, 10
    monkeypatch.setattr(trigger, "DEFERRED_CHUNK_JOBS", chunk_jobs)
    real_extend, real_propose = DueIndex.extend, leader.raftlog.propose
    later_indexed, claimed_at = [], []

    def slow_extend(index, pairs):
        def timed():
            for pair in pairs:
                leader.now_us += per_job_us
                later_indexed.append(pair[0])
                yield pair

        return real_extend(index, timed())

    def propose(command):
        if isinstance(command, ClaimRuns):
            claimed_at.append((leader.now_us, len(later_indexed)))
        return real_propose(command)

    monkeypatch.setattr(DueIndex, "extend", slow_extend)
    monkeypatch.setattr(leader.raftlog, "propose", propose)
    leader.now_us = t
    with leader.loop.attached():
        for _ in range(100):  # each pass as the loop runs them; one that had nothing to do is a sleep
            more = leader.loop.step()
            if claimed_at and not more:
                break
        else:
            raise AssertionError("the job due within the first pass's horizon was never claimed")
        (claimed_us, indexed_then), *_ = claimed_at
        assert t + S // 2 <= claimed_us <= t + S // 2 + chunk_jobs * per_job_us
        assert indexed_then < 50
        assert sorted(later_indexed) == sorted(f"later{i}" for i in range(50))  # every one, once
        assert {(f"later{i}", t + 3600 * S) for i in range(50)} <= leader.pass_at(t + 3600 * S)


def test_batches_planned_ahead_are_proposed_together_and_batches_planned_at_the_instant_at_once(monkeypatch):
    leader = Leader(batch_size=2)
    t = (leader.now_us // (10 * S) + 1) * 10 * S
    leader.apply(*(upsert(spec(f"a{i}", jitter="pinned"), next_due_us=t) for i in range(4)))
    events: list[str] = []
    propose = leader.raftlog.propose

    def proposing(command):
        if isinstance(command, ClaimRuns):
            events.append("propose " + ",".join(c.job_id for c in command.claims))
        return propose(command)

    leader.raftlog.propose = proposing
    real_plan, real_claims = trigger.plan_job_slots, trigger.ClaimRuns
    monkeypatch.setattr(
        trigger, "plan_job_slots", lambda job, *a, **k: events.append(f"plan {job.id}") or real_plan(job, *a, **k)
    )
    monkeypatch.setattr(trigger, "ClaimRuns", lambda *a, **k: events.append("batch") or real_claims(*a, **k))
    with leader.loop.attached():
        leader.now_us = t - S
        assert leader.loop.plan_ahead(t) == 4
        # Two jobs join the instant after the planning: they are planned at it, after the others.
        leader.apply(*(upsert(spec(f"b{i}", jitter="pinned"), next_due_us=t) for i in range(2)))
        events.clear()
        assert len(leader.pass_at(t)) == 6
    # The planned-ahead batches are all made before the first is proposed; a batch of jobs
    # planned at the instant goes out as soon as it is full.
    assert events == [
        "batch",
        "batch",
        "propose a0,a1",
        "propose a2,a3",
        "plan b0",
        "plan b1",
        "batch",
        "propose b0,b1",
    ], events
