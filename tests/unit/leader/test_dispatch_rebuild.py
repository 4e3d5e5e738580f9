"""The leader's queue never makes the Raft tick thread wait long: a new epoch queues the live
runs a chunk per hold of the state lock, due runs move to the ready queues a chunk per hold of
the queue lock, and the tick thread hands new runs over through an inbox instead of waiting for
that lock (a million queued runs held these locks for seconds and cost the leadership)."""

from __future__ import annotations

import contextlib
import threading
from types import SimpleNamespace

import pytest

from scheduler.core.model import JobSpec
from scheduler.leader import dispatch
from scheduler.leader.dispatch import Dispatcher
from scheduler.leader.lifecycle import LeaderTerm
from tests.unit.observability.test_observability import T0, Cluster, FakeRaftLog, S, make_config

SLOTS = 10


@pytest.fixture
def queued():
    log = FakeRaftLog(make_config())
    cluster = Cluster(log)
    cluster.jobs(JobSpec(id="a", schedule="* * * * * *", target_kind="handler", target="h", jitter="pinned"))
    slots = [T0 + 10 * S + k * S for k in range(SLOTS)]
    cluster.at(slots[-1] + S)
    cluster.claim(*(("a", slot, slot + S) for slot in slots))
    return SimpleNamespace(log=log, cluster=cluster, slots=slots)


def _dispatcher(log) -> Dispatcher:
    term = SimpleNamespace(clock=None, stopping=threading.Event(), epoch=log._state.epoch)
    return Dispatcher(term, log, 10 * S, 1.0)


def _queued_total(dispatcher: Dispatcher) -> int:
    return sum(dispatcher.queue_depths().values())


def test_the_queue_is_built_in_chunks_and_a_run_leased_between_them_is_left_out(queued, monkeypatch):
    monkeypatch.setattr(dispatch, "REBUILD_CHUNK_RUNS", 3)
    dispatcher = _dispatcher(queued.log)
    holds = []
    read = queued.log.read

    @contextlib.contextmanager
    def counting_read():
        holds.append(_queued_total(dispatcher))
        if len(holds) == 2:  # between the first and second chunk, the tick thread grants the last run
            queued.cluster.grant(("a", queued.slots[-1]))
        with read() as state:
            yield state

    queued.log.read = counting_read
    dispatcher._queue_live_runs()
    assert holds == [0, 0, 3, 6, 9]  # the key list, then four chunks of at most 3 runs
    assert _queued_total(dispatcher) == SLOTS - 1


def test_a_deposed_epoch_stops_building(queued, monkeypatch):
    monkeypatch.setattr(dispatch, "REBUILD_CHUNK_RUNS", 3)
    dispatcher = _dispatcher(queued.log)
    dispatcher._term.stopping.set()
    dispatcher._queue_live_runs()
    assert _queued_total(dispatcher) == 0


def _depths(dispatcher: Dispatcher, stage: str) -> int:
    return sum(count for (_, at), count in dispatcher.queue_depths().items() if at == stage)


def test_due_runs_move_to_the_ready_queue_a_chunk_per_pick(queued, monkeypatch):
    monkeypatch.setattr(dispatch, "PROMOTE_CHUNK_RUNS", 3)
    dispatcher = _dispatcher(queued.log)
    dispatcher._queue_live_runs()
    assert (_depths(dispatcher, "pending"), _depths(dispatcher, "ready")) == (SLOTS, 0)
    now_us = queued.slots[-1] + S
    picked, next_ready_us = dispatcher._pick(["elsewhere"], 1, now_us)  # nothing for this target
    assert picked == [] and next_ready_us <= now_us  # more is due: the caller comes back at once
    assert (_depths(dispatcher, "pending"), _depths(dispatcher, "ready")) == (SLOTS - 3, 3)
    picked, _ = dispatcher._pick(["h"], SLOTS, now_us)
    assert [entry.scheduled_us for entry in picked] == queued.slots[:6]  # earliest first, chunk by chunk
    assert _depths(dispatcher, "pending") == SLOTS - 6


def test_the_tick_thread_hands_runs_over_while_a_lease_call_holds_the_queue(queued):
    """The apply listener runs on the tick thread with the state lock held: it must not wait for
    a Lease call that holds the queue lock (it did, for the 2 s of moving a million runs)."""
    dispatcher = _dispatcher(queued.log)
    queued.log.add_apply_listener(dispatcher._on_apply)
    slot = queued.slots[-1] + S
    released = threading.Event()
    holding = threading.Event()

    def lease_call_holding_the_queue():
        with dispatcher._changed:
            holding.set()
            released.wait(30)

    holder = threading.Thread(target=lease_call_holding_the_queue)
    holder.start()
    assert holding.wait(30)
    applier = threading.Thread(target=queued.cluster.claim, args=(("a", slot, slot + S),))
    applier.start()
    applier.join(30)
    stuck = applier.is_alive()
    released.set()
    holder.join(30)
    assert not stuck, "the tick thread waited for the queue lock"
    picked, _ = dispatcher._pick(["h"], 1, slot)
    assert [entry.scheduled_us for entry in picked] == [slot]


def test_the_epoch_loop_wakes_a_waiting_lease_call_for_a_run_queued_by_an_apply_and_ends_with_the_term(monkeypatch):
    monkeypatch.setattr(dispatch, "WAKER_POLL_S", 3600.0)  # only the deposed term can end the loop
    log = FakeRaftLog(make_config())
    log.submit = lambda command, timeout_s: log.apply(command)
    cluster = Cluster(log)
    cluster.jobs(JobSpec(id="a", schedule="* * * * * *", target_kind="handler", target="h", jitter="pinned"))
    slot = T0 + 10 * S
    cluster.at(slot + S)
    clock = SimpleNamespace(read=lambda: (cluster.now_us, cluster.now_us - T0), now_us=lambda: cluster.now_us)
    term = LeaderTerm(epoch=log._state.epoch, term=1, clock=clock)
    dispatcher = Dispatcher(term, log, 10 * S, 1.0)
    epoch_loop = threading.Thread(target=dispatcher)
    epoch_loop.start()
    assert dispatcher.ready.wait(30)
    granted = []
    waiting = threading.Thread(target=lambda: granted.extend(dispatcher.lease("w1", ["h"], 1, wait_s=60)))
    waiting.start()
    cluster.claim(("a", slot, slot + S))  # applied on "the tick thread": handed over, then woken
    waiting.join(30)
    assert not waiting.is_alive() and [g.run.scheduled_us for g in granted] == [slot]
    term.depose("test over")
    epoch_loop.join(30)
    assert not epoch_loop.is_alive()
