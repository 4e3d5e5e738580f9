"""Completions of runs that finish together travel together (CompleteMany), and an older node
without CompleteMany still gets every outcome, one Complete each."""

from __future__ import annotations

import threading

from tests.unit.worker.test_worker_fakes import WAIT_S, fake_cluster, make_grant, wait_until
from worker import Worker
from worker.api.v1 import worker_pb2

HERD = 64


def _run_herd(service, address: str) -> None:
    gate = threading.Event()
    for token in range(1, HERD + 1):
        service.add(make_grant("job", token))
    worker = Worker([address], handlers={"job": lambda ctx: gate.wait(WAIT_S)}, concurrency=HERD, lease_wait_s=0.5)
    worker.start()
    try:
        assert wait_until(lambda: worker.active_runs == HERD), "the herd is not running"
        gate.set()  # every run finishes at once
        assert service.wait_for(lambda: len(service.completions) == HERD), "not every outcome arrived"
    finally:
        worker.stop()
    assert sorted(service.completed_tokens()) == list(range(1, HERD + 1))
    assert all(c.kind == worker_pb2.SUCCESS for c in service.completions)


def test_a_herd_finishing_together_is_reported_in_a_few_calls() -> None:
    with fake_cluster() as (service, address):
        _run_herd(service, address)
    assert sum(service.complete_many_calls) == HERD
    assert len(service.complete_many_calls) < HERD / 4, service.complete_many_calls


def test_a_node_without_complete_many_gets_one_complete_per_run() -> None:
    with fake_cluster() as (service, address):
        service.complete_many = False
        _run_herd(service, address)
    assert service.complete_many_calls == []
    assert service.complete_attempts == HERD
