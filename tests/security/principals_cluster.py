"""A secured cluster (TLS, bearer tokens) with the principals a probe names; each principal's
token is in `credentials/<name>.token`, so `cluster.client(role=NAME)` speaks as it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import yaml

from scheduler.local import LocalCluster
from scheduler.security.devcerts import ensure_dev_credentials
from scheduler.security.principals import Principal, principals_document
from tests.integration.conftest import FAST_RAFT, free_port_base

ROOT = Path(__file__).resolve().parents[2]


def secured_cluster(
    directory: Path, principals: list[Principal], nodes: int = 1, metrics: bool = False
) -> LocalCluster:
    credentials = ensure_dev_credentials(directory / "credentials")
    tokens = [(principal, f"token-of-{principal.name}-{os.urandom(8).hex()}") for principal in principals]
    (credentials.directory / "principals.yaml").write_text(yaml.safe_dump(principals_document(tokens)))
    for principal, token in tokens:
        Path(credentials.token_file(principal.name)).write_text(token)
    return LocalCluster(
        directory,
        nodes=nodes,
        port_base=free_port_base(nodes),
        credentials=credentials,
        metrics=metrics,
        overrides=dict(FAST_RAFT),
    )


def start_worker(
    cluster: LocalCluster, principal: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """`raftcron worker ARGS` with `principal`'s token, as an operator would start it."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **cluster.credentials.client_env(principal), **(env or {})}
    log = open(cluster.data_dir / f"worker-{principal}.log", "ab")
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scheduler.cli",
                "worker",
                "--cluster",
                cluster.cluster_arg,
                "--lease-wait",
                "1",
                *args,
            ],
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()


def assert_responsive(cluster: LocalCluster, leader: str) -> None:
    """The node answers within its deadline, and nobody else leads."""
    with cluster.client(timeout_s=10) as root:
        assert root.status().ready
    assert cluster.wait_for_leader(10) == leader


def refused(call, code=grpc.StatusCode.PERMISSION_DENIED) -> str:
    """The details of the error `call` raises, which must carry `code`."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    assert caught.value.code() == code, caught.value.details()
    return caught.value.details()
