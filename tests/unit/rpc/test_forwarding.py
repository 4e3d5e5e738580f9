"""Forwarding to the leader: how long a forwarded call may take, and how the leader is found."""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

import grpc
import pytest

from scheduler.config import NodeConfig, Peer
from scheduler.core.commands import Member
from scheduler.core.state import State
from scheduler.rpc import forwarding
from scheduler.rpc.forwarding import LeaderForwarder, forward_timeout_s, leader_grpc_address


class Aborted(Exception):
    pass


class Context:
    def __init__(self, remaining_s: float | None = None) -> None:
        self.remaining_s = remaining_s
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def time_remaining(self) -> float | None:
        return self.remaining_s

    def abort(self, code: grpc.StatusCode, details: str):
        self.aborted = (code, details)
        raise Aborted(details)


@pytest.mark.parametrize(
    "remaining_s, default_s, cap_s, floor_s, expected",
    [
        (None, 10.0, 10.0, 0.01, 10.0),  # a linearizable read without a deadline: twice the propose timeout
        (3.0, 10.0, 10.0, 0.01, 3.0),  # ... within the caller's deadline
        (60.0, 10.0, 10.0, 0.01, 10.0),  # ... and never longer than twice the propose timeout
        (0.0, 10.0, 10.0, 0.01, 0.01),  # a caller out of time still gets a call that can fail
        (None, 30.0, math.inf, 1.0, 30.0),  # a membership change without a deadline
        (120.0, 30.0, math.inf, 1.0, 120.0),  # ... the caller may allow more
        (0.2, 30.0, math.inf, 1.0, 1.0),
    ],
)
def test_a_forwarded_call_keeps_within_the_callers_deadline(remaining_s, default_s, cap_s, floor_s, expected):
    assert forward_timeout_s(Context(remaining_s), default_s, cap_s=cap_s, floor_s=floor_s) == expected


def _config() -> NodeConfig:
    peers = tuple(Peer(f"n{i}", f"127.0.0.1:{7100 + i}", f"127.0.0.1:{7200 + i}") for i in (1, 2, 3))
    return NodeConfig(node_id="n1", peers=peers, data_dir=Path("/nonexistent"))


class Log:
    def __init__(self, leader: str, state: State | None = None) -> None:
        self.leader, self.state = leader, state or State()

    def leader_address(self) -> str:
        return self.leader

    @contextlib.contextmanager
    def read(self):
        yield self.state


def test_the_leader_is_another_node_known_by_configuration_or_the_member_table():
    config = _config()
    assert leader_grpc_address(Log("127.0.0.1:7102"), config) == "127.0.0.1:7202"
    assert leader_grpc_address(Log("127.0.0.1:7101"), config) == ""  # this node leads: nothing to forward
    assert leader_grpc_address(Log(""), config) == ""
    joined = State()
    joined.members["n4"] = Member("n4", "127.0.0.1:7104", "127.0.0.1:7204")
    assert leader_grpc_address(Log("127.0.0.1:7104", joined), config) == "127.0.0.1:7204"


def test_a_call_waits_for_a_leader_to_be_known_then_gives_up_unavailable(monkeypatch):
    monkeypatch.setattr(forwarding, "LEADER_POLL_S", 0.001)
    answers = iter(["", "", "127.0.0.1:7202"])
    forwarder = LeaderForwarder(lambda: next(answers), None)
    assert forwarder.leader(Context(), wait_s=5.0) == "127.0.0.1:7202"

    context, started = Context(), time.monotonic()
    with pytest.raises(Aborted):
        LeaderForwarder(lambda: "", None).leader(context, wait_s=0.05, unknown="no leader known; retry shortly")
    assert time.monotonic() - started >= 0.05
    assert context.aborted == (grpc.StatusCode.UNAVAILABLE, "no leader known; retry shortly")
    with pytest.raises(Aborted):  # without a wait, the first look decides
        LeaderForwarder(lambda: "", None).leader(Context())
