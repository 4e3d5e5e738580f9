"""`raftcron dev`: a local cluster of real node processes on loopback, stopped together."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import yaml

LEADER_WAIT_S = 60.0


def _write_node_configs(data_dir: Path, nodes: int, port_base: int) -> list[tuple[str, Path, str]]:
    data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(data_dir, 0o700)
    secret_file = data_dir / "cluster.secret"
    if not secret_file.exists():
        # Loopback is shared by every user of the machine: authenticate Raft even here.
        secret_file.touch(mode=0o600)
        secret_file.write_text(secrets.token_hex(24))
    peers = [
        {"id": f"n{i}", "raft": f"127.0.0.1:{port_base + i}", "grpc": f"127.0.0.1:{port_base + 100 + i}"}
        for i in range(1, nodes + 1)
    ]
    members = []
    for peer in peers:
        node_dir = data_dir / peer["id"]
        node_dir.mkdir(exist_ok=True)
        config = {
            "node_id": peer["id"],
            "data_dir": str(node_dir),
            "peers": peers,
            "cluster_secret_file": str(secret_file),
        }
        config_path = node_dir / "node.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        members.append((peer["id"], config_path, peer["grpc"]))
    return members


def _wait_for_leader(addresses: list[str], processes: list[subprocess.Popen]) -> str:
    from worker.client import ClusterClient

    deadline = time.monotonic() + LEADER_WAIT_S
    with ClusterClient(addresses, timeout_s=1.0) as client:
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in processes):
                raise RuntimeError("a node exited during start-up; see its node.log")
            for address in addresses:
                try:
                    status = client.status(address=address)
                except grpc.RpcError:
                    continue
                if status.ready:
                    return status.leader
            time.sleep(0.2)
    raise RuntimeError(f"no leader after {LEADER_WAIT_S:.0f}s")


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_dev_cluster(args) -> int:
    data_dir = Path(args.data_dir)
    if args.fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    if not 1 <= args.nodes <= 7 or args.nodes % 2 == 0:
        print("raftcron dev: --nodes must be odd, from 1 to 7", file=sys.stderr)
        return 2
    members = _write_node_configs(data_dir, args.nodes, args.port_base)
    processes: list[subprocess.Popen] = []
    stopping = False

    def on_signal(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for node_id, config_path, _ in members:
            log_file = open(config_path.parent / "node.log", "ab")
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "scheduler.cli", "serve", "--config", str(config_path)],
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            print(f"started node {node_id} (pid {processes[-1].pid}), log {config_path.parent / 'node.log'}")
        addresses = [grpc_address for _, _, grpc_address in members]
        leader = _wait_for_leader(addresses, processes)
        cluster = ",".join(addresses)
        print(f"leader is {leader}")
        print(f"RAFTCRON_CLUSTER={cluster}", flush=True)
        if args.jobs and Path(args.jobs).exists():
            from scheduler import cli

            cli.main(["--cluster", cluster, "apply", "-f", args.jobs])
        if not args.no_worker:
            print("demo worker: not part of this release yet (run without one: --no-worker)")
        print("cluster running; Ctrl-C stops every process it started", flush=True)
        while not stopping:
            for (node_id, _, _), process in zip(members, processes):
                if process.poll() is not None and process.returncode is not None and not stopping:
                    print(f"warning: node {node_id} exited with {process.returncode}", file=sys.stderr)
                    process.returncode = None  # report once
            time.sleep(0.5)
        return 0
    except RuntimeError as exc:
        print(f"raftcron dev: {exc}", file=sys.stderr)
        return 1
    finally:
        _stop(processes)
        print("stopped")
