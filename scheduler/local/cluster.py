"""A cluster of real node processes on this machine, for `raftcron dev`, tests and benchmarks."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import yaml

from scheduler.security.devcerts import DevCredentials
from worker import ClusterClient, Credentials


@dataclass
class Member:
    node_id: str
    raft_address: str
    grpc_address: str
    config_path: Path
    process: subprocess.Popen | None = None
    metrics_address: str = ""
    # Removed from the cluster (`raftcron cluster remove`): no longer listed or asked.
    removed: bool = False

    @property
    def metrics_url(self) -> str:
        return f"http://{self.metrics_address}/metrics" if self.metrics_address else ""

    @property
    def log_path(self) -> Path:
        return self.config_path.parent / "node.log"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def rss_kib(pid: int) -> int | None:
    """Resident memory of a process (VmRSS, KiB), or None if it is gone or unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def wait_until(condition: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.05):
    """Poll `condition` until it returns something truthy; TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


@dataclass
class LocalCluster:
    data_dir: Path
    nodes: int = 3
    port_base: int = 7100
    host: str = "127.0.0.1"
    # One address per node (e.g. 127.0.0.2, 127.0.0.3... inside a private network namespace,
    # so faults can cut one node's links); default: every node on `host`.
    hosts: list[str] | None = None
    # Prefix for every node command, e.g. ["nsenter", "--net=/run/netns/x"] or ["faketime", ...].
    command_prefix: list[str] = field(default_factory=list)
    # Extra keys merged into every node's YAML config (e.g. {"raft": {...}, "claim_batch_size": 1}).
    overrides: dict = field(default_factory=dict)
    # Serve Prometheus metrics, node i on port port_base + 200 + i.
    metrics: bool = False
    # TLS and bearer tokens on gRPC (`raftcron dev`); None: plaintext without tokens, which a
    # node refuses unless told `insecure: true`, which the configs then say (tests, benchmarks).
    # The client() calls as the admin.
    credentials: DevCredentials | None = None
    members: list[Member] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.data_dir, 0o700)
        secret_file = self.data_dir / "cluster.secret"
        if not secret_file.exists():
            # Loopback is shared by every user of the machine: authenticate Raft even here.
            secret_file.touch(mode=0o600)
            secret_file.write_text(secrets.token_hex(24))
        hosts = self.hosts or [self.host] * self.nodes
        peers = [
            {
                "id": f"n{i}",
                "raft": f"{hosts[i - 1]}:{self.port_base + i}",
                "grpc": f"{hosts[i - 1]}:{self.port_base + 100 + i}",
            }
            for i in range(1, self.nodes + 1)
        ]
        for i, peer in enumerate(peers, start=1):
            metrics_address = f"{hosts[i - 1]}:{self.port_base + 200 + i}" if self.metrics else ""
            node_dir = self.data_dir / peer["id"]
            node_dir.mkdir(exist_ok=True)
            config = {
                "node_id": peer["id"],
                "data_dir": str(node_dir),
                "peers": peers,
                "cluster_secret_file": str(secret_file),
                **({"metrics": metrics_address} if metrics_address else {}),
                **(self.credentials.node_config() if self.credentials else {"insecure": True}),
                **self.overrides,
            }
            config_path = node_dir / "node.yaml"
            config_path.write_text(yaml.safe_dump(config, sort_keys=False))
            self.members.append(
                Member(peer["id"], peer["raft"], peer["grpc"], config_path, metrics_address=metrics_address)
            )

    def add_node(self, host: str | None = None) -> Member:
        """Configure and start one more node with `join: true`, its peers being the current members
        and itself, numbered like the others (node i on port_base + i); `raftcron cluster add`
        makes it a voter. Its config is a copy of the first member's with its own id, data
        directory, addresses and peers."""
        i = len(self.members) + 1
        host = host or self.host
        raft, grpc_address = f"{host}:{self.port_base + i}", f"{host}:{self.port_base + 100 + i}"
        node_id = f"n{i}"
        config = yaml.safe_load(self.members[0].config_path.read_text())
        node_dir = self.data_dir / node_id
        node_dir.mkdir(exist_ok=True)
        metrics_address = f"{host}:{self.port_base + 200 + i}" if self.metrics else ""
        config.pop("metrics", None)
        config.update(
            node_id=node_id,
            data_dir=str(node_dir),
            peers=[
                *({"id": m.node_id, "raft": m.raft_address, "grpc": m.grpc_address} for m in self.current_members),
                {"id": node_id, "raft": raft, "grpc": grpc_address},
            ],
            join=True,
            **({"metrics": metrics_address} if metrics_address else {}),
        )
        config_path = node_dir / "node.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        member = Member(node_id, raft, grpc_address, config_path, metrics_address=metrics_address)
        self.members.append(member)
        self.start(node_id)
        return member

    def forget(self, node_id: str) -> None:
        """Stop counting a node that `raftcron cluster remove` took out (kill it first if it runs)."""
        self.member(node_id).removed = True

    @property
    def current_members(self) -> list[Member]:
        return [m for m in self.members if not m.removed]

    @property
    def addresses(self) -> list[str]:
        return [m.grpc_address for m in self.current_members]

    @property
    def cluster_arg(self) -> str:
        return ",".join(self.addresses)

    def member(self, node_id: str) -> Member:
        return next(m for m in self.members if m.node_id == node_id)

    def start(self, node_id: str | None = None) -> None:
        for member in self.members if node_id is None else [self.member(node_id)]:
            if member.alive():
                continue
            log_file = open(member.log_path, "ab")
            member.process = subprocess.Popen(
                [
                    *self.command_prefix,
                    sys.executable,
                    "-m",
                    "scheduler.cli",
                    "serve",
                    "--config",
                    str(member.config_path),
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log_file.close()

    def kill(self, node_id: str, signum: int = signal.SIGKILL) -> None:
        member = self.member(node_id)
        if member.alive():
            member.process.send_signal(signum)
            if signum in (signal.SIGKILL, signal.SIGTERM):
                member.process.wait(timeout=15)

    def stop(self) -> None:
        """SIGTERM every node, SIGKILL what has not exited after a grace period."""
        for member in self.members:
            if member.alive():
                member.process.send_signal(signal.SIGCONT)
                member.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for member in self.members:
            if member.process is None:
                continue
            try:
                member.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                member.process.kill()
                member.process.wait()

    def client(self, node_id: str | None = None, timeout_s: float = 5.0, role: str = "admin") -> ClusterClient:
        addresses = [self.member(node_id).grpc_address] if node_id else self.addresses
        return ClusterClient(addresses, timeout_s=timeout_s, credentials=self.client_credentials(role))

    def client_credentials(self, role: str = "admin") -> Credentials | None:
        return Credentials.from_env(self.credentials.client_env(role)) if self.credentials else None

    def status(self, node_id: str, include_digest: bool = False):
        """One node's status, or None when it does not answer."""
        member = self.member(node_id)
        try:
            # A digest encodes the whole state: give a large one time.
            with self.client(node_id, timeout_s=30.0 if include_digest else 2.0) as client:
                return client.status(address=member.grpc_address, include_digest=include_digest)
        except grpc.RpcError:
            return None

    def leader(self, exclude: tuple[str, ...] = ()) -> str | None:
        """The node that is leader, has opened its epoch, and is seen so by itself."""
        for member in self.current_members:
            if member.node_id in exclude or not member.alive():
                continue
            status = self.status(member.node_id)
            if status and status.ready and status.role == "leader" and status.leader == member.node_id:
                return member.node_id
        return None

    def wait_for_leader(self, timeout_s: float = 30.0, exclude: tuple[str, ...] = ()) -> str:
        def check():
            for member in self.current_members:
                if member.process is not None and member.process.poll() is not None and member.node_id not in exclude:
                    if member.process.returncode not in (-signal.SIGKILL, -signal.SIGTERM):
                        raise RuntimeError(f"node {member.node_id} exited; see {member.log_path}")
            return self.leader(exclude)

        return wait_until(check, timeout_s, "a leader with an open epoch", interval_s=0.1)

    def digests(self) -> dict[str, tuple[int, str]]:
        """(applied index, state digest) of every live node."""
        result = {}
        for member in self.current_members:
            if member.alive():
                status = self.status(member.node_id, include_digest=True)
                if status is not None:
                    result[member.node_id] = (status.digest_index, status.state_digest)
        return result

    def wait_converged(self, timeout_s: float = 20.0) -> str:
        """Wait until every live node reports the same applied index and digest; return the digest."""

        def check():
            seen = self.digests()
            values = set(seen.values())
            alive = sum(1 for m in self.current_members if m.alive())
            return next(iter(values))[1] if len(seen) == alive and len(values) == 1 else None

        return wait_until(check, timeout_s, "replicas to converge to one digest", interval_s=0.2)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
