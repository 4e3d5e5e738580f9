"""Channels from this node to its peers, for calls forwarded to the leader on a caller's behalf
(a Lease, a linearizable read, a membership change). One place decides TLS towards peers."""

from __future__ import annotations

import threading

import grpc


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
