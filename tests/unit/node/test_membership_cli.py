"""Membership outside the core: `raftcron cluster add|remove` arguments, the --join rule of the
node configuration, address resolution from the member table, and the change policies."""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from pathlib import Path

import pytest

from scheduler.cli.parser import build_parser
from scheduler.config import ConfigError, NodeConfig, Peer, add_node_flags, load_node_config
from scheduler.core import State, apply
from scheduler.core.commands import Member
from scheduler.membership import (
    ChangeInFlight,
    MembershipChanger,
    Refusal,
    add_refusal,
    majority,
    members_view,
    peer_by_raft_address,
    remove_refusal,
)

P = [Peer(f"n{i}", f"127.0.0.1:{7100 + i}", f"127.0.0.1:{7200 + i}") for i in range(1, 7)]
N1, N2, N3, N4, N5, N6 = P


def voters(*peers: Peer) -> frozenset[str]:
    return frozenset(p.raft_address for p in peers)


# -- the CLI ------------------------------------------------------------------------------


def test_cluster_add_parses_the_member() -> None:
    args = build_parser().parse_args(["cluster", "add", "n4=10.0.0.4:7100/10.0.0.4:7200", "--wait", "0"])
    assert args.member == Peer("n4", "10.0.0.4:7100", "10.0.0.4:7200")
    assert args.wait == 0 and args.func.__name__ == "cmd_cluster_add"


@pytest.mark.parametrize(
    "text", ["n4", "n4=10.0.0.4:7100", "=10.0.0.4:7100/10.0.0.4:7200", "n4=10.0.0.4/10.0.0.4:7200", "n4=a:1/b:x"]
)
def test_cluster_add_refuses_a_malformed_member(text: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["cluster", "add", text])
    assert exited.value.code == 2
    assert "ID=RAFT_HOST:PORT/GRPC_HOST:PORT" in capsys.readouterr().err


def test_cluster_remove_takes_an_id_and_needs_an_action(capsys) -> None:
    args = build_parser().parse_args(["cluster", "remove", "n3"])
    assert args.node_id == "n3" and args.func.__name__ == "cmd_cluster_remove"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["cluster"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["cluster", "remove"])


# -- the --join rule ----------------------------------------------------------------------


def test_an_even_first_configuration_is_refused_but_a_joining_node_may_have_one() -> None:
    with pytest.raises(ConfigError, match="odd number.*--join"):
        NodeConfig(node_id="n4", peers=(N1, N2, N3, N4), data_dir=Path("/tmp/x"))
    joining = NodeConfig(node_id="n4", peers=(N1, N2, N3, N4), data_dir=Path("/tmp/x"), join=True)
    assert joining.raft_settings().partner_addresses == (N1.raft_address, N2.raft_address, N3.raft_address)
    # Joining does not lift the other rules: this node must be among its peers.
    with pytest.raises(ConfigError, match="not among the peers"):
        NodeConfig(node_id="n5", peers=(N1, N2, N3, N4), data_dir=Path("/tmp/x"), join=True)


def _load(argv: list[str], environ: dict[str, str] | None = None) -> NodeConfig:
    parser = argparse.ArgumentParser()
    add_node_flags(parser)
    return load_node_config(parser.parse_args(argv), environ or {})


def test_join_comes_from_the_flag_the_environment_or_the_file(tmp_path) -> None:
    base = ["--node-id", "n4", "--data-dir", str(tmp_path)]
    peers = [f"--peer={p.node_id}={p.raft_address}/{p.grpc_address}" for p in (N1, N2, N3, N4)]
    assert _load([*base, *peers, "--join"]).join
    assert _load([*base, *peers], {"RAFTCRON_JOIN": "true"}).join
    config_file = tmp_path / "node.yaml"
    config_file.write_text("join: true\n")
    assert _load([*base, *peers, "--config", str(config_file)]).join
    with pytest.raises(ConfigError, match="odd number"):
        _load([*base, *peers])
    with pytest.raises(ConfigError, match="join must be true or false"):
        _load([*base, *peers], {"RAFTCRON_JOIN": "maybe"})


# -- address resolution -------------------------------------------------------------------


def test_members_come_from_configuration_until_the_table_is_seeded() -> None:
    config = NodeConfig(node_id="n1", peers=(N1, N2, N3), data_dir=Path("/tmp/x"))
    state = State()
    assert members_view(config, state) == (N1, N2, N3)
    assert peer_by_raft_address(config, state, N2.raft_address) == N2
    assert peer_by_raft_address(config, state, N4.raft_address) is None
    state.members = {p.node_id: Member(p.node_id, p.raft_address, p.grpc_address) for p in (N1, N3, N4)}
    assert members_view(config, state) == (N1, N3, N4)
    # A member that joined later is known by its Raft address (a leader's gRPC address for forwarding).
    assert peer_by_raft_address(config, state, N4.raft_address) == N4


# -- the change policies ------------------------------------------------------------------


def test_majority() -> None:
    assert [majority(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]


def test_grow_while_every_voter_is_up() -> None:
    assert add_refusal((N1, N2, N3), voters(N1, N2, N3), voters(N1, N2, N3), N4) is None
    assert add_refusal((N1, N2, N3, N4), voters(N1, N2, N3, N4), voters(N1, N2, N3), N5) is None


def test_add_next_to_a_dead_member_is_refused_until_it_is_removed() -> None:
    refusal = add_refusal((N1, N2, N3), voters(N1, N2, N3), voters(N1, N2), N6)
    assert refusal.code == "no_majority"
    assert "down: 127.0.0.1:7103" in refusal.message and "Remove the dead members first" in refusal.message
    # After removing n3, two of two voters are up: a majority of three.
    assert add_refusal((N1, N2), voters(N1, N2), voters(N1, N2), N6) is None


def test_add_conflicts_with_existing_members() -> None:
    moved = Peer("n2", "127.0.0.1:9100", "127.0.0.1:9200")
    assert add_refusal((N1, N2, N3), voters(N1, N2, N3), voters(N1, N2, N3), moved).code == "member_exists"
    stolen = Peer("n4", N2.raft_address, "127.0.0.1:9200")
    assert add_refusal((N1, N2, N3), voters(N1, N2, N3), voters(N1, N2, N3), stolen).code == "member_exists"


def test_add_repeated_after_the_raft_step_only_records_it() -> None:
    # An earlier add committed pysyncobj's entry, then failed: n4 is a voter but not in the table.
    assert add_refusal((N1, N2, N3), voters(N1, N2, N3, N4), voters(N1, N2), N4) is None
    assert add_refusal((N1, N2, N3, N4), voters(N1, N2, N3, N4), voters(N1, N2, N3, N4), N4) is None


def test_remove_keeps_a_live_majority() -> None:
    five = voters(N1, N2, N3, N4, N5)
    assert remove_refusal(five, voters(N1, N2, N3, N4), N5) is None  # the dead one goes
    assert remove_refusal(voters(N1, N2, N3), voters(N1, N2), N3) is None
    # Two of five down: removing a live one would leave 2 of 4 up, short of 3.
    refusal = remove_refusal(five, voters(N1, N2, N3), N3)
    assert refusal.code == "no_majority" and "without n3" in refusal.message
    assert remove_refusal(voters(N1), voters(N1), N1).code == "invalid"
    # Already out of pysyncobj's voters: only the table is left to update.
    assert remove_refusal(voters(N1, N2), voters(N1), N3) is None


# -- one change, step by step ---------------------------------------------------------------


class FakeRaftLog:
    """The RaftLog calls MembershipChanger makes, recorded; voters and links set by the test."""

    def __init__(self, voters_: frozenset[str], connected: frozenset[str]) -> None:
        self.state = State()
        self.voters, self.connected = set(voters_), connected
        self.steps: list[str] = []
        self.block = None  # set to a threading.Event to hold a change inside pysyncobj's step

    def read(self):
        return contextlib.nullcontext(self.state)

    def raft_members(self) -> frozenset[str]:
        return frozenset(self.voters)

    def connected_members(self) -> frozenset[str]:
        return self.connected

    def change_membership(self, add: bool, raft_address: str, timeout_s: float) -> None:
        self.steps.append(f"raft {'add' if add else 'remove'} {raft_address}")
        if self.block is not None:
            self.block.wait(5)
        (self.voters.add if add else self.voters.discard)(raft_address)

    def submit(self, command, timeout_s: float):
        self.steps.append(type(command).__name__)
        return apply(self.state, command, self.state.applied_index + 1)


def changer_for(raftlog: FakeRaftLog) -> MembershipChanger:
    config = NodeConfig(node_id="n1", peers=(N1, N2, N3), data_dir=Path("/tmp/x"))
    return MembershipChanger(raftlog, config, clock_us=lambda: 1_000, timeout_s=1.0)


def test_add_commits_pysyncobjs_entry_then_the_table_seeded_with_the_voters() -> None:
    raftlog = FakeRaftLog(voters(N1, N2, N3), voters(N1, N2, N3))
    result = changer_for(raftlog).add(N4, "alice", "req-1")
    assert result.accepted
    assert raftlog.steps == [f"raft add {N4.raft_address}", "AddMember"]
    assert sorted(raftlog.state.members) == ["n1", "n2", "n3", "n4"]


def test_repeating_an_interrupted_add_only_records_it() -> None:
    raftlog = FakeRaftLog(voters(N1, N2, N3, N4), voters(N1, N2, N3, N4))  # pysyncobj's step was done
    assert changer_for(raftlog).add(N4, "alice", "req-2").accepted
    assert raftlog.steps == ["AddMember"]


def test_remove_of_a_dead_member_then_the_table() -> None:
    raftlog = FakeRaftLog(voters(N1, N2, N3), voters(N1, N2))
    assert changer_for(raftlog).remove(N3, "alice", "req-3").accepted
    assert raftlog.steps == [f"raft remove {N3.raft_address}", "RemoveMember"]
    assert sorted(raftlog.state.members) == ["n1", "n2"] and raftlog.voters == set(voters(N1, N2))


def test_a_refused_change_touches_nothing() -> None:
    raftlog = FakeRaftLog(voters(N1, N2, N3), voters(N1, N2))
    outcome = changer_for(raftlog).add(N6, "alice", "req-4")
    assert isinstance(outcome, Refusal) and outcome.code == "no_majority"
    assert raftlog.steps == [] and raftlog.state.members == {}


def test_a_second_change_while_one_runs_is_refused() -> None:
    raftlog = FakeRaftLog(voters(N1, N2, N3), voters(N1, N2, N3))
    raftlog.block = threading.Event()
    changer = changer_for(raftlog)
    first = threading.Thread(target=changer.add, args=(N4, "alice", "req-5"))
    first.start()
    deadline = time.monotonic() + 5
    while not raftlog.steps and time.monotonic() < deadline:  # the first change is inside pysyncobj's step
        time.sleep(0.01)
    with pytest.raises(ChangeInFlight):
        changer.remove(N3, "alice", "req-6")
    raftlog.block.set()
    first.join(5)
    assert raftlog.steps == [f"raft add {N4.raft_address}", "AddMember"]
    # Once it ended, the next change runs.
    assert changer.remove(N3, "alice", "req-6").accepted
