"""`WorkerFleet`: worker processes (`python -m bench._harness.benchworker`) started and always stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench._harness.benchworker import read_stats
from bench._harness.common import ROOT, scan_logs
from scheduler.local import LocalCluster


class WorkerFleet:
    """Worker processes running bench._harness.benchworker; always stop() them (a finally block)."""

    def __init__(self, cluster: LocalCluster, out_dir: Path, name: str = "w") -> None:
        self.cluster = cluster
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.processes: list[tuple[str, subprocess.Popen]] = []

    def start(
        self,
        count: int,
        concurrency: int,
        targets: str = "bench.noop",
        max_life_s: float = 600.0,
        lease_wait_s: float = 2.0,
        cluster_arg: str | None = None,
        isolation: str = "thread",
        transport: str = "unary",  # as the worker's default; `execution` measures both
    ) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        for i in range(count):
            worker_id = f"{self.name}{len(self.processes) + 1}"
            log_file = open(self.out_dir / f"{worker_id}.log", "ab")
            try:
                process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench._harness.benchworker",
                        "--cluster",
                        cluster_arg or self.cluster.cluster_arg,
                        "--worker-id",
                        worker_id,
                        "--concurrency",
                        str(concurrency),
                        "--targets",
                        targets,
                        "--stats",
                        str(self.out_dir / f"{worker_id}.jsonl"),
                        "--max-life",
                        str(max_life_s),
                        "--lease-wait",
                        str(lease_wait_s),
                        "--isolation",
                        isolation,
                        "--transport",
                        transport,
                    ],
                    env=env,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    cwd=str(ROOT),
                )
            finally:
                log_file.close()
            self.processes.append((worker_id, process))

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Wait until every worker wrote its 'started' marker (imports done, leasing)."""
        deadline = time.monotonic() + timeout_s
        for worker_id, process in self.processes:
            marker = self.out_dir / f"{worker_id}.started"
            while not marker.exists():
                if process.poll() is not None:
                    raise RuntimeError(f"worker {worker_id} exited ({process.returncode}); see {self.out_dir}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"worker {worker_id} not started after {timeout_s}s")
                time.sleep(0.05)

    def stop(self, drain_s: float = 15.0) -> None:
        """SIGTERM (the SDK drains), then SIGKILL what is left."""
        for _, process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + drain_s
        for _, process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)

    def stats(self) -> list[dict]:
        found = []
        for worker_id, _ in self.processes:
            path = self.out_dir / f"{worker_id}.jsonl"
            if path.exists():
                found.append(read_stats(path))
        return found

    def completed(self, stats: list[dict] | None = None) -> int:
        """Outcomes the workers got answered OK so far (from `stats`, default read afresh)."""
        return sum(len(worker["completes_ok"]) for worker in (self.stats() if stats is None else stats))

    def log_problems(self) -> list[str]:
        return scan_logs([self.out_dir / f"{w}.log" for w, _ in self.processes], markers=("Traceback", "CRITICAL"))
