"""`raftcron dev`: a local cluster of real node processes on loopback, stopped together."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from scheduler.localcluster import LocalCluster

LEADER_WAIT_S = 60.0


def _start_demo_worker(cluster: LocalCluster) -> subprocess.Popen:
    log_file = open(cluster.data_dir / "worker.log", "ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "worker", "--cluster", cluster.cluster_arg, "--demo", "--shell"],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log_file.close()


def run_dev_cluster(args) -> int:
    data_dir = Path(args.data_dir)
    if not 1 <= args.nodes <= 7 or args.nodes % 2 == 0:
        print("raftcron dev: --nodes must be odd, from 1 to 7", file=sys.stderr)
        return 2
    if args.fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    stopping = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    cluster = LocalCluster(data_dir, nodes=args.nodes, port_base=args.port_base, metrics=True)
    worker: subprocess.Popen | None = None
    try:
        cluster.start()
        for member in cluster.members:
            print(f"started node {member.node_id} (pid {member.process.pid}), log {member.log_path}, "
                  f"metrics {member.metrics_url}")
        leader = cluster.wait_for_leader(LEADER_WAIT_S)
        print(f"leader is {leader}")
        print(f"RAFTCRON_CLUSTER={cluster.cluster_arg}", flush=True)
        if args.jobs and Path(args.jobs).exists():
            from scheduler import cli

            cli.main(["--cluster", cluster.cluster_arg, "apply", "-f", args.jobs])
        if not args.no_worker:
            worker = _start_demo_worker(cluster)
            print(f"started demo worker (pid {worker.pid}, handlers demo.*, reports.build, payroll.run and shell), "
                  f"log {data_dir / 'worker.log'}")
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
