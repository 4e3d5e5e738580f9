"""Stopping a worker gracefully, and reporting outcomes through an unreliable cluster."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from datetime import timedelta

from tests.unit.worker.test_worker_fakes import SLOT, WAIT_S, fake_cluster, make_grant, wait_until
from worker import CancelReason, RunContext, Worker
from worker.api.v1 import worker_pb2


def test_drain_finishes_what_it_can_and_hands_back_the_rest() -> None:
    quick_gate = threading.Event()
    let_ignorer_go = threading.Event()
    started: set[str] = set()
    reasons: dict[str, str | None] = {}

    def quick(ctx: RunContext) -> None:  # finishes during the drain
        started.add("quick")
        quick_gate.wait(WAIT_S)

    def cooperative(ctx: RunContext) -> None:  # runs until cancelled, then returns at once
        started.add("cooperative")
        ctx.cancelled.wait(WAIT_S)
        reasons["cooperative"] = ctx.cancel_reason

    def ignorer(ctx: RunContext) -> None:  # ignores cancellation
        print("ignorer working")
        logging.getLogger("drain.ignorer").warning("still busy")
        started.add("ignorer")
        let_ignorer_go.wait(WAIT_S)

    handlers = {"quick": quick, "cooperative": cooperative, "ignorer": ignorer}
    with fake_cluster() as (service, address):
        service.add(
            make_grant("quick", 1, ttl_s=0.9),
            make_grant("cooperative", 2, ttl_s=0.9),
            make_grant("ignorer", 3, ttl_s=0.9),
        )
        worker = Worker(
            [address],
            handlers=handlers,
            concurrency=3,
            lease_wait_s=0.5,
            drain_timeout_s=1.2,
            shell_grace_s=0.2,
            call_timeout_s=1.0,
        )
        worker.start()
        assert wait_until(lambda: len(started) == 3)
        leases_before_stop = len(service.lease_requests)
        result: list[bool] = []
        stopper = threading.Thread(target=lambda: result.append(worker.stop()))
        stopper.start()
        # Heartbeats go on during the drain, and the quick run still reports its success.
        beats = len(service.heartbeats)
        assert service.wait_for(lambda: len(service.heartbeats) >= beats + 1)
        quick_gate.set()
        assert service.wait_for(lambda: service.completion(1) is not None)
        stopper.join(WAIT_S)
        assert not stopper.is_alive()
        let_ignorer_go.set()
        completions = {c.lease.fencing_token: c for c in service.completions}
        lease_requests_after = len(service.lease_requests) - leases_before_stop
    assert result == [False]  # not every run ended on its own
    assert completions[1].kind == worker_pb2.SUCCESS
    for token in (2, 3):
        assert completions[token].kind == worker_pb2.RETRY_LATER
        assert completions[token].error == "worker shutting down"
        assert completions[token].HasField("retry_after") and completions[token].retry_after.ToNanoseconds() == 0
    # The ignorer is reported without waiting for it, with what it wrote by then.
    assert completions[3].stdout_tail == "ignorer working\n"
    assert completions[3].stderr_tail == "WARNING drain.ignorer: still busy\n"
    assert completions[3].output_tail == "ignorer working\nWARNING drain.ignorer: still busy\n"
    assert reasons["cooperative"] == CancelReason.SHUTDOWN
    assert lease_requests_after == 0  # no new lease once the stop began
    assert len(service.completions) == 3


def test_drain_waits_for_runs_that_finish_in_time() -> None:
    gate = threading.Event()
    with fake_cluster() as (service, address):
        service.add(make_grant("job", 1))
        worker = Worker([address], handlers={"job": lambda ctx: gate.wait(WAIT_S)}, lease_wait_s=0.5)
        worker.start()
        assert wait_until(lambda: worker.active_runs == 1)
        threading.Timer(0.2, gate.set).start()
        assert worker.stop(timeout_s=WAIT_S) is True
    assert service.completion(1).kind == worker_pb2.SUCCESS


def test_sigterm_drains_a_running_worker() -> None:
    assert threading.current_thread() is threading.main_thread()
    seen: list[str | None] = []

    def job(ctx: RunContext) -> None:
        ctx.cancelled.wait(WAIT_S)
        seen.append(ctx.cancel_reason)

    with fake_cluster() as (service, address):
        service.add(make_grant("job", 1))
        worker = Worker([address], handlers={"job": job}, lease_wait_s=0.5, drain_timeout_s=0.3)

        def signal_when_running() -> None:
            if wait_until(lambda: worker.active_runs == 1):
                os.kill(os.getpid(), signal.SIGTERM)

        before = signal.getsignal(signal.SIGTERM)
        threading.Thread(target=signal_when_running, daemon=True).start()
        started = time.monotonic()
        worker.run()  # returns once drained
        assert time.monotonic() - started < WAIT_S
        assert signal.getsignal(signal.SIGTERM) is before  # handlers restored
    assert seen == [CancelReason.SHUTDOWN]
    assert service.completion(1).kind == worker_pb2.RETRY_LATER


def test_complete_is_retried_while_no_node_answers() -> None:
    with fake_cluster() as (service, address):
        service.fail_completes = 2
        service.add(make_grant("job", 1))
        worker = Worker([address], handlers={"job": lambda ctx: None}, lease_wait_s=0.5)
        worker.start()
        try:
            assert service.wait_for(lambda: service.completions)
        finally:
            worker.stop()
    assert service.complete_attempts == 3
    assert service.completion(1).kind == worker_pb2.SUCCESS


def test_fenced_completion_is_logged_as_discarded(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="raftcron.worker")
    with fake_cluster() as (service, address):
        service.complete_verdicts[1] = worker_pb2.FENCED  # heartbeats fine, the completion is late
        service.add(make_grant("job", 1))
        worker = Worker([address], handlers={"job": lambda ctx: None}, lease_wait_s=0.5)
        worker.start()
        try:
            assert service.wait_for(lambda: service.completions)
            assert wait_until(lambda: "discarded" in caplog.text)
        finally:
            worker.stop()
    assert "job@2026-01-01T02:00:00Z" in caplog.text and "FENCED" in caplog.text


def test_runs_past_their_deadline_report_deadline_exceeded() -> None:
    def slow(ctx: RunContext) -> None:
        ctx.cancelled.wait(WAIT_S)

    with fake_cluster() as (service, address):
        service.add(
            make_grant("slow", 1, deadline_s=0.3),
            make_grant("slow", 2, deadline_s=-1, scheduled_at=SLOT + timedelta(hours=1)),
        )
        worker = Worker([address], handlers={"slow": slow}, lease_wait_s=0.5, concurrency=2)
        worker.start()
        try:
            assert service.wait_for(lambda: len(service.completions) == 2)
        finally:
            worker.stop()
    for token in (1, 2):  # 2 was past its deadline on arrival: never started
        assert service.completion(token).kind == worker_pb2.FAILURE
        assert service.completion(token).error == "deadline exceeded"
