"""Worker leasing against a fake WorkerService: concurrency, targets, outcomes, failover, pacing."""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import grpc
import pytest

from tests.unit.worker.test_worker_fakes import (
    SLOT,
    WAIT_S,
    closed_address,
    fake_cluster,
    make_grant,
    wait_until,
)
from worker import RetryLater, RunContext, Worker
from worker.api.v1 import worker_pb2


@contextmanager
def running(addresses, **kwargs):
    kwargs.setdefault("lease_wait_s", 0.5)
    kwargs.setdefault("call_timeout_s", 2.0)
    kwargs.setdefault("drain_timeout_s", 2.0)
    worker = Worker(addresses, worker_id="w1", **kwargs)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def test_concurrency_is_never_exceeded_and_leases_ask_for_free_slots_only() -> None:
    gates = {token: threading.Event() for token in range(1, 7)}
    lock = threading.Lock()
    running_now: set[int] = set()
    most_running = 0

    def slow(ctx: RunContext) -> None:
        nonlocal most_running
        with lock:
            running_now.add(ctx.fencing_token)
            most_running = max(most_running, len(running_now))
        gates[ctx.fencing_token].wait(WAIT_S)
        with lock:
            running_now.discard(ctx.fencing_token)

    with fake_cluster() as (service, address):
        service.add(*[make_grant("slow", t, scheduled_at=SLOT + timedelta(minutes=t)) for t in range(1, 7)])
        with running([address], concurrency=2, handlers={"slow": slow}) as worker:
            assert wait_until(lambda: running_now == {1, 2})
            assert worker.active_runs == 2
            assert [r.max_runs for r in service.lease_requests] == [2]  # nothing asked while full
            gates[1].set()
            assert service.wait_for(lambda: len(service.lease_requests) >= 2)
            assert service.lease_requests[1].max_runs == 1  # one slot free, token 2 still runs
            for gate in gates.values():
                gate.set()
            assert service.wait_for(lambda: len(service.completions) == 6)
    assert most_running == 2
    # A finished run's slot frees before its outcome is answered: up to 2 more are held then.
    assert service.max_outstanding <= 2 * 2
    assert all(1 <= r.max_runs <= 2 for r in service.lease_requests)
    assert {c.kind for c in service.completions} == {worker_pb2.SUCCESS}


def test_a_finished_run_frees_its_slot_before_its_outcome_is_answered_up_to_a_bound() -> None:
    started: list[int] = []
    with fake_cluster() as (service, address):
        service.completes_held.set()  # no outcome is answered until released
        service.add(*[make_grant("quick", t, scheduled_at=SLOT + timedelta(minutes=t)) for t in range(1, 8)])
        with running(
            [address], concurrency=2, handlers={"quick": lambda ctx: started.append(ctx.fencing_token)}
        ) as worker:
            # Two runs, then two more while the first two outcomes wait; then no slot is free.
            assert wait_until(lambda: len(started) == 4), started
            assert worker.active_runs == 4  # every lease is still held (and heartbeated)
            # ...but no thread waits for an answer: the handler threads are back in the pool.
            assert wait_until(lambda: worker._threads.busy == 0)
            assert service.wait_for(lambda: len(service.lease_requests) >= 2)
            assert not wait_until(lambda: len(started) > 4, timeout_s=0.5)  # a bound holds
            assert service.lease_requests[-1].max_runs <= 2
            assert len(service.queue) == 3
            service.release_completes()
            assert service.wait_for(lambda: len(service.completions) == 7)
    assert sorted(started) == list(range(1, 8))
    assert service.max_outstanding <= 4
    assert {c.kind for c in service.completions} == {worker_pb2.SUCCESS}


def test_lease_request_names_the_served_targets() -> None:
    with fake_cluster() as (service, address):
        handlers = {"reports.build": lambda ctx: None, "demo.echo": lambda ctx: None}
        with running([address], handlers=handlers, shell=True, lease_wait_s=0.75):
            assert service.wait_for(lambda: service.lease_requests)
    request = service.lease_requests[0]
    assert list(request.targets) == ["demo.echo", "reports.build", "shell"]
    assert request.worker_id == "w1"
    assert request.wait.ToMilliseconds() == 750


def test_targets_can_be_restricted_but_not_invented() -> None:
    handlers = {"a": lambda ctx: None, "b": lambda ctx: None}
    assert Worker(["127.0.0.1:1"], handlers=handlers, targets=["b"]).targets == ["b"]
    with pytest.raises(ValueError, match="without a handler"):
        Worker(["127.0.0.1:1"], handlers=handlers, targets=["c"]).targets
    with pytest.raises(ValueError, match="nothing to run"):
        Worker(["127.0.0.1:1"]).start()
    with pytest.raises(ValueError, match="shell=True"):
        Worker(["127.0.0.1:1"], handlers={"shell": lambda ctx: None})


def test_decorator_registers_handlers() -> None:
    worker = Worker("127.0.0.1:7201,127.0.0.1:7202")

    @worker.handler("reports.build")
    def build(ctx):
        return None

    assert worker.targets == ["reports.build"]
    with pytest.raises(ValueError, match="already registered"):
        worker.add_handler("reports.build", build)


def test_handler_outcomes_map_to_completions() -> None:
    def ok(ctx):
        return "ignored"

    def boom(ctx):
        raise ValueError("x" * 10_000)

    def later(ctx):
        raise RetryLater(7.5, "downstream busy")

    async def async_ok(ctx):
        await asyncio.sleep(0.01)

    handlers = {"ok": ok, "boom": boom, "later": later, "async_ok": async_ok}
    with fake_cluster() as (service, address):
        service.add(*[make_grant(name, token) for token, name in enumerate(handlers, start=1)])
        with running([address], handlers=handlers, concurrency=4):
            assert service.wait_for(lambda: len(service.completions) == 4)
    ok_c, boom_c, later_c, async_c = (service.completion(t) for t in (1, 2, 3, 4))
    assert ok_c.kind == worker_pb2.SUCCESS and ok_c.error == ""
    assert async_c.kind == worker_pb2.SUCCESS
    assert boom_c.kind == worker_pb2.FAILURE
    assert boom_c.error.startswith("ValueError: xxx") and len(boom_c.error.encode()) <= 4096
    assert boom_c.error.endswith("[truncated]")
    assert "Traceback" in boom_c.output_tail or "raise ValueError" in boom_c.output_tail
    assert later_c.kind == worker_pb2.RETRY_LATER and later_c.error == "downstream busy"
    assert later_c.retry_after.ToMilliseconds() == 7500
    assert not ok_c.HasField("retry_after")  # unset: the job's own backoff applies
    assert ok_c.lease.fencing_token == 1 and ok_c.lease.job_id == "ok" and ok_c.worker_id == "w1"


def test_run_context_carries_the_grant() -> None:
    seen: list[RunContext] = []
    with fake_cluster() as (service, address):
        service.add(
            make_grant("job", 10, attempt=1, payload={"report": "sales", "n": [1, 2]}, deadline_s=30),
            make_grant("job", 11, attempt=2, payload={"report": "sales", "n": [1, 2]}),
            make_grant("job", 12, scheduled_at=SLOT + timedelta(days=1)),
        )
        with running([address], handlers={"job": seen.append}, concurrency=3):
            assert service.wait_for(lambda: len(service.completions) == 3)
    first, second, other = sorted(seen, key=lambda c: c.fencing_token)
    assert first.job_id == "job" and first.run_key == "job@2026-01-01T02:00:00Z"
    assert first.scheduled_at == SLOT and first.scheduled_at.tzinfo is not None
    assert first.attempt == 1 and second.attempt == 2
    assert first.payload == {"report": "sales", "n": [1, 2]} and other.payload is None
    assert first.deadline.tzinfo is not None
    assert abs((first.deadline - datetime.now(timezone.utc)).total_seconds() - 30) < 10
    assert first.target == "job" and first.worker_id == "w1"
    # Same slot, another attempt: same idempotency key, new fencing token.
    assert first.idempotency_key == second.idempotency_key
    assert first.fencing_token != second.fencing_token
    assert other.idempotency_key != first.idempotency_key


def test_invalid_payload_fails_the_attempt_without_running_the_handler() -> None:
    calls = []
    with fake_cluster() as (service, address):
        grant = make_grant("job", 1)
        grant.payload_json = "{not json"
        service.add(grant)
        with running([address], handlers={"job": calls.append}):
            assert service.wait_for(lambda: service.completions)
    assert calls == []
    assert service.completion(1).kind == worker_pb2.FAILURE
    assert "payload is not valid JSON" in service.completion(1).error


def test_surplus_grants_are_handed_back() -> None:
    gate = threading.Event()
    with fake_cluster() as (service, address):
        service.extra_grants = 2  # the server grants 3 runs for max_runs=1
        service.add(*[make_grant("job", t, scheduled_at=SLOT + timedelta(minutes=t)) for t in (1, 2, 3)])
        with running([address], handlers={"job": lambda ctx: gate.wait(WAIT_S)}, concurrency=1):
            assert service.wait_for(lambda: len(service.completions) == 2)
            handed_back = [service.completion(t) for t in (2, 3)]
            gate.set()
            assert service.wait_for(lambda: len(service.completions) == 3)
    assert all(c.kind == worker_pb2.RETRY_LATER and c.error == "worker at capacity" for c in handed_back)
    assert all(c.retry_after.ToNanoseconds() == 0 and c.HasField("retry_after") for c in handed_back)
    assert service.completion(1).kind == worker_pb2.SUCCESS


def test_grant_for_an_unserved_target_is_handed_back() -> None:
    with fake_cluster() as (service, address):
        service.ignore_targets = True
        service.add(make_grant("other", 1), make_grant("cmd", 2, shell="true"))
        with running([address], handlers={"mine": lambda ctx: None}, concurrency=2):
            assert service.wait_for(lambda: len(service.completions) == 2)
    for token in (1, 2):
        completion = service.completion(token)
        assert completion.kind == worker_pb2.RETRY_LATER
        assert "has no handler for target" in completion.error
        assert completion.retry_after.ToNanoseconds() > 0


def test_fails_over_when_the_first_address_is_dead() -> None:
    with fake_cluster() as (service, address):
        service.add(make_grant("job", 1, ttl_s=0.9), make_grant("job", 2, scheduled_at=SLOT + timedelta(hours=1)))
        gate = threading.Event()

        def job(ctx):
            if ctx.fencing_token == 1:
                gate.wait(WAIT_S)

        with running([closed_address(), address], handlers={"job": job}, concurrency=1):
            # The slow run's heartbeats and both completions also reach the live node.
            assert service.wait_for(lambda: len(service.heartbeats) >= 2)
            gate.set()
            assert service.wait_for(lambda: len(service.completions) == 2)
    assert [c.kind for c in service.completions] == [worker_pb2.SUCCESS] * 2


def test_lease_loop_backs_off_while_no_node_answers() -> None:
    with fake_cluster() as (service, address):
        service.fail_leases = grpc.StatusCode.UNAVAILABLE
        with running([address], handlers={"job": lambda ctx: None}):
            assert service.wait_for(lambda: len(service.lease_call_times) >= 4, timeout_s=10)
            times = list(service.lease_call_times)
            service.fail_leases = None
            service.add(make_grant("job", 1))
            # Recovers once the node answers again.
            assert service.wait_for(lambda: service.completions, timeout_s=10)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) >= 0.09, gaps  # backoff starts at 0.2s, jittered down to half
    assert gaps[-1] > gaps[0], gaps  # and grows


def test_early_empty_answers_do_not_spin() -> None:
    with fake_cluster() as (service, address):
        service.max_wait_s = 0.0  # answers "nothing" at once, whatever wait we ask for
        with running([address], handlers={"job": lambda ctx: None}, lease_wait_s=2.0):
            assert service.wait_for(lambda: len(service.lease_call_times) >= 3, timeout_s=10)
            times = list(service.lease_call_times)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) >= 0.45, gaps


def test_stop_does_not_wait_for_the_long_poll() -> None:
    with fake_cluster() as (service, address):
        worker = Worker([address], handlers={"job": lambda ctx: None}, lease_wait_s=30.0)
        worker.start()
        assert service.wait_for(lambda: service.lease_requests)
        started = time.monotonic()
        assert worker.stop() is True
        assert time.monotonic() - started < 3.0
        worker.stop()  # idempotent


def test_stop_before_start_and_all_nodes_down() -> None:
    Worker(["127.0.0.1:1"], handlers={"job": lambda ctx: None}).stop()
    worker = Worker([closed_address(), closed_address()], handlers={"job": lambda ctx: None}, lease_wait_s=0.2)
    worker.start()
    started = time.monotonic()
    assert worker.stop() is True
    assert time.monotonic() - started < 3.0


def test_a_worker_told_the_leader_calls_it_directly() -> None:
    """A follower forwards Lease to the leader and names it; the worker then leases, and reports
    outcomes, at the leader itself: no forwarding hop for every call."""
    with fake_cluster() as (follower, follower_address), fake_cluster() as (leader, leader_address):
        follower.leader_address = leader_address
        follower.max_wait_s = 0.0  # it has nothing to grant: answers at once, naming the leader
        leader.add(make_grant("job", 7))
        with running([follower_address, leader_address], handlers={"job": lambda ctx: None}):
            assert leader.wait_for(lambda: leader.completed_tokens() == [7])
        assert len(follower.lease_requests) == 1
        assert not follower.completions and not follower.heartbeats


def test_a_leader_address_outside_the_workers_list_changes_nothing() -> None:
    with fake_cluster() as (follower, follower_address):
        follower.leader_address = closed_address()  # the nodes' own name for the leader
        follower.max_wait_s = 0.0
        with running([follower_address], handlers={"job": lambda ctx: None}):
            assert follower.wait_for(lambda: len(follower.lease_requests) >= 2)
            follower.add(make_grant("job", 8))
            assert follower.wait_for(lambda: follower.completed_tokens() == [8])
