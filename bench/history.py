"""History: "did last night's job run?" for a job with 100,000 recorded runs.

    python -m bench history            # 100,000 runs of one job
    python -m bench history --quick    # 20,000 runs

One 3-node cluster. One job (`* * * * * *`, retention raised to keep every run) is backfilled
with 10,000 past slots per BackfillJob call until it holds the requested number of runs (they
stay queued: no worker runs here, which changes nothing for a read). Then, per node (leader and a
follower) and for the linearizable variant:

- the ListRuns RPC alone (one warm client, 30 calls): newest 50 runs, and the 50 runs after
  'yesterday 18:00' (a window in the middle of the history);
- the `raftcron runs JOB --since ...` command as a user types it (a new process each time, 7 runs),
  beside `raftcron --help` (the same interpreter start and imports, no call): the baseline.

Checks (exit 1): the job holds the requested number of runs; every answer has 50 runs in the
window; replica digests equal; no CRITICAL line in the node logs.
Output: bench/out/history.json.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc

from bench._harness.cluster import apply_specs, bench_cluster, ts
from bench._harness.common import (
    ROOT,
    PortAllocator,
    fmt,
    local_cluster_ports,
    median,
    percentile,
    print_table,
    raise_on_sigterm,
)
from bench._harness.report import bench_parser, finish, log, new_report
from scheduler.core.model import HistoryPolicy, JobSpec
from worker.api.v1 import runs_pb2

JOB_ID = "history.bench"
BACKFILL_CHUNK = 10_000
KEEP_ALL = HistoryPolicy(keep_runs=1_000_000, max_age_us=0, keep_failed_runs=1_000_000, failed_max_age_us=0)


def backfill(client, runs: int, now: datetime, out: dict) -> int:
    created = 0
    chunk_end = now - timedelta(seconds=1)
    while created < runs:
        count = min(BACKFILL_CHUNK, runs - created)
        start = chunk_end - timedelta(seconds=count - 1)
        request_id = f"bench-history-{start:%Y%m%d%H%M%S}"
        for _ in range(5):  # a leader change aborts the call: retried with the same request id
            try:
                response = client.backfill_job(
                    job_id=JOB_ID,
                    author="bench",
                    max_runs=count,
                    rate_per_s=100_000.0,
                    to=ts(chunk_end),
                    request_id=request_id,
                    **{"from": ts(start)},
                )
                break
            except grpc.RpcError as exc:
                out.setdefault("backfill_retries", []).append(exc.code().name)
                time.sleep(1.0)
        else:
            raise RuntimeError("backfill failed 5 times in a row")
        created += len(response.runs) + response.already_ran
        chunk_end = start - timedelta(seconds=1)
    return created


def time_rpc(client, request: runs_pb2.ListRunsRequest, calls: int) -> tuple[list[float], int]:
    seconds, sizes = [], set()
    for _ in range(calls):
        started = time.perf_counter()
        response = client.list_runs(request)
        seconds.append(time.perf_counter() - started)
        sizes.add(len(response.runs))
    return seconds, min(sizes)


def time_command(argv: list[str], env: dict, repeats: int) -> list[float]:
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=60)
        seconds.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[2:])} exited {done.returncode}: {done.stderr.strip()[:300]}")
    return seconds


def cli_env(cluster, address: str) -> dict:
    env = {**os.environ, "RAFTCRON_CLUSTER": address}
    credentials = getattr(cluster, "credentials", None)
    if credentials is not None:
        env.update(credentials.client_env("admin"))
    return env


def measure(cluster, runs: int, quick: bool) -> dict:
    out: dict = {"runs_wanted": runs, "rows": []}
    client = cluster.client(timeout_s=120.0)
    apply_specs(
        client,
        [
            JobSpec(
                id=JOB_ID,
                schedule="* * * * * *",
                target_kind="handler",
                target="bench.none",
                jitter="pinned",
                history=KEEP_ALL,
            )
        ],
    )
    now = datetime.now(timezone.utc).replace(microsecond=0)
    started = time.monotonic()
    out["runs_created"] = backfill(client, runs, now, out)
    out["backfill_s"] = time.monotonic() - started
    log(f"history: {out['runs_created']:,} runs backfilled in {out['backfill_s']:.1f}s")
    cluster.wait_converged(timeout_s=120.0)
    yesterday_18 = (now - timedelta(days=1)).replace(hour=18, minute=0, second=0)
    oldest = now - timedelta(seconds=runs)
    since = max(yesterday_18, oldest + timedelta(hours=1))
    out["since"] = since.isoformat()
    leader = cluster.leader()
    follower = next(m.node_id for m in cluster.members if m.node_id != leader)
    variants = [
        ("newest 50", dict(job_id=JOB_ID, page_size=50, newest_first=True)),
        ("50 after 'yesterday 18:00'", dict(job_id=JOB_ID, page_size=50, since=ts(since))),
        ("newest 50, linearizable", dict(job_id=JOB_ID, page_size=50, newest_first=True, linearizable=True)),
    ]
    for node_name, node_id in (("leader", leader), ("follower", follower)):
        with cluster.client(node_id, timeout_s=30.0) as node_client:
            for label, fields in variants:
                seconds, smallest = time_rpc(node_client, runs_pb2.ListRunsRequest(**fields), 30)
                out["rows"].append(
                    {
                        "what": f"ListRuns RPC, {label}",
                        "node": node_name,
                        "median_s": median(seconds),
                        "p99_s": percentile(seconds, 99),
                        "runs_per_answer": smallest,
                    }
                )
        env = cli_env(cluster, cluster.member(node_id).grpc_address)
        base = [sys.executable, "-m", "scheduler.cli"]
        command = time_command(
            [*base, "runs", JOB_ID, "--since", since.strftime("%Y-%m-%dT%H:%M:%SZ"), "--oldest-first", "--limit", "50"],
            env,
            7,
        )
        baseline = time_command([*base, "--help"], env, 7)
        out["rows"].append(
            {
                "what": "raftcron runs JOB --since ... (new process)",
                "node": node_name,
                "median_s": median(command),
                "p99_s": max(command),
                "baseline_help_median_s": median(baseline),
            }
        )
    return out


def summarize(report: dict) -> list[list]:
    measured = report.get("measured", {})
    rows = [
        [
            "runs of the job",
            f"{measured.get('runs_created', 0):,}",
            f"backfilled in {fmt(measured.get('backfill_s'))} s",
        ]
    ]
    for row in measured.get("rows", []):
        detail = f"p99 {fmt(row['p99_s'])} s"
        if "runs_per_answer" in row:
            detail += f", {row['runs_per_answer']} runs per answer"
        if "baseline_help_median_s" in row:
            detail += f"; `raftcron --help` alone {fmt(row['baseline_help_median_s'])} s"
        rows.append([f"{row['what']} [{row['node']}]", f"{fmt(row['median_s'])} s", detail])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("history", __doc__, port_base=8180)
    parser.add_argument("--runs", type=int, help="runs of the job (100,000; 20,000 with --quick)")
    args = parser.parse_args(argv)
    runs = args.runs or (20_000 if args.quick else 100_000)
    raise_on_sigterm()
    root = Path(tempfile.mkdtemp(prefix="raftcron-bench-history-"))
    report = new_report("history", args.quick)
    interrupted = False
    port_base = PortAllocator(args.port_base, step=10, limit=100).take(local_cluster_ports)
    try:
        with bench_cluster(root, port_base, out=report, name="history") as cluster:
            report["measured"] = measure(cluster, runs, args.quick)
        measured = report["measured"]
        if measured["runs_created"] < runs:
            report["problems"].append(f"only {measured['runs_created']:,} of {runs:,} runs recorded")
        short = [r for r in measured["rows"] if r.get("runs_per_answer", 50) < 50]
        if short:
            report["problems"].append(f"answers with fewer than 50 runs: {[r['what'] for r in short]}")
    except KeyboardInterrupt:
        interrupted = True
    except Exception as exc:
        report["problems"].append(f"history: {exc!r}")
        log(traceback.format_exc())
    rows = summarize(report)
    report["table"] = print_table(
        ["figure", "median", "detail"], rows, title="history: one job's runs, 3 nodes on loopback"
    )
    return finish("history", report, root, interrupted, args.keep)


if __name__ == "__main__":
    sys.exit(main())
