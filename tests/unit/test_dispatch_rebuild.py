"""A new epoch queues the live runs a chunk per hold of the state lock, so the tick thread can
apply entries in between (a million queued runs held it for seconds and cost the leadership)."""

from __future__ import annotations

import contextlib
import threading
from types import SimpleNamespace

import pytest

from scheduler.core.model import JobSpec
from scheduler.leader import dispatch
from scheduler.leader.dispatch import Dispatcher
from tests.unit.test_observability import T0, Cluster, FakeRaftLog, S, make_config

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
