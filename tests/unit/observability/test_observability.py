"""Metrics, health and structured logs of a node, driven by the real core through a fake log.

The fake log applies core commands with increasing indexes and calls apply listeners under
its lock, as RaftLog does on the tick thread; metrics are then scraped from the registry.
"""

from __future__ import annotations

import io
import json
import logging
import threading
import urllib.request
from collections import Counter
from concurrent import futures
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
from prometheus_client import generate_latest

from scheduler.config import NodeConfig, Peer
from scheduler.core import State, decode_snapshot, encode_snapshot
from scheduler.core.commands import (
    ApplyJobs,
    BackfillRuns,
    ClaimLeadership,
    ClaimRuns,
    CompleteRuns,
    Completion,
    ExpireLeases,
    Expiry,
    ExtendLeases,
    GrantLeases,
    JobUpsert,
    LeaseRef,
    RunRef,
    SetJobPaused,
    SlotClaim,
    TriggerRun,
)
from scheduler.core.model import SECOND_US, HistoryPolicy, JobSpec, Resource, RetryPolicy
from scheduler.core.results import LeaseGranted
from scheduler.core.retention import slack
from scheduler.leader.dispatch import Dispatcher
from scheduler.logs import JsonFormatter, TextFormatter, configure_logging, run_fields
from scheduler.observability import (
    Observability,
    add_health,
    build_registry,
    dispatcher_queue_depths,
    metrics_url,
    node_ready,
    parse_host_port,
    start_observability,
)
from scheduler.observability.tally import RunTally
from scheduler.replication.pysyncobj_compat import RaftState
from tests.fakes import ImmediateRaftLog

T0 = 1_700_000_000 * SECOND_US
S = SECOND_US

# Small caps, so a test of a few hundred runs goes through many pruning passes.
SMALL_HISTORY = HistoryPolicy(keep_runs=100, max_age_us=0, keep_failed_runs=50, failed_max_age_us=0)


def make_config(metrics_address: str = "") -> NodeConfig:
    peers = tuple(Peer(f"n{i}", f"127.0.0.1:{7100 + i}", f"127.0.0.1:{7200 + i}") for i in (1, 2, 3))
    return NodeConfig(node_id="n1", peers=peers, data_dir=Path("/nonexistent"), metrics_address=metrics_address)


class FakeRaftLog(ImmediateRaftLog):
    """What the observability code uses of RaftLog: state under a lock, listeners, Raft facts."""

    def __init__(self, config: NodeConfig) -> None:
        super().__init__()
        self.leader = config.me.raft_address
        self.term = 3

    def restore_snapshot(self) -> None:
        """Replace the state object, as a snapshot install does (no listener call)."""
        with self._lock:
            self._state = decode_snapshot(encode_snapshot(self._state))

    def is_leader(self) -> bool:
        return self.leader == "127.0.0.1:7101"

    def leader_address(self) -> str:
        return self.leader

    def raft_status(self) -> dict:
        return {
            "state": RaftState.LEADER if self.is_leader() else RaftState.FOLLOWER,
            "has_quorum": True,
            "log_len": self.index,
            "partner_node_status_server_127.0.0.1:7102": 2,
            "partner_node_status_server_127.0.0.1:7103": 0,
        }

    def tick_stalls(self) -> tuple[int, float]:
        return 2, 0.8

    def journal_syncs(self) -> tuple[int, list[int], float]:
        return 5, [0, 0, 3, 2] + [0] * 9, 0.004  # 3 under 0.5 ms, 2 under 1 ms

    @property
    def commit_index(self) -> int:
        return self.index + 2

    @property
    def applied_index(self) -> int:
        return self.index


def spec(job_id: str, target: str = "h", **fields) -> JobSpec:
    return JobSpec(
        id=job_id, schedule="*/10 * * * * *", target_kind="handler", target=target, jitter="pinned", **fields
    )


class Cluster:
    """One leader's epoch on a fake log, with a fake clock for `issued_at_us`."""

    def __init__(self, log: FakeRaftLog) -> None:
        self.log = log
        self.now_us = T0
        log.apply(ClaimLeadership(T0, "n1", 3, monotonic_us=0))
        self.epoch = log._state.epoch

    def at(self, now_us: int) -> int:
        self.now_us = now_us
        return now_us

    def jobs(self, *specs: JobSpec, resources=(), removals=(), request_id: str = "r1"):
        upserts = tuple(
            JobUpsert(s, self.log._state.jobs[s.id].version if s.id in self.log._state.jobs else 0, T0 + 10 * S)
            for s in specs
        )
        return self.log.apply(ApplyJobs(self.now_us, "tester", request_id, upserts, tuple(removals), tuple(resources)))

    def claim(self, *claims: tuple[str, int, int], status: str = "queued"):
        slots = tuple(SlotClaim(job, slot, nxt, self.log._state.jobs[job].version, status) for job, slot, nxt in claims)
        return self.log.apply(ClaimRuns(self.now_us, self.epoch, slots, monotonic_us=self.now_us - T0))

    def grant(self, *refs: tuple[str, int], ttl_us: int = 10 * S):
        result = self.log.apply(
            GrantLeases(
                self.now_us,
                self.epoch,
                "w1",
                ttl_us,
                tuple(RunRef(j, s) for j, s in refs),
                monotonic_us=self.now_us - T0,
            )
        )
        return [e for e in result.events if isinstance(e, LeaseGranted)]

    def complete(self, job: str, slot: int, token: int, outcome: str = "success"):
        return self.log.apply(CompleteRuns(self.now_us, (Completion(LeaseRef(job, slot, token), "w1", outcome),)))

    def heartbeat(self, job: str, slot: int, token: int):
        return self.log.apply(ExtendLeases(self.now_us, (LeaseRef(job, slot, token),)))

    def expire(self, job: str, slot: int, token: int, reason: str = "lease_expired"):
        expiry = Expiry(LeaseRef(job, slot, token), reason)
        return self.log.apply(ExpireLeases(self.now_us, self.epoch, (expiry,), monotonic_us=self.now_us - T0))


def brute_force_statuses(state: State) -> Counter:
    return Counter(run.status for runs in state.runs.values() for run in runs)


def value(registry, name: str, **labels) -> float | None:
    return registry.get_sample_value(name, labels)


@pytest.fixture
def setup():
    config = make_config()
    log = FakeRaftLog(config)
    dispatcher = {"current": None}
    registry, observer = build_registry(log, config, lambda: dispatcher["current"], lambda: 1)
    log.add_apply_listener(observer)
    return SimpleNamespace(
        config=config, log=log, registry=registry, observer=observer, cluster=Cluster(log), dispatcher=dispatcher
    )


def test_a_day_in_the_life_is_counted(setup):
    c, registry = setup.cluster, setup.registry
    c.jobs(
        spec("a", uses=("db",)),
        JobSpec(id="b", schedule="* * * * *", target_kind="shell", target="echo hi", jitter="pinned"),
        spec("c", paused=True),
        resources=(Resource("db", max_concurrent=5),),
    )
    slot = T0 + 10 * S
    c.at(slot + 250_000)  # the trigger pass starts a quarter second after the slot
    c.claim(("a", slot, slot + 10 * S), ("b", slot, slot + 60 * S), ("c", slot, slot + 10 * S))

    assert value(registry, "raftcron_runs", status="queued") == 2
    assert value(registry, "raftcron_runs", status="skipped") == 1  # c is paused: accounted, not fired
    assert value(registry, "raftcron_runs_live", target="h", status="queued") == 1
    assert (
        value(registry, "raftcron_runs_live", target="shell:", status="queued") == 1
    )  # shell jobs are labelled per owner (none here)
    assert value(registry, "raftcron_resource_queued_runs", resource="db") == 1
    assert value(registry, "raftcron_resource_max_concurrent", resource="db") == 5
    assert value(registry, "raftcron_jobs") == 3
    assert value(registry, "raftcron_jobs_paused") == 1
    assert value(registry, "raftcron_runs_claimed_total", status="queued") == 2
    assert value(registry, "raftcron_fire_lateness_seconds_count") == 2
    assert value(registry, "raftcron_fire_lateness_seconds_sum") == pytest.approx(0.5)
    assert value(registry, "raftcron_fire_lateness_seconds_bucket", le="0.1") == 0
    assert value(registry, "raftcron_fire_lateness_seconds_bucket", le="0.25") == 2

    grants = c.grant(("a", slot), ("b", slot))
    token_a, token_b = (g.fencing_token for g in grants)
    assert value(registry, "raftcron_lease_grants_total") == 2
    assert value(registry, "raftcron_runs", status="leased") == 2
    assert value(registry, "raftcron_resource_leased_runs", resource="db") == 1
    assert value(registry, "raftcron_resource_queued_runs", resource="db") == 0

    c.complete("a", slot, token_a)
    c.heartbeat("a", slot, token_a)  # after completion: fenced, not leased
    c.heartbeat("b", slot, token_b + 100)  # a token never granted: stale
    assert value(registry, "raftcron_run_outcomes_total", outcome="succeeded") == 1
    assert value(registry, "raftcron_lease_fenced_total", op="heartbeat", reason="not_leased") == 1
    assert value(registry, "raftcron_lease_fenced_total", op="heartbeat", reason="stale_token") == 1

    c.at(slot + 30 * S)  # b's lease (10 s) has lapsed: the reaper expires it, the run retries
    c.expire("b", slot, token_b)
    assert value(registry, "raftcron_lease_expiries_total", reason="lease_expired", then="retry") == 1
    assert value(registry, "raftcron_run_outcomes_total", outcome="retry_scheduled") == 1
    assert value(registry, "raftcron_runs", status="queued") == 1
    assert value(registry, "raftcron_runs", status="succeeded") == 1

    c.at(slot + 11 * S)  # replicated time never runs backwards: this claim is late by 20 s
    c.claim(("a", slot + 10 * S, slot + 20 * S))
    assert value(registry, "raftcron_fire_lateness_seconds_count") == 3
    assert value(registry, "raftcron_fire_lateness_seconds_bucket", le="10.0") == 2
    assert value(registry, "raftcron_fire_lateness_seconds_bucket", le="30.0") == 3

    assert value(registry, "raftcron_applied_entries_total", command="ClaimRuns", result="accepted") == 2
    assert value(registry, "raftcron_apply_delay_seconds_count", command="ClaimRuns") == 2
    assert value(registry, "raftcron_runs_retained") == len(setup.log._state.runs["a"]) + 2
    assert dict(brute_force_statuses(setup.log._state)) == {
        s: value(registry, "raftcron_runs", status=s) for s in brute_force_statuses(setup.log._state)
    }
    text = generate_latest(registry).decode()
    assert "raftcron_fire_lateness_seconds_bucket" in text and "process_cpu_seconds_total" in text


def test_raft_gauges(setup):
    registry, log = setup.registry, setup.log
    assert value(registry, "raftcron_raft_role", role="leader") == 1
    assert value(registry, "raftcron_raft_role", role="follower") == 0
    assert value(registry, "raftcron_raft_is_leader") == 1
    assert value(registry, "raftcron_raft_term") == 3
    assert value(registry, "raftcron_raft_commit_index") == log.index + 2
    assert value(registry, "raftcron_raft_applied_index") == log.index
    assert value(registry, "raftcron_raft_commit_lag") == 2
    assert value(registry, "raftcron_raft_tick_stalls_total") == 2
    assert value(registry, "raftcron_raft_tick_gap_max_seconds") == 0.8
    assert value(registry, "raftcron_raft_journal_syncs_total") == 5
    assert value(registry, "raftcron_raft_journal_sync_seconds_bucket", le="0.0005") == 3
    assert value(registry, "raftcron_raft_journal_sync_seconds_bucket", le="0.001") == 5
    assert value(registry, "raftcron_raft_journal_sync_seconds_count") == 5
    assert value(registry, "raftcron_raft_peer_connected", peer="n2") == 1
    assert value(registry, "raftcron_raft_peer_connected", peer="n3") == 0
    assert value(registry, "raftcron_leader_epoch") == 1
    assert value(registry, "raftcron_leading_epoch") == 1
    assert value(registry, "raftcron_ready") == 1
    (info,) = [m for m in registry.collect() if m.name == "raftcron_node_info"]
    assert [(s.labels["node_id"], s.value) for s in info.samples] == [("n1", 1)]
    log.leader = "127.0.0.1:7102"  # n2 leads now, but has not opened an epoch here yet
    assert value(registry, "raftcron_ready") == 0
    assert value(registry, "raftcron_raft_role", role="follower") == 1


def test_runs_by_status_stay_exact_through_pruning_backfill_replace_and_removal(setup):
    """Every path the fast path cannot follow is recounted; the totals match a full scan."""
    c, log, registry, tally = setup.cluster, setup.log, setup.registry, setup.observer.tally
    c.jobs(
        spec("many", retry=RetryPolicy(max_attempts=1), history=SMALL_HISTORY),
        spec("gone"),
        spec("swap", overlap="replace"),
    )
    for i in range(1_040):  # far more than the job keeps: the oldest final runs are pruned, in passes
        slot = T0 + (10 + i) * S
        c.at(slot)
        status = "skipped" if i % 7 == 0 else "queued"
        c.claim(("many", slot, slot + S), status=status)
        if status == "queued":
            (grant,) = c.grant(("many", slot))
            c.complete("many", slot, grant.fencing_token, "success" if i % 5 else "failure")
        if i % 100 == 0:
            assert dict(brute_force_statuses(log._state)) == {
                s: n for s in brute_force_statuses(log._state) if (n := value(registry, "raftcron_runs", status=s))
            }
    assert len(log._state.runs["many"]) <= SMALL_HISTORY.keep_runs + SMALL_HISTORY.keep_failed_runs + slack(
        SMALL_HISTORY
    )
    c.claim(("gone", T0 + 10 * S, T0 + 20 * S), ("swap", T0 + 10 * S, T0 + 20 * S))
    c.claim(("swap", T0 + 20 * S, T0 + 30 * S))  # replace: cancels the live run, an event nobody returns
    assert log._state.get_run("many", T0 + 1_011 * S).status == "skipped"
    c.log.apply(BackfillRuns(c.now_us, "many", "tester", "bf1", (T0 + 1_011 * S,), 0))  # re-queues a skipped slot
    c.log.apply(TriggerRun(c.now_us, "gone", "tester", "t1"))
    c.log.apply(TriggerRun(c.now_us, "gone", "tester", "t1"))  # a retried request: answered, nothing changes
    c.jobs(removals=("gone",), request_id="r2")  # cancels its live runs
    c.log.apply(SetJobPaused(c.now_us, "swap", True, "tester", "maintenance", "p1"))
    expected = brute_force_statuses(log._state)
    for status in set(expected) | {"queued", "leased", "cancelled"}:
        assert value(registry, "raftcron_runs", status=status) == expected.get(status, 0), status
    assert value(registry, "raftcron_jobs_paused") == 1
    assert tally.tracked_runs == log._state.run_count
    before = tally.recounted_runs
    value(registry, "raftcron_runs", status="queued")
    assert tally.recounted_runs == before  # nothing changed since: a scrape recounts nothing


def test_steady_state_scrapes_do_not_rescan(setup):
    c, registry, tally = setup.cluster, setup.registry, setup.observer.tally
    c.jobs(*(spec(f"j{i}") for i in range(50)))
    slot = T0 + 10 * S
    c.at(slot)
    c.claim(*((f"j{i}", slot, slot + 10 * S) for i in range(50)))
    value(registry, "raftcron_runs", status="queued")
    first = tally.recounted_runs
    grants = c.grant(*((f"j{i}", slot) for i in range(50)))
    for g in grants:
        c.complete(g.job_id, slot, g.fencing_token)
    assert value(registry, "raftcron_runs", status="succeeded") == 50
    assert tally.recounted_runs == first  # grants and completions were followed, not recounted


def test_pruning_a_uniform_history_needs_no_recount(setup):
    c, registry, tally = setup.cluster, setup.registry, setup.observer.tally
    c.jobs(spec("ok", history=SMALL_HISTORY))
    for i in range(1_010):
        slot = T0 + (10 + i) * S
        c.at(slot)
        c.claim(("ok", slot, slot + S))
        (grant,) = c.grant(("ok", slot))
        c.complete("ok", slot, grant.fencing_token)
        if i == 995:
            assert value(registry, "raftcron_runs", status="succeeded") == len(setup.log._state.runs["ok"])
            recounted = tally.recounted_runs
    kept = len(setup.log._state.runs["ok"])
    assert SMALL_HISTORY.keep_runs <= kept <= SMALL_HISTORY.keep_runs + slack(SMALL_HISTORY)
    assert value(registry, "raftcron_runs", status="succeeded") == kept
    assert tally.recounted_runs == recounted


def test_a_restored_snapshot_is_recounted(setup):
    c, log, registry = setup.cluster, setup.log, setup.registry
    c.jobs(spec("a"))
    c.at(T0 + 10 * S)
    c.claim(("a", T0 + 10 * S, T0 + 20 * S))
    assert value(registry, "raftcron_runs", status="queued") == 1
    log.restore_snapshot()
    c.grant(("a", T0 + 10 * S))
    assert value(registry, "raftcron_runs", status="queued") == 0
    assert value(registry, "raftcron_runs", status="leased") == 1


def test_recounts_release_the_lock_between_chunks():
    state = State()
    from scheduler.core.model import Run

    for j in range(30):
        state.runs[f"j{j}"] = [Run(job_id=f"j{j}", scheduled_us=i, status="succeeded") for i in range(100)]
        state.run_count += 100
    tally = RunTally()
    rounds = 0
    while not tally.sync(state, budget_runs=500):
        rounds += 1
    assert rounds >= 5
    assert tally.totals["succeeded"] == 3_000


def test_replayed_entries_are_not_counted_again(setup):
    c, registry, observer = setup.cluster, setup.registry, setup.observer
    c.jobs(spec("a"))
    observer.replayed_until = setup.log.index + 1  # the next entry was applied before a restart
    c.at(T0 + 10 * S)
    c.claim(("a", T0 + 10 * S, T0 + 20 * S))
    assert value(registry, "raftcron_runs_claimed_total", status="queued") is None
    assert value(registry, "raftcron_fire_lateness_seconds_count") == 0
    assert value(registry, "raftcron_runs", status="queued") == 1  # state-derived figures are still exact


def test_alert_backlog_when_state_has_alerts(setup):
    log, registry = setup.log, setup.registry
    if not hasattr(log._state, "alerts"):
        assert value(registry, "raftcron_alerts_retained") is None
        return
    from scheduler.core.model import Alert

    with log.read() as state:
        state.now_us = T0 + 100 * S
        for i, kind in enumerate(("failed", "failed", "late")):
            state.alerts[f"{kind}:{i}"] = Alert(
                f"{kind}:{i}",
                kind,
                "a",
                "team",
                "default",
                T0,
                "x",
                T0 + i * S,
                delivered_us=T0 + 50 * S if i == 0 else 0,
            )
    assert value(registry, "raftcron_alerts_retained") == 3
    assert value(registry, "raftcron_alerts_pending", kind="failed") == 1
    assert value(registry, "raftcron_alerts_pending", kind="late") == 1
    assert value(registry, "raftcron_alert_oldest_pending_seconds") == 99


def test_dispatcher_queue_depths(setup):
    c, log, registry = setup.cluster, setup.log, setup.registry
    c.jobs(spec("a"), spec("b", target="other"))
    slot = T0 + 10 * S
    c.at(slot)
    c.claim(("a", slot, slot + 10 * S), ("b", slot, slot + 10 * S))
    term = SimpleNamespace(clock=None, stopping=threading.Event(), epoch=1)
    dispatcher = Dispatcher(term, log, 10 * S, 1.0)
    with log.read() as state:
        dispatcher._push(
            [
                dispatcher._queued_entry(state, "a", slot),
                dispatcher._queued_entry(state, "b", slot, not_before_us=slot + 60 * S),
            ]
        )
    dispatcher._promote_ready(slot)
    assert dispatcher_queue_depths(dispatcher) == {("h", "ready"): 1, ("other", "pending"): 1}
    assert dispatcher_queue_depths(None) == {}
    setup.dispatcher["current"] = dispatcher
    assert value(registry, "raftcron_dispatch_queue", target="h", stage="ready") == 1
    assert value(registry, "raftcron_dispatch_queue", target="other", stage="pending") == 1


def test_node_ready_needs_the_leaders_epoch_applied(setup):
    config, log = setup.config, setup.log
    assert node_ready(log, config)
    log.leader = ""
    assert not node_ready(log, config)
    log.leader = "127.0.0.1:7102"
    assert not node_ready(log, config)  # n2 is leader for Raft but its epoch is not applied here


def test_health_service_follows_readiness(setup):
    pytest.importorskip("grpc_health.v1.health")
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    def _check(stub, service: str) -> int:
        return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    node = SimpleNamespace(raftlog=setup.log, config=setup.config)
    updater = add_health(server, node, interval_s=0.05)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
            _wait(lambda: _check(stub, "") == serving)
            assert _check(stub, "raftcron.v1.JobService") == serving
            assert _check(stub, "raftcron.v1.WorkerService") == serving
            setup.log.leader = ""  # an election: no leader known
            _wait(lambda: _check(stub, "") == not_serving)
            assert _check(stub, "raftcron.v1.RunService") == not_serving
            assert _check(stub, "raftcron.v1.OpsService") == not_serving
            assert _check(stub, "raftcron.v1.ClusterService") == serving  # answers locally, always
            setup.log.leader = "127.0.0.1:7101"
            _wait(lambda: _check(stub, "") == serving)
            updater.close()  # a drain: everything reports NOT_SERVING before the server stops
            assert _check(stub, "") == not_serving
            assert _check(stub, "raftcron.v1.ClusterService") == not_serving
    finally:
        updater.close()
        server.stop(0).wait()


def test_health_updater_survives_a_failing_check():
    health = pytest.importorskip("grpc_health.v1.health")
    from scheduler.observability.health import HealthUpdater

    servicer = health.HealthServicer()

    def broken() -> bool:
        raise RuntimeError("boom")

    updater = HealthUpdater(servicer, broken)
    assert updater.check_now() is False
    assert not updater.serving


def _wait(condition, timeout_s: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_start_observability_serves_metrics_over_http():
    config = make_config(metrics_address=f"127.0.0.1:{_free_port()}")
    log = FakeRaftLog(config)
    Cluster(log)
    node = SimpleNamespace(
        raftlog=log, config=config, current_dispatcher=lambda: None, lifecycle=SimpleNamespace(current=None)
    )
    observability = start_observability(node)
    try:
        assert observability.url == f"http://{config.metrics_address}/metrics"
        assert observability.observer.replayed_until == log.commit_index
        with urllib.request.urlopen(observability.url, timeout=5) as response:
            body = response.read().decode()
        assert "raftcron_raft_term 3.0" in body
        assert "raftcron_leading_epoch 0.0" in body
    finally:
        observability.close()
    assert observability.observer not in log._listeners


def test_metrics_off_when_no_address():
    config = make_config()
    node = SimpleNamespace(raftlog=FakeRaftLog(config), config=config)
    observability = start_observability(node)
    assert observability == Observability() and observability.url == ""
    observability.close()


def test_addresses():
    assert parse_host_port("127.0.0.1:9100") == ("127.0.0.1", 9100)
    assert parse_host_port("[::1]:9100") == ("::1", 9100)
    assert metrics_url("[::1]:9100") == "http://[::1]:9100/metrics"
    assert metrics_url("") == ""
    with pytest.raises(ValueError):
        parse_host_port("localhost")


# -- structured logs -------------------------------------------------------------------


def _record(message: str, *args, level=logging.INFO, **extra) -> logging.LogRecord:
    logger = logging.getLogger("raftcron.test")
    record = logger.makeRecord(logger.name, level, __file__, 1, message, args, None, extra=extra)
    return record


def test_json_log_lines_carry_run_fields():
    line = JsonFormatter("n2").format(
        _record("claimed %d runs", 3, **run_fields("nightly", 1_700_000_000_000_000, token=42, epoch=7))
    )
    doc = json.loads(line)
    assert doc["level"] == "INFO" and doc["logger"] == "raftcron.test" and doc["node"] == "n2"
    assert doc["message"] == "claimed 3 runs"
    assert doc["run_key"] == "nightly@2023-11-14T22:13:20Z"  # the readable form, as the CLI prints it
    assert (doc["job_id"], doc["token"], doc["epoch"]) == ("nightly", 42, 7)
    assert doc["ts"].endswith("Z") and "T" in doc["ts"]


def test_json_log_lines_hold_exceptions_and_odd_values():
    try:
        raise ValueError("bad")
    except ValueError:
        import sys

        record = _record("failed", level=logging.ERROR, path=Path("/x"), node="spoof")
        record.exc_info = sys.exc_info()
    doc = json.loads(JsonFormatter("n1").format(record))
    assert "ValueError: bad" in doc["exc"]
    assert doc["path"] == "/x"
    assert doc["node"] == "n1"  # an extra field never overwrites the fixed ones


def test_text_log_lines_keep_todays_format():
    formatter = TextFormatter("n3")
    plain = formatter.format(_record("node %s serving", "n3"))
    assert plain.split(" ", 2)[2] == "n3 INFO raftcron.test: node n3 serving"
    with_fields = formatter.format(_record("claimed", run_key="a@1", reason="two words"))
    assert with_fields.endswith('raftcron.test: claimed run_key=a@1 reason="two words"')


def test_configure_logging_replaces_handlers():
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    stream = io.StringIO()
    try:
        configure_logging("debug", "json", "n1", stream=stream)
        configure_logging("DEBUG", "json", "n1", stream=stream)  # idempotent: one handler, one line per record
        logging.getLogger("raftcron.x").debug("hello", extra={"job_id": "j"})
        lines = stream.getvalue().splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["job_id"] == "j"
        with pytest.raises(ValueError):
            configure_logging("INFO", "xml", "n1")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
        logging.captureWarnings(False)
