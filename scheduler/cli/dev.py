"""`raftcron dev`: a local cluster of real node processes on loopback, stopped together.

Secured like a real cluster (loopback is shared by every user of the machine): Raft with a random
cluster secret, gRPC with TLS from a private CA and bearer tokens. The CLI and workers find them
through the variables it prints.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from scheduler.core.log_format import LOG_FORMAT
from scheduler.local import LocalCluster, wait_until
from scheduler.security.devcerts import DevCredentials, ensure_dev_credentials, worker_credentials

LEADER_WAIT_S = 60.0
# How long the dev cluster waits for its leader to raise the cluster version (every voter
# advertises its log format within seconds) before it applies the jobs file anyway.
CLUSTER_VERSION_WAIT_S = 20.0


def demo_worker_env(credentials: DevCredentials, data_dir: Path, environ: dict[str, str]) -> dict[str, str]:
    """The demo worker's environment: the caller's without any RAFTCRON_* credential (an admin
    token exported in this shell, the cluster secret), plus the worker token and the CA only."""
    kept = {k: v for k, v in environ.items() if not k.startswith("RAFTCRON_") or k == "RAFTCRON_LOG_LEVEL"}
    return kept | worker_credentials(credentials, Path(data_dir) / "worker-credentials")


def _start_demo_worker(cluster: LocalCluster, credentials: DevCredentials) -> subprocess.Popen:
    log_file = open(cluster.data_dir / "worker.log", "ab")
    env = demo_worker_env(credentials, cluster.data_dir, dict(os.environ))
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "worker", "--cluster", cluster.cluster_arg, "--demo", "--shell"],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    finally:
        log_file.close()


def _wait_for_cluster_version(cluster: LocalCluster, leader: str) -> None:
    """Newer fields of a jobs file (calendars) are accepted once the cluster version allows them."""
    try:
        wait_until(
            lambda: (s := cluster.status(leader)) is not None and s.cluster_version >= LOG_FORMAT,
            CLUSTER_VERSION_WAIT_S,
            f"the cluster version to reach {LOG_FORMAT}",
        )
    except TimeoutError as exc:
        print(f"warning: {exc}; applying the jobs file anyway", file=sys.stderr)


def run_dev_cluster(args, run_cli: Callable[[list[str]], int]) -> int:
    """Run the cluster until SIGINT or SIGTERM; `run_cli` is the `raftcron` command's main, which
    applies the jobs file as `raftcron apply` would."""
    data_dir = Path(args.data_dir)
    if not 1 <= args.nodes <= 7 or args.nodes % 2 == 0:
        print("raftcron dev: --nodes must be odd, from 1 to 7", file=sys.stderr)
        return 2
    if args.fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    stopping = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    credentials = ensure_dev_credentials(data_dir.resolve() / "credentials")
    cluster = LocalCluster(data_dir, nodes=args.nodes, port_base=args.port_base, metrics=True, credentials=credentials)
    worker: subprocess.Popen | None = None
    try:
        cluster.start()
        for member in cluster.members:
            print(
                f"started node {member.node_id} (pid {member.process.pid}), log {member.log_path}, "
                f"metrics {member.metrics_url}"
            )
        leader = cluster.wait_for_leader(LEADER_WAIT_S)
        print(f"leader is {leader}")
        print(
            f"dashboard {' '.join(f'http://{m.metrics_address}/' for m in cluster.members)} (sign in with any user name "
            "and the admin token as password)"
        )
        admin = credentials.client_env("admin")
        print(
            "talk to it from another shell after exporting (admin token; submitter.token and worker.token "
            f"are in {credentials.directory}):"
        )
        print(f"RAFTCRON_CLUSTER={cluster.cluster_arg}")
        print(f"RAFTCRON_CA={admin['RAFTCRON_CA']}")
        print(f"RAFTCRON_TOKEN_FILE={admin['RAFTCRON_TOKEN_FILE']}", flush=True)
        if args.jobs and Path(args.jobs).exists():
            _wait_for_cluster_version(cluster, leader)
            credential_flags = ["--ca", admin["RAFTCRON_CA"], "--token-file", admin["RAFTCRON_TOKEN_FILE"]]
            run_cli(["--cluster", cluster.cluster_arg, *credential_flags, "apply", "-f", args.jobs])
        if not args.no_worker:
            worker = _start_demo_worker(cluster, credentials)
            print(
                f"started demo worker (pid {worker.pid}, handlers demo.*, reports.build, payroll.run and shell), "
                f"log {data_dir / 'worker.log'}"
            )
        print("cluster running; Ctrl-C stops every process it started", flush=True)
        reported: set[str] = set()
        while not stopping.wait(0.5):
            for member in cluster.members:
                if not member.alive() and member.node_id not in reported:
                    reported.add(member.node_id)
                    print(f"warning: node {member.node_id} exited; see {member.log_path}", file=sys.stderr)
        return 0
    except (RuntimeError, TimeoutError) as exc:
        print(f"raftcron dev: {exc}", file=sys.stderr)
        return 1
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)  # drains first: in-flight runs finish or are handed back
            try:
                worker.wait(timeout=35)
            except subprocess.TimeoutExpired:
                worker.kill()
        cluster.stop()
        print("stopped", flush=True)
