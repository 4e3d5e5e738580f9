"""A mixed-version cluster: one node made to speak log format 1 (as a node of the previous version).

In one process (RaftLog nodes): the cluster version is held at 1 while that node advertises 1, a
format-2 command is refused naming it, and an entry it cannot decode, forced past the guard, halts
it (no rejection recorded, no further entry applied, Raft stopped) while the others go on with
equal digests; restarted uncapped on the same journal, it catches up to the same state.

With node processes (LocalCluster): `status --json` shows the version and what each voter
advertises, the version rises once the capped node restarts uncapped, and a node restarted capped
on that log exits with code 3 and "this node is older than the log: upgrade it" while the others
go on; `cluster add` refuses a node that reads less than the cluster version. A halting leader
stops its Raft, and an offline replay of its files stops at the same entry. Waits poll conditions
against deadlines; nothing sleeps a fixed time.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import grpc
import pytest

from scheduler.core.codec import encode_command, state_digest
from scheduler.core.commands import ClaimLeadership, ReadBarrier, SetClusterVersion
from scheduler.core.log_format import LOG_FORMAT
from scheduler.leader.clock import LeaderClock
from scheduler.leader.cluster_version import ClusterVersionLoop
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.local import LocalCluster
from scheduler.local import wait_until as wait_for
from scheduler.node import EXIT_HALTED
from scheduler.replication import LogFormatNotEnabled, NodeHalted, RaftLog
from scheduler.replication.offline import state_at
from scheduler.replication.upgrades import TEST_CAP_ENV, UndecodableEntry
from scheduler.rpc.convert import spec_to_pb
from tests.fakes import spec
from tests.integration.conftest import FAST_RAFT, free_port_base
from tests.integration.test_raftlog import free_ports, leader_of, settings_for, submit, wait_until

pytestmark = pytest.mark.integration

OLDER = "this node is older than the log: upgrade it"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.CRITICAL)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


@pytest.fixture
def critical() -> Iterator[Records]:
    handler = Records()
    loggers = [logging.getLogger("pysyncobj"), logging.getLogger("raftcron")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


def _digest_at(node: RaftLog) -> tuple[int, str]:
    with node.read() as state:
        return state.applied_index, state_digest(state)


def _same_state(nodes: list[RaftLog]) -> str | None:
    seen = {_digest_at(node) for node in nodes}
    return next(iter(seen))[1] if len(seen) == 1 else None


def _term_for(leader: RaftLog) -> LeaderTerm:
    result = submit([leader], ClaimLeadership(time.time_ns() // 1000, "leader", leader.term), via=leader)
    epoch = result.events[0].epoch
    clock = LeaderClock(time.time_ns() // 1000, time.monotonic_ns() // 1000, lambda: time.time_ns() // 1000)
    return LeaderTerm(epoch=epoch, term=leader.term, clock=clock)


def test_a_node_that_reads_format_1_holds_the_version_and_halts_on_a_forced_entry(tmp_path: Path, critical) -> None:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    old = addresses[2]
    nodes = [
        RaftLog(settings_for(a, addresses, tmp_path / f"node{i}"), max_log_format=1 if a == old else None)
        for i, a in enumerate(addresses)
    ]
    started = list(nodes)
    try:
        for node in nodes:
            node.start()
        # The capped node must not lead: a leader that halts is a different test (the others elect).
        leader = leader_of(nodes)
        while leader.settings.self_address == old:
            leader.transfer_leadership()
            leader = wait_until(
                lambda: next((n for n in nodes if n.is_leader() and n.settings.self_address != old), None),
                "a leader other than the capped node",
                timeout_s=30,
            )
        term = _term_for(leader)
        wait_until(
            lambda: set(leader.log_formats()) == set(addresses), "every node's keepalive at the leader", timeout_s=30
        )
        assert leader.log_formats() == {addresses[0]: LOG_FORMAT, addresses[1]: LOG_FORMAT, old: 1}

        # Held: the leader's loop does not raise it, and nobody may propose format 2.
        ClusterVersionLoop(term, leader, timeout_s=10.0).step()
        with leader.read() as state:
            assert state.cluster_version == 1
        with pytest.raises(
            LogFormatNotEnabled, match=rf"log format 1; upgrade {old} \(advertises 1\) before using SetClusterVersion"
        ):
            leader.propose(SetClusterVersion(time.time_ns() // 1000, 2, term.epoch))
        submit(nodes, ReadBarrier(1), via=leader)
        wait_until(lambda: _same_state(nodes), "every replica at one state before the forced entry", timeout_s=30)
        halt_index = _digest_at(nodes[2])[0]

        # Forced past the guard, as a buggy or newer proposer could: the capped node cannot decode it.
        answered: Future = Future()
        forced = encode_command(SetClusterVersion(time.time_ns() // 1000, 2, term.epoch))
        leader._consumer.apply_entry(forced, callback=lambda result, error: answered.set_result(result))
        assert answered.result(timeout=10).accepted
        capped = nodes[2]
        wait_until(lambda: capped.halted, "the capped node to halt", timeout_s=30)
        assert capped.halted.startswith(f"{OLDER} (entry {halt_index + 1}: SetClusterVersion needs log format 2")
        assert [m for m in critical.messages if OLDER in m] == [f"raftcron.replication: {capped.halted}"]
        wait_until(lambda: not capped._halted_syncobj.tick_thread_alive(), "the halted node's Raft to stop")
        with pytest.raises(NodeHalted):
            capped.propose(ReadBarrier(1))

        # The others go on applying, and agree; the halted node applied nothing after the halt.
        for _ in range(3):
            submit(nodes[:2], ReadBarrier(1), via=leader)
        digest = wait_until(lambda: _same_state(nodes[:2]), "the two others to agree", timeout_s=30)
        with leader.read() as state:
            assert state.cluster_version == 2 and state.applied_index > halt_index + 1
        assert _digest_at(capped)[0] == halt_index

        # Upgraded (restarted uncapped on its own journal), it applies what it had refused.
        capped.close()
        upgraded = RaftLog(settings_for(old, addresses, tmp_path / "node2"))
        nodes[2] = upgraded
        started.append(upgraded)
        upgraded.start()
        submit(nodes, ReadBarrier(1), via=leader)
        digest = wait_until(lambda: _same_state(nodes), "the upgraded node to catch up", timeout_s=60)
        assert digest == _same_state(nodes[:2])
        with upgraded.read() as state:
            assert state.cluster_version == 2
        assert not upgraded.halted
    finally:
        for node in started:
            node.close()


# -- node processes ---------------------------------------------------------------------------


def _start_capped(cluster: LocalCluster, node_id: str, monkeypatch) -> None:
    """Start one node with the test cap in its environment (a Popen inherits it)."""
    monkeypatch.setenv(TEST_CAP_ENV, "1")
    try:
        cluster.start(node_id)
    finally:
        monkeypatch.delenv(TEST_CAP_ENV)


def _status_json(cluster: LocalCluster, node_id: str) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler.cli",
            "--cluster",
            cluster.cluster_arg,
            "status",
            "--json",
            "--node",
            cluster.member(node_id).grpc_address,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(out.stdout)


def _versions(cluster: LocalCluster, node_ids: list[str]) -> set[int]:
    return {status.cluster_version if status else -1 for status in (cluster.status(n) for n in node_ids)}


def _applied(cluster: LocalCluster, job_id: str) -> bool:
    """Apply one job; False (to be retried) while no leader answers, as after a restart."""
    try:
        with cluster.client() as client:
            client.apply_jobs(jobs=[spec_to_pb(spec(job_id))], author="test")
    except grpc.RpcError as exc:
        if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED):
            raise
        return False
    return True


def _every_voter_heard(cluster: LocalCluster, leader: str) -> dict[str, int] | None:
    status = cluster.status(leader)
    heard = {v.node_id: v.log_format for v in status.voter_log_formats} if status else {}
    return heard if len(heard) == 3 and all(heard.values()) else None


def test_node_processes_hold_raise_and_halt(make_cluster, monkeypatch) -> None:
    cluster = make_cluster(3)
    cluster.start("n1")
    cluster.start("n2")
    _start_capped(cluster, "n3", monkeypatch)
    leader = cluster.wait_for_leader(timeout_s=60)
    assert wait_for(lambda: _every_voter_heard(cluster, leader), 30, "every voter's advertisement") == {
        "n1": LOG_FORMAT,
        "n2": LOG_FORMAT,
        "n3": 1,
    }
    shown = _status_json(cluster, leader)  # the leader may be n3: a capped leader does not raise it either
    assert (
        shown["cluster_version"] == 1
        and shown["log_format"] == (1 if leader == "n3" else LOG_FORMAT)
        and shown["halted"] == ""
    )
    assert {v["node_id"]: v["log_format"] for v in shown["voter_log_formats"]} == {
        "n1": LOG_FORMAT,
        "n2": LOG_FORMAT,
        "n3": 1,
    }
    wait_for(lambda: _versions(cluster, ["n1", "n2", "n3"]) == {1}, 30, "every node to answer (at version 1)")

    # n3 upgraded: restarted without the cap, the leader raises the version.
    cluster.kill("n3", signal.SIGTERM)
    cluster.start("n3")
    wait_for(
        lambda: _versions(cluster, ["n1", "n2", "n3"]) == {LOG_FORMAT}, 60, "the newest cluster version on every node"
    )
    wait_for(lambda: _applied(cluster, "after-upgrade"), 60, "a job applied after the upgrade")
    cluster.wait_converged(timeout_s=60)

    # n3 downgraded onto that log: it halts on the first entry it cannot decode and exits.
    cluster.kill("n3", signal.SIGTERM)
    _start_capped(cluster, "n3", monkeypatch)
    n3 = cluster.member("n3")
    wait_for(lambda: n3.process.poll() is not None, 60, "the downgraded node to exit")
    assert n3.process.returncode == EXIT_HALTED
    log_text = n3.log_path.read_text(errors="replace")
    halts = [line for line in log_text.splitlines() if "CRITICAL" in line and OLDER in line]
    assert len(halts) == 1 and f"SetClusterVersion needs log format {LOG_FORMAT}" in halts[0], halts

    # The others go on applying and agree.
    cluster.wait_for_leader(timeout_s=60, exclude=("n3",))
    wait_for(lambda: _applied(cluster, "after-halt"), 60, "a job applied after the halt")
    cluster.wait_converged(timeout_s=60)
    wait_for(
        lambda: _versions(cluster, ["n1", "n2"]) == {LOG_FORMAT}, 30, "n1 and n2 to answer (at the newest version)"
    )


def test_a_node_older_than_the_cluster_version_is_not_added(tmp_path: Path, monkeypatch) -> None:
    """Made a voter, it would halt on the first entry of the new format: refuse it before."""
    with LocalCluster(tmp_path / "cluster", nodes=3, port_base=free_port_base(4), overrides=dict(FAST_RAFT)) as cluster:
        cluster.start()
        cluster.wait_for_leader(timeout_s=60)
        wait_for(
            lambda: _versions(cluster, ["n1", "n2", "n3"]) == {LOG_FORMAT},
            60,
            "the newest cluster version on every node",
        )
        monkeypatch.setenv(TEST_CAP_ENV, "1")
        try:
            old = cluster.add_node()
        finally:
            monkeypatch.delenv(TEST_CAP_ENV)
        wait_for(lambda: cluster.status(old.node_id), 30, f"{old.node_id} to answer before it is added")
        with cluster.client() as client:
            with pytest.raises(grpc.RpcError) as refused:
                client.add_member(
                    member={"node_id": old.node_id, "raft_address": old.raft_address, "grpc_address": old.grpc_address},
                    timeout_s=30,
                )
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert (
            f"{old.node_id} reads log format 1 and the cluster runs {LOG_FORMAT}: upgrade {old.node_id}"
            in refused.value.details()
        )
        peers = wait_for(lambda: cluster.status("n1"), 30, "n1 to answer").peers
        assert old.node_id not in {m.node_id for m in peers}


def test_a_halting_leader_stops_raft_and_an_offline_replay_stops_at_the_same_entry(tmp_path: Path, critical) -> None:
    address = f"127.0.0.1:{free_ports(1)[0]}"
    settings = settings_for(
        address, [address], tmp_path / "solo", election_timeout_min_s=0.1, election_timeout_max_s=0.2
    )
    node = RaftLog(settings)
    node.start()
    try:
        wait_until(node.is_leader, "the single node to lead")
        before = submit([node], ReadBarrier(1)).index
        node._consumer.apply_entry(b"\x09written by a newer node")  # past the guard: no node of this version writes it
        wait_until(lambda: node.halted, "the leader to halt")
        assert node.halted.startswith(f"{OLDER} (entry {before + 1}: unknown command format version 9")
        assert not node.is_leader()
        wait_until(lambda: not node._halted_syncobj.tick_thread_alive(), "its Raft to stop")
        with pytest.raises(NodeHalted):
            node.propose(ReadBarrier(1))
        assert _digest_at(node)[0] == before
    finally:
        node.close()
    assert state_at(tmp_path / "solo", before).applied_index == before
    with pytest.raises(UndecodableEntry, match=rf"{OLDER} \(entry {before + 1}"):
        state_at(tmp_path / "solo", before + 1)
