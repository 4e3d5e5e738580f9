"""One heartbeater per worker: batched heartbeats, fencing, cancelled runs and lost leases."""

from __future__ import annotations

import threading
from datetime import timedelta

from tests.unit.worker.test_worker_fakes import SLOT, WAIT_S, fake_cluster, make_grant, wait_until
from worker import CancelReason, RunContext, Worker
from worker.api.v1 import worker_pb2


class Recorder:
    """A handler that waits until released or cancelled, recording how each run ended."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started: dict[int, RunContext] = {}
        self.ended: dict[int, str | None] = {}  # token -> cancel reason (None: released)
        self.lock = threading.Lock()

    def __call__(self, ctx: RunContext) -> None:
        with self.lock:
            self.started[ctx.fencing_token] = ctx
        while not self.release.is_set() and not ctx.cancelled.wait(0.01):
            pass
        with self.lock:
            self.ended[ctx.fencing_token] = ctx.cancel_reason


def grants(n: int, ttl_s: float) -> list[worker_pb2.LeaseGrant]:
    return [make_grant("job", t, ttl_s=ttl_s, scheduled_at=SLOT + timedelta(minutes=t)) for t in range(1, n + 1)]


def start_worker(address: str, handler, concurrency: int = 3) -> Worker:
    worker = Worker(
        [address],
        worker_id="w1",
        handlers={"job": handler},
        concurrency=concurrency,
        lease_wait_s=0.5,
        call_timeout_s=1.0,
        drain_timeout_s=1.0,
    )
    worker.start()
    return worker


def tokens(request: worker_pb2.HeartbeatRequest) -> set[int]:
    return {ref.fencing_token for ref in request.leases}


def test_one_heartbeat_call_covers_every_active_lease() -> None:
    handler = Recorder()
    with fake_cluster() as (service, address):
        service.add(*grants(3, ttl_s=0.9))
        worker = start_worker(address, handler)
        try:
            assert wait_until(lambda: len(handler.started) == 3)
            # Three intervals of ttl/3 = 0.2s: several beats, each one naming all three leases.
            assert service.wait_for(lambda: len(service.heartbeats) >= 4)
            beats = list(service.heartbeats)
            handler.release.set()
            assert service.wait_for(lambda: len(service.completions) == 3)
        finally:
            worker.stop()
    assert all(tokens(beat) == {1, 2, 3} for beat in beats), [tokens(b) for b in beats]
    assert all(beat.worker_id == "w1" for beat in beats)
    assert handler.ended == {1: None, 2: None, 3: None}  # nobody was cancelled
    assert {c.kind for c in service.completions} == {worker_pb2.SUCCESS}


def test_no_heartbeats_without_leases() -> None:
    with fake_cluster() as (service, address):
        worker = start_worker(address, Recorder())
        try:
            assert service.wait_for(lambda: len(service.lease_requests) >= 2)
        finally:
            worker.stop()
    assert service.heartbeats == []


def test_fenced_heartbeat_cancels_the_run_and_nothing_is_reported() -> None:
    handler = Recorder()
    with fake_cluster() as (service, address):
        service.add(*grants(2, ttl_s=0.9))
        worker = start_worker(address, handler)
        try:
            assert wait_until(lambda: len(handler.started) == 2)
            service.fence(1)
            assert wait_until(lambda: 1 in handler.ended)
            assert handler.ended[1] == CancelReason.FENCED
            assert handler.started[1].cancel_reason == "fenced"
            assert wait_until(lambda: worker.active_runs == 1)  # its slot is free again
            fenced_at = len(service.heartbeats)
            assert service.wait_for(lambda: len(service.heartbeats) >= fenced_at + 2)
            later_beats = service.heartbeats[fenced_at:]
            handler.release.set()
            assert service.wait_for(lambda: service.completion(2) is not None)
        finally:
            worker.stop()
    assert service.completion(1) is None  # a fenced attempt never reports
    assert all(tokens(beat) == {2} for beat in later_beats)
    assert service.completion(2).kind == worker_pb2.SUCCESS


def test_cancelled_or_unknown_run_stops_without_reporting() -> None:
    handler = Recorder()
    with fake_cluster() as (service, address):
        service.add(*grants(3, ttl_s=0.9))
        worker = start_worker(address, handler)
        try:
            assert wait_until(lambda: len(handler.started) == 3)
            service.fence(1, worker_pb2.RUN_CANCELLED)
            service.fence(2, worker_pb2.NOT_FOUND)
            assert wait_until(lambda: {1, 2} <= set(handler.ended))
            assert wait_until(lambda: worker.active_runs == 1)
            handler.release.set()
            assert service.wait_for(lambda: service.completions)
        finally:
            worker.stop()
    assert handler.ended[1] == CancelReason.RUN_CANCELLED
    assert handler.ended[2] == CancelReason.NOT_FOUND
    assert service.completed_tokens() == [3]


def test_heartbeats_failing_longer_than_the_ttl_lose_every_lease() -> None:
    handler = Recorder()
    with fake_cluster() as (service, address):
        service.add(*grants(2, ttl_s=0.9))
        worker = start_worker(address, handler)
        try:
            assert wait_until(lambda: len(handler.started) == 2)
            service.fail_heartbeats = 1_000_000
            assert wait_until(lambda: len(handler.ended) == 2)
            assert wait_until(lambda: worker.active_runs == 0)
            # The worker keeps going: it leases (and runs) new work afterwards.
            service.fail_heartbeats = 0
            handler.release.set()
            service.add(make_grant("job", 3, ttl_s=0.6, scheduled_at=SLOT + timedelta(days=1)))
            assert service.wait_for(lambda: service.completions)
        finally:
            worker.stop()
    assert handler.ended[1] == handler.ended[2] == CancelReason.LEASE_LOST
    assert service.completed_tokens() == [3]  # lost leases are never reported


def test_a_short_heartbeat_outage_keeps_the_lease() -> None:
    handler = Recorder()
    with fake_cluster() as (service, address):
        service.add(*grants(1, ttl_s=0.9))
        worker = start_worker(address, handler)
        try:
            assert wait_until(lambda: handler.started)
            service.fail_heartbeats = 1  # one failed beat: far less than a TTL without one
            assert service.wait_for(lambda: service.fail_heartbeats == 0 and len(service.heartbeats) >= 2)
            handler.release.set()
            assert service.wait_for(lambda: service.completions, timeout_s=WAIT_S)
        finally:
            worker.stop()
    assert handler.ended == {1: None}
    assert service.completion(1).kind == worker_pb2.SUCCESS


# -- the heartbeater's wake-ups: only a lease that needs a beat before the planned one -------------


def held(token: int, ttl_s: float):
    from worker._leases import lease_from_grant

    lease, _ = lease_from_grant(
        make_grant("job", token, ttl_s=ttl_s, scheduled_at=SLOT + timedelta(minutes=token)), "w1"
    )
    return lease


def woken(table) -> bool:
    return table._beat_wake.is_set()


def test_an_idle_heartbeater_wakes_for_the_first_lease() -> None:
    from worker._leases import LeaseTable

    table = LeaseTable(4)
    assert table.heartbeat_view() == []
    table.plan_heartbeat(float("inf"))
    assert not woken(table)
    table.add(held(1, ttl_s=30.0))
    assert woken(table)


def test_a_lease_that_can_wait_for_the_planned_beat_does_not_wake_the_heartbeater() -> None:
    import time

    from worker._leases import LeaseTable

    table = LeaseTable(4)
    table.add(held(1, ttl_s=30.0))
    assert len(table.heartbeat_view()) == 1
    table.plan_heartbeat(time.monotonic() + 5.0)  # the next beat is sooner than a 30 s lease needs one
    table.add(held(2, ttl_s=30.0))
    table.handler_ended(held(1, ttl_s=30.0))
    assert not woken(table)
    table.add(held(3, ttl_s=3.0))  # needs a beat within 1 s
    assert woken(table)


def test_a_lease_added_while_the_heartbeater_plans_is_not_missed() -> None:
    import time

    from worker._leases import LeaseTable

    table = LeaseTable(4)
    table.add(held(1, ttl_s=30.0))
    table.heartbeat_view()
    table.plan_heartbeat(time.monotonic() - 1.0)  # a plan already due: the heartbeater is beating
    table.heartbeat_view()  # its next look begins
    table.add(held(2, ttl_s=3.0))  # the standing plan is past, so the add alone wakes nobody
    assert not woken(table)
    table.plan_heartbeat(time.monotonic() + 5.0)  # too late for the new lease: look again at once
    assert woken(table)


def test_a_run_stopped_at_its_deadline_reports_its_output_even_after_a_heartbeat_found_it_fenced() -> None:
    """The cluster times the attempt out at the deadline the worker stops it at, so the heartbeat
    during the handler's wind-down is answered FENCED; the report still goes, for its output."""
    fenced = threading.Event()

    def winds_down_slowly(ctx: RunContext) -> None:
        print("was working on row 41")
        ctx.cancelled.wait(5)
        fenced.wait(5)  # ends only once the worker knows the lease is fenced

    def quiet(ctx: RunContext) -> None:
        ctx.cancelled.wait(5)
        fenced.wait(5)

    def keeper(ctx: RunContext) -> None:  # a live lease, so heartbeats go on after the fencing
        fenced.wait(5)

    with fake_cluster() as (service, address):
        service.add(
            make_grant("job", 1, ttl_s=0.9, deadline_s=0.3),
            make_grant("quiet", 2, ttl_s=0.9, deadline_s=0.3),
            make_grant("keeper", 3, ttl_s=0.9),
        )
        handlers = {"job": winds_down_slowly, "quiet": quiet, "keeper": keeper}
        worker = Worker([address], worker_id="w1", handlers=handlers, lease_wait_s=WAIT_S)
        worker.start()
        try:
            assert wait_until(lambda: worker.active_runs == 3)
            service.fence(1)
            service.fence(2)
            beats = len(service.heartbeats)
            # A heartbeat of the keeper alone: the worker has taken in that 1 and 2 are fenced.
            assert service.wait_for(lambda: any(tokens(b) == {3} for b in service.heartbeats[beats:]))
            fenced.set()
            assert service.wait_for(lambda: service.completion(1) is not None)
            assert service.wait_for(lambda: service.completion(3) is not None)
        finally:
            worker.stop()
    report = service.completion(1)
    assert report.kind == worker_pb2.FAILURE and "was working on row 41" in report.stdout_tail
    assert service.completion(2) is None  # no output: nothing worth a fenced report
