"""gRPC TLS credentials from PEM files: the server's (optionally requiring client certificates)
and the channel a node opens to another node (forwarding a Lease to the leader)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc


class TlsError(ValueError):
    """A certificate or key file that cannot be used."""


def _read(path: str | Path, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TlsError(f"cannot read the {what} {str(path)!r}: {exc.strerror}") from None
    if b"-----BEGIN" not in data:
        raise TlsError(f"the {what} {str(path)!r} is not PEM")
    return data


@dataclass(frozen=True)
class TlsFiles:
    """A node's TLS material. `ca_file` verifies other nodes (and clients, with client_auth)."""

    cert_file: str
    key_file: str
    ca_file: str = ""
    require_client_cert: bool = False

    def server_credentials(self) -> grpc.ServerCredentials:
        pair = (_read(self.key_file, "TLS key"), _read(self.cert_file, "TLS certificate"))
        roots = _read(self.ca_file, "CA certificate") if self.ca_file else None
        return grpc.ssl_server_credentials(
            [pair], root_certificates=roots, require_client_auth=self.require_client_cert
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """For node-to-node calls: trusts `ca_file`, presents this node's certificate."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file, "CA certificate") if self.ca_file else None,
            private_key=_read(self.key_file, "TLS key"),
            certificate_chain=_read(self.cert_file, "TLS certificate"),
        )
