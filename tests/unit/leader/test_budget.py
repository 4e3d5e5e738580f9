"""Dependency budgets planned by the leader: runs without room are held back, without a
Raft entry, until a lease on the resource ends or its rate window moves on."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from scheduler.core.commands import GrantLeases
from scheduler.core.model import JobSpec, Resource
from scheduler.core.state import State
from scheduler.leader.budget import UNLIMITED, admit, room
from scheduler.leader.dispatch import Dispatcher
from tests.unit.observability.test_observability import T0, Cluster, FakeRaftLog, S, make_config

DB = Resource("db", max_concurrent=2, max_starts_per_s=0)
API = Resource("api", max_concurrent=0, max_starts_per_s=3)


def state_with(*resources: Resource, leased=None, starts=None) -> State:
    state = State()
    state.resources = {r.name: r for r in resources}
    state.resource_leased = dict(leased or {})
    state.resource_starts = {name: list(instants) for name, instants in (starts or {}).items()}
    return state


def test_room_counts_leases_and_the_starts_of_the_last_second():
    now = T0
    assert room(state_with(DB, leased={"db": 1}), "db", now) == (1, 0)
    assert room(state_with(DB, leased={"db": 2}), "db", now) == (0, 0)
    assert room(state_with(), "undeclared", now) == (UNLIMITED, 0)
    # Three starts in the window: full until the oldest of them is a second old.
    full = state_with(API, starts={"api": [now - S // 2, now - S // 5, now - S // 10]})
    assert room(full, "api", now) == (0, now - S // 2 + S)
    # A start exactly a second ago is out of the window (the core counts starts after now - 1 s).
    assert room(state_with(API, starts={"api": [now - S, now - 1, now]}), "api", now) == (1, 0)
    # Runs about to start count as started now: leases, and the window's next free instant.
    assert room(state_with(API, starts={"api": [now - S // 2]}), "api", now, starting=2) == (0, now - S // 2 + S)
    assert room(state_with(API), "api", now, starting=3) == (0, now + S)
    assert room(state_with(DB), "db", now, starting=1) == (1, 0)


def test_admit_hands_out_room_in_order_and_names_the_full_resource():
    state = state_with(DB, API, leased={"db": 1}, starts={"api": [T0 - S // 2, T0 - S // 4]})
    verdicts = admit(state, [("db",), ("db",), (), ("api", "db"), ("api",), ("api",)], T0)
    assert verdicts == ["", "db", "", "db", "", "api"]  # the run held for db took no room of api


class LeaderLog(FakeRaftLog):
    """The fake log as a leader proposes to it: every submit applies at once, and is counted."""

    def __init__(self) -> None:
        super().__init__(make_config())
        self.grant_entries = 0

    def submit(self, command, timeout_s):
        self.grant_entries += isinstance(command, GrantLeases)
        return self.apply(command)


def leader_with_queued_runs(resource: Resource, jobs: int):
    log = LeaderLog()
    cluster = Cluster(log)
    specs = [
        JobSpec(
            id=f"j{i}",
            schedule="* * * * * *",
            target_kind="handler",
            target="h",
            jitter="pinned",
            uses=(resource.name,),
        )
        for i in range(jobs)
    ]
    cluster.jobs(*specs, resources=(resource,))
    slot = T0 + 10 * S
    cluster.at(slot + S)
    cluster.claim(*((s.id, slot, slot + S) for s in specs))
    clock = SimpleNamespace(read=lambda: (cluster.now_us, cluster.now_us - T0), now_us=lambda: cluster.now_us)
    dispatcher = Dispatcher(
        SimpleNamespace(clock=clock, stopping=threading.Event(), epoch=cluster.epoch), log, 10 * S, 1.0
    )
    dispatcher._queue_live_runs()
    dispatcher.ready.set()
    return SimpleNamespace(log=log, cluster=cluster, dispatcher=dispatcher, slot=slot)


def test_runs_without_room_are_held_without_a_raft_entry_until_a_lease_ends():
    leader = leader_with_queued_runs(DB, 5)
    first = leader.dispatcher.lease("w1", ["h"], max_runs=5, wait_s=0)
    assert len(first) == 2 and leader.log.grant_entries == 1
    assert leader.dispatcher.queue_depths() == {("h", "ready"): 0, ("h", "held"): 3}
    assert leader.dispatcher.lease("w2", ["h"], max_runs=5, wait_s=0) == []
    assert leader.log.grant_entries == 1, "a full budget costs no entry"
    done = first[0]
    leader.cluster.complete(done.run.job_id, done.run.scheduled_us, done.event.fencing_token)
    again = leader.dispatcher.lease("w2", ["h"], max_runs=5, wait_s=0)
    assert len(again) == 1 and leader.log.grant_entries == 2
    assert leader.dispatcher.queue_depths()[("h", "held")] == 2


def test_runs_held_by_a_rate_wait_for_the_window_to_move():
    leader = leader_with_queued_runs(API, 5)
    assert len(leader.dispatcher.lease("w1", ["h"], max_runs=5, wait_s=0)) == 3
    assert leader.dispatcher._held_until_us == leader.cluster.now_us + S  # when a Lease call wakes
    leader.cluster.at(leader.cluster.now_us + S // 2)
    assert leader.dispatcher.lease("w1", ["h"], max_runs=5, wait_s=0) == []
    leader.cluster.at(leader.cluster.now_us + S // 2)
    assert len(leader.dispatcher.lease("w1", ["h"], max_runs=5, wait_s=0)) == 2
    assert leader.log.grant_entries == 2


def test_a_lease_call_counts_the_runs_another_one_admitted_but_has_not_applied_yet():
    leader = leader_with_queued_runs(DB, 5)
    meanwhile = []
    submit = leader.log.submit

    def submit_after_another_lease(command, timeout_s):
        if not meanwhile:  # while the first grant is in flight, a second worker asks
            meanwhile.append(leader.dispatcher.lease("w2", ["h"], max_runs=5, wait_s=0))
        return submit(command, timeout_s)

    leader.log.submit = submit_after_another_lease
    assert len(leader.dispatcher.lease("w1", ["h"], max_runs=2, wait_s=0)) == 2
    assert meanwhile == [[]] and leader.log.grant_entries == 1, "the second call proposed runs without room"
    assert leader.dispatcher._starting == {}  # reservations end once the grant is applied
