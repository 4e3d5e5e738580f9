"""Calls forwarded to the leader on a caller's behalf (a Lease, a linearizable read, a membership
change), and the channels to peers they travel on. One place finds the leader, decides TLS
towards peers and bounds a forwarded call by the caller's deadline."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor

from scheduler.config import NodeConfig
from scheduler.membership import peer_by_raft_address
from scheduler.replication import RaftLog
from scheduler.security.interceptor import caller_authorization

# How often a call waiting for a leader to be known looks again.
LEADER_POLL_S = 0.05


def open_channel(address: str, credentials: grpc.ChannelCredentials | None) -> grpc.Channel:
    """A channel to a peer: TLS with `credentials` (the node's CA, and its own certificate for
    mutual TLS), plaintext on an insecure cluster."""
    return grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)


class PeerChannels:
    """One long-lived channel per peer address: a forwarded call must not pay a TLS handshake."""

    def __init__(self, credentials: grpc.ChannelCredentials | None) -> None:
        self._credentials = credentials
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()

    def to(self, address: str) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = open_channel(address, self._credentials)
            return channel

    def close(self) -> None:
        with self._lock:
            channels, self._channels = self._channels, {}
        for channel in channels.values():
            channel.close()


def leader_grpc_address(raftlog: RaftLog, config: NodeConfig) -> str:
    """The gRPC address of the leader this node knows of; "" when none is known or it is this node.
    The replicated member table is read too: it knows members that joined after configuration."""
    raft_address = raftlog.leader_address()
    with raftlog.read() as state:
        leader = peer_by_raft_address(config, state, raft_address)
    return leader.grpc_address if leader is not None and leader.node_id != config.node_id else ""


def forward_timeout_s(
    context: grpc.ServicerContext, default_s: float, cap_s: float = math.inf, floor_s: float = 0.01
) -> float:
    """How long a forwarded call may take: the caller's time left (`default_s` when it set no
    deadline), at most `cap_s`, at least `floor_s`."""
    remaining_s = context.time_remaining()
    return max(floor_s, min(cap_s, default_s if remaining_s is None else remaining_s))


class LeaderForwarder:
    """This node's calls on the leader for its callers: the leader authorizes the caller's own
    token again, and its answer (or its status) goes back to the caller as is."""

    def __init__(self, leader_address: Callable[[], str], credentials: grpc.ChannelCredentials | None) -> None:
        self._leader_address = leader_address
        self._credentials = credentials
        self._peers = PeerChannels(credentials)

    def known_leader(self) -> str:
        """The leader's gRPC address now; "" when none is known or it is this node."""
        return self._leader_address()

    def leader(
        self, context: grpc.ServicerContext, wait_s: float = 0.0, unknown: str = "no leader known; retry shortly"
    ) -> str:
        """The leader's gRPC address, waiting up to `wait_s` for one to be known (an election, a
        hand-over); the caller's call ends UNAVAILABLE with `unknown` if none is."""
        deadline = time.monotonic() + wait_s
        address = self._leader_address()
        while not address and time.monotonic() < deadline:
            time.sleep(LEADER_POLL_S)
            address = self._leader_address()
        if not address:
            context.abort(grpc.StatusCode.UNAVAILABLE, unknown)
        return address

    def call(
        self,
        context: grpc.ServicerContext,
        address: str,
        method: MethodDescriptor,
        request,
        timeout_s: float,
        metadata: tuple[tuple[str, str], ...] = (),
        via: str = "via leader",
    ):
        """`method` of the node at `address` with `request`, on the caller's token; an RpcError
        ends the caller's call with the same status, its details prefixed `{via} {address}: `."""
        call = self._peers.to(address).unary_unary(
            f"/{method.containing_service.full_name}/{method.name}",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=message_factory.GetMessageClass(method.output_type).FromString,
        )
        try:
            return call(request, timeout=timeout_s, metadata=(*caller_authorization(context), *metadata))
        except grpc.RpcError as exc:
            context.abort(exc.code(), f"{via} {address}: {exc.details()}")

    def channel_to_newcomer(self, address: str) -> grpc.Channel:
        """A channel of its own (the caller closes it) to a node that is not a member yet."""
        return open_channel(address, self._credentials)

    def close(self) -> None:
        self._peers.close()
