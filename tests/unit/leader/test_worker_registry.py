"""The leader's worker registry: what Lease and Heartbeat calls taught it, bounded and expiring."""

from __future__ import annotations

from scheduler.core.model import SECOND_US
from scheduler.leader.worker_registry import WorkerRegistry


class FakeClock:
    def __init__(self) -> None:
        self.now_us = 1_000 * SECOND_US

    def __call__(self) -> int:
        return self.now_us

    def advance(self, seconds: float) -> None:
        self.now_us += int(seconds * SECOND_US)


def test_lease_and_heartbeat_calls_make_one_worker():
    clock = FakeClock()
    registry = WorkerRegistry(clock)
    registry.leased("ops/w1", ["payroll.run", "reports.build"], "ipv4:10.0.0.7:5000")
    clock.advance(3)
    registry.heartbeat("ops/w1", leases=2, peer="ipv4:10.0.0.7:5000")
    (worker,) = registry.workers()
    assert worker.holder == "ops/w1" and worker.targets == ("payroll.run", "reports.build")
    assert worker.first_seen_us == clock.now_us - 3 * SECOND_US and worker.last_seen_us == clock.now_us
    assert worker.last_lease_us == clock.now_us - 3 * SECOND_US and worker.last_heartbeat_us == clock.now_us
    assert worker.leases_in_heartbeat == 2 and worker.peer == "ipv4:10.0.0.7:5000"


def test_most_recently_seen_first_and_silent_workers_expire():
    clock = FakeClock()
    registry = WorkerRegistry(clock, expire_after_us=60 * SECOND_US)
    registry.leased("ops/old", ["a"])
    clock.advance(30)
    registry.leased("ops/new", ["a"])
    assert [w.holder for w in registry.workers()] == ["ops/new", "ops/old"]
    clock.advance(30)
    assert [w.holder for w in registry.workers()] == ["ops/new", "ops/old"]  # 60 s: not yet
    clock.advance(0.001)
    assert [w.holder for w in registry.workers()] == ["ops/new"]
    clock.advance(30)
    registry.heartbeat("ops/new", leases=1)  # a heartbeat keeps it alive too
    clock.advance(59)
    assert [w.holder for w in registry.workers()] == ["ops/new"]


def test_bounded_by_evicting_the_least_recently_seen():
    clock = FakeClock()
    registry = WorkerRegistry(clock, max_workers=3)
    for n in range(5):
        registry.leased(f"ops/w{n}", ["a"])
        clock.advance(1)
    registry.heartbeat("ops/w2", leases=0)  # seen again: now the newest
    registry.leased("ops/w5", ["a"])
    assert [w.holder for w in registry.workers()] == ["ops/w5", "ops/w2", "ops/w4"]
    assert registry.evicted == 3


def test_serving_follows_the_dispatchers_target_rules():
    clock = FakeClock()
    registry = WorkerRegistry(clock)
    registry.leased("ops/handlers", ["payroll.run"])
    registry.leased("ops/shell", ["shell"])  # every owner's shell commands
    registry.leased("ops/any", [])  # no targets: every queue
    registry.heartbeat("ops/only-heartbeats", leases=1)  # leased from a previous leader
    assert {w.holder for w in registry.serving("payroll.run")} == {"ops/handlers", "ops/any"}
    assert {w.holder for w in registry.serving("shell:finance")} == {"ops/shell", "ops/any"}
    assert {w.holder for w in registry.serving("reports.build")} == {"ops/any"}


def test_the_targets_kept_are_bounded():
    registry = WorkerRegistry(FakeClock())
    registry.leased("ops/w", [f"t{n:03d}" for n in range(500)])
    assert len(registry.workers()[0].targets) == 32
