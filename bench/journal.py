"""What the synced journal costs: syncs per second and per committed entry, sync times, and
acknowledged writes per second and their latency, with sync on and with sync off side by side.

    python -m bench journal            # 1 and 8 writers, 10 s each, both modes
    python -m bench journal --quick    # 1 and 8 writers, 4 s each

For each mode, a 3-node cluster on loopback (metrics on) holds manual jobs; writer threads call
TriggerJob back to back (each acknowledged trigger is one committed entry) through the leader.
Per node, from its /metrics before and after each phase: journal syncs (syncs/s, syncs per
committed entry: the commit index's growth over the phase) and the sync time histogram's p50/p99.
The sync-off cluster is the baseline: same load, same code, no fsync.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import grpc

from bench._harness.cluster import apply_specs, bench_cluster
from bench._harness.common import (
    PortAllocator,
    fmt,
    local_cluster_ports,
    median,
    percentile,
    print_table,
    raise_on_sigterm,
)
from bench._harness.metrics import bucket_quantile, node_counters, node_histograms
from bench._harness.report import bench_parser, finish, log, new_report
from scheduler.core.model import JobSpec

SYNCS = "raftcron_raft_journal_syncs"
SYNC_SECONDS = "raftcron_raft_journal_sync_seconds"
MANUAL_JOBS = 64


def _syncs(cluster, node_id: str) -> float:
    return sum(node_counters(cluster, node_id, (SYNCS,)).values())


def _sync_histogram(cluster, node_id: str) -> dict[float, float]:
    histograms = node_histograms(cluster, node_id, SYNC_SECONDS, by_label="__none__")
    return next(iter(histograms.values()), {})


def _write_load(client, writers: int, duration_s: float) -> dict:
    """`writers` threads trigger manual jobs back to back for `duration_s`; latencies of the
    acknowledged ones."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + duration_s

    def write(worker: int) -> None:
        n = 0
        while time.monotonic() < stop_at:
            job_id = f"journal-{(worker * 7 + n) % MANUAL_JOBS:03d}"
            started = time.monotonic()
            try:
                client.trigger_job(job_id=job_id, request_id=f"journal-{worker}-{n}-{time.time_ns()}")
            except grpc.RpcError as exc:
                with lock:
                    errors.append(exc.code().name)
                continue
            finally:
                n += 1
            with lock:
                latencies.append(time.monotonic() - started)

    threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(writers)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    return {
        "writers": writers,
        "acknowledged": len(latencies),
        "elapsed_s": elapsed,
        "writes_per_s": len(latencies) / elapsed,
        "errors": len(errors),
        "latency_p50_ms": 1000 * (percentile(latencies, 50) or 0),
        "latency_p99_ms": 1000 * (percentile(latencies, 99) or 0),
    }


def measure_mode(
    root: Path, port_base: int, sync: bool, writer_counts: list[int], duration_s: float, report: dict
) -> list[dict]:
    name = "sync-on" if sync else "sync-off"
    phases = []
    with bench_cluster(
        root, port_base, overrides={"raft": {"sync": sync}}, out=report.setdefault(name, {}), name=name, metrics=True
    ) as cluster:
        leader = cluster.wait_for_leader(60)
        client = cluster.client(leader, timeout_s=20.0)
        specs = [
            JobSpec(
                id=f"journal-{i:03d}",
                schedule="0 0 1 1 *",
                target_kind="handler",
                target="bench.noop",
                jitter="pinned",
                overlap="allow",
            )
            for i in range(MANUAL_JOBS)
        ]
        apply_specs(client, specs)
        nodes = [m.node_id for m in cluster.members]
        for writers in writer_counts:
            before = {
                n: (_syncs(cluster, n), _sync_histogram(cluster, n), cluster.status(n).commit_index) for n in nodes
            }
            load = _write_load(client, writers, duration_s)
            after = {
                n: (_syncs(cluster, n), _sync_histogram(cluster, n), cluster.status(n).commit_index) for n in nodes
            }
            per_node = {}
            for n in nodes:
                syncs = after[n][0] - before[n][0]
                entries = max(1, after[n][2] - before[n][2])
                per_node[n] = {
                    "role": "leader" if n == leader else "follower",
                    "syncs_per_s": syncs / load["elapsed_s"],
                    "syncs_per_entry": syncs / entries,
                    "entries_per_s": entries / load["elapsed_s"],
                    "sync_p50_ms": 1000 * (bucket_quantile(before[n][1], after[n][1], 0.5) or 0),
                    "sync_p99_ms": 1000 * (bucket_quantile(before[n][1], after[n][1], 0.99) or 0),
                }
            phases.append({"mode": name, **load, "nodes": per_node})
            log(
                f"{name}, {writers} writer(s): {load['writes_per_s']:.0f} writes/s, p50 {load['latency_p50_ms']:.1f} ms"
            )
        client.close()
    return phases


def summarize(phases: list[dict]) -> list[list]:
    rows = []
    for phase in phases:
        nodes = phase["nodes"].values()
        leader = next(v for v in nodes if v["role"] == "leader")
        followers = [v for v in nodes if v["role"] == "follower"]
        rows.append(
            [
                phase["mode"],
                phase["writers"],
                fmt(phase["writes_per_s"], 0),
                fmt(phase["latency_p50_ms"], 1),
                fmt(phase["latency_p99_ms"], 1),
                fmt(leader["entries_per_s"], 0),
                f"{leader['syncs_per_s']:.0f} / {median(f['syncs_per_s'] for f in followers):.0f}",
                f"{leader['syncs_per_entry']:.2f} / {median(f['syncs_per_entry'] for f in followers):.2f}",
                f"{leader['sync_p50_ms']:.2f} / {leader['sync_p99_ms']:.2f}",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("journal", __doc__, port_base=8280)
    parser.add_argument("--duration", type=float, help="seconds of writing per phase (10; 4 with --quick)")
    parser.add_argument("--writers", default="1,8", help="writer thread counts, one phase each (1,8)")
    args = parser.parse_args(argv)
    duration_s = args.duration or (4.0 if args.quick else 10.0)
    writer_counts = [int(w) for w in args.writers.split(",")]
    raise_on_sigterm()
    root = Path(tempfile.mkdtemp(prefix="raftcron-bench-journal-"))
    report = new_report("journal", args.quick, phases=[])
    interrupted = False
    ports = PortAllocator(args.port_base, step=10, limit=100)
    try:
        for sync in (True, False):
            report["phases"] += measure_mode(
                root, ports.take(local_cluster_ports), sync, writer_counts, duration_s, report
            )
        for phase in report["phases"]:
            if phase["errors"]:
                report["problems"].append(
                    f"{phase['mode']}, {phase['writers']} writers: {phase['errors']} failed writes"
                )
            if phase["mode"] == "sync-on" and any(v["syncs_per_s"] == 0 for v in phase["nodes"].values()):
                report["problems"].append(f"sync-on, {phase['writers']} writers: a node made no journal sync")
    except KeyboardInterrupt:
        interrupted = True
    except Exception as exc:
        report["problems"].append(f"journal: {exc!r}")
        log(traceback.format_exc())
    rows = summarize(report["phases"])
    report["table"] = print_table(
        [
            "mode",
            "writers",
            "writes/s",
            "p50 ms",
            "p99 ms",
            "entries/s",
            "syncs/s leader / follower",
            "syncs per entry leader / follower",
            "leader sync p50 / p99 ms",
        ],
        rows,
        title="journal: acknowledged writes and journal syncs, 3 nodes on loopback",
    )
    return finish("journal", report, root, interrupted, args.keep)


if __name__ == "__main__":
    sys.exit(main())
