"""Probes of what a node starts with (findings 5 and 11): loopback is shared by every user of
the machine, so a node serves with a cluster secret and tokens there too unless told
`insecure: true`; a secret is at least 32 characters; and the Raft key is the cluster's own, so
a message under the key of another deployment that shares the secret runs nothing."""

from __future__ import annotations

import hashlib
import hmac
import stat
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import grpc
import pysyncobj.pickle
import pytest
import yaml
from pysyncobj.encryptor import getEncryptor

from scheduler.local import wait_until
from tests.integration.conftest import free_ports
from tests.integration.test_security import rce_frame, send_to_raft_port
from tests.security.conftest import FAST_RAFT
from worker import ClusterClient

pytestmark = [pytest.mark.integration, pytest.mark.security]

SECRET = "a-shared-secret-of-the-staging-and-prod-clusters"


def serve_one_node(directory: Path, **settings) -> tuple[subprocess.Popen, Path, dict]:
    """`raftcron serve` for a one-node loopback cluster with `settings`; its log and config."""
    directory.mkdir(parents=True)
    raft_port, grpc_port = free_ports(2)
    config = {
        "node_id": "n1",
        "data_dir": str(directory / "data"),
        "peers": [{"id": "n1", "raft": f"127.0.0.1:{raft_port}", "grpc": f"127.0.0.1:{grpc_port}"}],
        **FAST_RAFT,
        **settings,
    }
    config_path = directory / "node.yaml"
    config_path.write_text(yaml.safe_dump(config))
    log_path = directory / "node.log"
    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "serve", "--config", str(config_path)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process, log_path, config["peers"][0]


def refused_to_start(process: subprocess.Popen) -> int:
    try:
        return process.wait(timeout=60)
    finally:
        process.kill()


def wait_ready(address: str) -> None:
    def ready() -> bool:
        try:
            with ClusterClient([address], timeout_s=5) as client:
                return client.status().ready
        except grpc.RpcError:
            return False

    wait_until(ready, 60, f"the node at {address} to lead")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def secret_file(directory: Path, secret: str) -> str:
    path = directory / "cluster.secret"
    path.write_text(secret)
    path.chmod(0o600)
    return str(path)


def test_a_loopback_node_without_tokens_refuses_to_start_unless_insecure(tmp_path):
    process, log_path, _ = serve_one_node(tmp_path / "strict")
    assert refused_to_start(process) == 2
    assert "refusing to serve gRPC without bearer tokens" in log_path.read_text()

    process, log_path, peer = serve_one_node(tmp_path / "lax", insecure=True)
    try:
        wait_ready(peer["grpc"])
        log = log_path.read_text()
        assert "WARNING" in log and "insecure: gRPC without tokens; anyone on this machine can call every RPC" in log
        # It generated its own cluster secret, private, and its Raft port refuses the crafted pickle.
        generated = tmp_path / "lax" / "data" / "cluster.secret"
        assert stat.S_IMODE(generated.stat().st_mode) == 0o600 and len(generated.read_text().strip()) >= 32
        assert f"cluster secret: {generated}" in log
        marker = tmp_path / "pwned"
        assert send_to_raft_port(peer["raft"], rce_frame(marker)) == b""
        assert not marker.exists()
    finally:
        stop(process)


def test_a_cluster_secret_shorter_than_32_characters_is_refused(tmp_path):
    tmp_path.joinpath("secret").mkdir()
    short = secret_file(tmp_path / "secret", "0123456789abcdef")  # accepted up to now: 16 characters
    process, log_path, _ = serve_one_node(tmp_path / "node", insecure=True, cluster_secret_file=short)
    assert refused_to_start(process) == 2
    assert "the cluster secret must be at least 32 characters (this one has 16)" in log_path.read_text()


def encrypted_rce_frame(marker: Path, password: str) -> bytes:
    """rce_frame under a Fernet key made from `password` as pysyncobj makes it."""

    class Exploit:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    token = getEncryptor(password).encrypt(zlib.compress(pysyncobj.pickle.dumps(Exploit()), 3))
    return struct.pack("i", len(token)) + token


def test_a_message_under_the_key_of_another_cluster_sharing_the_secret_runs_nothing(tmp_path):
    """Until now every deployment's key was PBKDF2(secret) with pysyncobj's fixed salt: whoever
    held the secret of one (a staging cluster, say) held the key of every other using it."""
    tmp_path.joinpath("secret").mkdir()
    shared = secret_file(tmp_path / "secret", SECRET)
    process, _, peer = serve_one_node(tmp_path / "prod", insecure=True, cluster_secret_file=shared, cluster_name="prod")
    try:
        wait_ready(peer["grpc"])
        staging = hmac.new(SECRET.encode(), b"raftcron raft key v1|staging", hashlib.sha256).hexdigest()
        keys = {"the secret as the key": SECRET, "staging's key": staging}
        for i, (name, password) in enumerate(keys.items()):
            marker = tmp_path / f"pwned-{i}"
            assert send_to_raft_port(peer["raft"], encrypted_rce_frame(marker, password)) == b"", name
            assert not marker.exists(), f"a pickle under {name} ran on the prod node"
        with ClusterClient([peer["grpc"]], timeout_s=5) as client:
            assert client.status().ready
    finally:
        stop(process)
