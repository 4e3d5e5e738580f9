"""The cluster: `raftcron status` as one node sees it, and membership (`cluster add`, `cluster remove`)."""

from __future__ import annotations

import argparse
import sys

import grpc

from scheduler.cli import connection
from scheduler.cli import output as out


def cmd_status(args) -> int:
    with connection.cluster_client(args) as client:
        response = client.status(address=args.node)
    out.print_status(response, args.json)
    return 0


def cmd_cluster_add(args) -> int:
    from worker.api.v1 import cluster_pb2

    peer = args.member
    member = cluster_pb2.Member(node_id=peer.node_id, raft_address=peer.raft_address, grpc_address=peer.grpc_address)
    with connection.cluster_client(args) as client:
        response = client.add_member(member=member, author=args.author, timeout_s=max(args.timeout, 30.0))
        print(f"{peer.node_id} {'is now' if response.changed else 'was already'} a member (entry {response.index})")
        if args.wait > 0:
            _wait_caught_up(client, peer, response.index, args.wait)
    _print_members(response)
    return 0


def _wait_caught_up(client, peer, index: int, wait_s: float) -> None:
    """Until the new member has applied the entry that added it: then it holds the full state."""
    import time

    deadline = time.monotonic() + wait_s
    applied = 0
    while time.monotonic() < deadline:
        try:
            applied = client.status(address=peer.grpc_address).applied_index
        except grpc.RpcError:
            applied = 0
        if applied >= index:
            print(f"{peer.node_id} has caught up (applied {applied})")
            return
        time.sleep(0.2)
    print(
        f"{peer.node_id} has not caught up within {wait_s:g}s (applied {applied} of {index}); "
        f"watch `raftcron status --node {peer.grpc_address}`",
        file=sys.stderr,
    )


def member_argument(text: str):
    """`ID=RAFT_HOST:PORT/GRPC_HOST:PORT` as a Peer; argparse reports a malformed one."""
    from scheduler.config import ConfigError, Peer

    try:
        return Peer.parse(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_cluster_remove(args) -> int:
    with connection.cluster_client(args) as client:
        response = client.remove_member(node_id=args.node_id, author=args.author, timeout_s=max(args.timeout, 30.0))
    print(f"{args.node_id} {'removed' if response.changed else 'was already removed'} (entry {response.index})")
    _print_members(response)
    return 0


def _print_members(response) -> None:
    for member in response.members:
        print(f"  {member.node_id}  raft {member.raft_address}  grpc {member.grpc_address}")
