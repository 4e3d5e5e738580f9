"""Claimed run keys per second through a real 3-node cluster, next to a bare pysyncobj baseline.

    python -m bench claims            # N = 20,000 jobs, 3 repetitions (several minutes)
    python -m bench claims --quick    # N = 2,000 jobs, 1 repetition

1. Raw baseline: three bare pysyncobj processes with the node's Raft settings
   (`RaftSettings` defaults, a password) replicate real encoded `ClaimRuns` bytes through one
   trivial replicated method: (a) single-claim entries/s with 2,000 calls in flight,
   (b) claims/s when each entry carries 1,000 claims, (c) commit latency of sequential calls.
2. Trigger path: a LocalCluster (real node processes) holds N jobs due at one instant T; the
   leader's trigger loop claims them with `claim_batch_size` 1 ("single": one key per Raft
   entry) or 1000 ("batched"). Measured: the time from T until the leader's state holds all
   N runs (polled), hence keys/s; the runs are then read back through RunService.ListRuns and
   checked (one queued run per job, at T), replica digests are compared, and every node log
   is scanned for CRITICAL and pysyncobj's "truncating already-applied" line.

Exit status 1 when a check failed (digest mismatch, lost claims, bad log line, a run that
could not be measured). Figures go to stdout and bench/out/claims.json.
"""

from __future__ import annotations

import sys
import tempfile
import time
import traceback
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bench._harness.cluster import (
    apply_specs,
    check_node_logs,
    compare_offline,
    instant_ahead,
    list_runs,
    yearly_schedule,
)
from bench._harness.common import (
    PortAllocator,
    fmt,
    load_average,
    local_cluster_ports,
    median,
    percentile,
    print_table,
    raft_sync_mode,
    raise_on_sigterm,
    with_raft_sync_mode,
)
from bench._harness.rawraft import RawCluster, raw_ports
from bench._harness.report import bench_parser, finish, log, new_report
from scheduler.core.codec import encode_command
from scheduler.core.commands import ClaimRuns, SlotClaim
from scheduler.core.model import SECOND_US, JobSpec
from scheduler.local import LocalCluster
from scheduler.rpc.convert import timestamp_us
from worker.api.v1 import common_pb2

YEAR_US = 365 * 24 * 3600 * SECOND_US
RAW_SINGLE_IN_FLIGHT = 2_000
RAW_BATCH_ENTRIES = 20
RAW_BATCH_ITEMS = 1_000
RAW_SEQUENTIAL = 200
POLL_S = 0.01


def job_id(i: int) -> str:
    return f"herd-{i:06d}"


def claim_entry(first: int, count: int, at_us: int) -> bytes:
    """The bytes of a ClaimRuns command claiming `count` keys at one instant, as the leader proposes."""
    claims = tuple(SlotClaim(job_id(first + i), at_us, at_us + YEAR_US, 1) for i in range(count))
    return encode_command(ClaimRuns(issued_at_us=at_us, epoch=1, claims=claims))


# -- 1. raw pysyncobj baseline ----------------------------------------------------------------------
def run_raw(root: Path, port_base: int, reps: int) -> dict:
    at_us = int(time.time()) * SECOND_US
    singles = [claim_entry(i, 1, at_us) for i in range(RAW_SINGLE_IN_FLIGHT)]
    batches = [claim_entry(i * RAW_BATCH_ITEMS, RAW_BATCH_ITEMS, at_us) for i in range(RAW_BATCH_ENTRIES)]
    item_bytes = len(batches[0]) / RAW_BATCH_ITEMS
    out = {
        "port_base": port_base,
        "load_before": load_average(),
        "single_entry_bytes": len(singles[0]),
        "batch_entry_bytes": len(batches[0]),
        "item_bytes": round(item_bytes, 1),
        "single_per_s": [],
        "batched_items_per_s": [],
        "latency_p50_ms": [],
        "latency_p99_ms": [],
        "failures": [],
        "problems": [],
    }
    cluster = RawCluster(root / "raw", port_base)
    try:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        log(f"raw: leader r{leader + 1}; {len(singles[0])} B single entries, {len(batches[0])} B batched entries")
        cluster.call(leader, "burst", singles[:200], 30.0, timeout_s=60)  # warm-up
        for rep in range(reps):
            single = cluster.call(leader, "burst", singles, 60.0, timeout_s=90)
            batched = cluster.call(leader, "burst", batches, 60.0, timeout_s=90)
            seq = cluster.call(leader, "sequential", singles[:RAW_SEQUENTIAL], 60.0, timeout_s=90)
            for name, result in (("single", single), ("batched", batched), ("sequential", seq)):
                if result["failures"] or result.get("completed", result["count"]) != result["count"]:
                    summary = {k: v for k, v in result.items() if k != "latencies_s"}
                    out["failures"].append({"rep": rep, "what": name, **summary})
            out["single_per_s"].append(single["completed"] / single["elapsed_s"])
            out["batched_items_per_s"].append(batched["completed"] * RAW_BATCH_ITEMS / batched["elapsed_s"])
            latencies_ms = [x * 1000 for x in seq["latencies_s"]]
            out["latency_p50_ms"].append(percentile(latencies_ms, 50))
            out["latency_p99_ms"].append(percentile(latencies_ms, 99))
            log(
                f"raw rep {rep + 1}: single {fmt(out['single_per_s'][-1])} entries/s, batched "
                f"{fmt(out['batched_items_per_s'][-1])} items/s, commit p50/p99 "
                f"{fmt(out['latency_p50_ms'][-1])}/{fmt(out['latency_p99_ms'][-1])} ms"
            )
        out["load_after"] = load_average()
        final = cluster.wait_converged(30)
        out["replicas"] = {"applied": final["applied"], "entries": final["entries"], "chain": final["chain"]}
        log(f"raw: replicas agree at index {final['applied']} ({final['entries']} entries)")
    except Exception as exc:
        out["problems"].append(f"raw baseline failed: {exc!r}")
        log(traceback.format_exc())
    finally:
        cluster.stop()
        bad = cluster.log_problems()
        if bad:
            out["problems"].append(f"raw pysyncobj logs contain {len(bad)} bad line(s): " + " | ".join(bad[:3]))
        out["bad_log_lines"] = bad
    if out["failures"]:
        out["problems"].append(f"raw baseline: failed or incomplete calls: {out['failures'][:3]}")
    return out


# -- 2. the trigger path ----------------------------------------------------------------------------
def make_specs(n: int, schedule: str) -> list[JobSpec]:
    return [
        JobSpec(id=job_id(i), schedule=schedule, target_kind="handler", target="bench.noop", jitter="pinned")
        for i in range(n)
    ]


class Poller:
    """Polls one node's run_count; remembers when each observation was sent and received."""

    def __init__(self, client, address: str) -> None:
        self.client, self.address = client, address
        self.samples: list[tuple[float, float, int, str]] = []  # (sent, received, run_count, role)

    def poll(self):
        sent = time.time()
        status = self.client.status(address=self.address)
        received = time.time()
        self.samples.append((sent, received, status.run_count, status.role))
        return status

    def crossing(self, target: int, baseline: int = 0) -> float | None:
        """Estimated wall time at which run_count first reached `target` (midpoint of its bracket)."""
        previous_sent = None
        for sent, received, count, _ in self.samples:
            if count - baseline >= target:
                return received if previous_sent is None else (previous_sent + received) / 2
            previous_sent = sent
        return None


def run_trigger(
    root: Path,
    port_base: int,
    variant: str,
    batch_size: int,
    n: int,
    cap_s: float,
    drain_s: float,
    lead_min_s: float,
) -> dict:
    out: dict = {
        "variant": variant,
        "claim_batch_size": batch_size,
        "jobs": n,
        "port_base": port_base,
        "load_before": load_average(),
        "problems": [],
        "raft_sync": raft_sync_mode(),
    }
    cluster = LocalCluster(
        root / f"{variant}-{port_base}",
        nodes=3,
        port_base=port_base,
        overrides=with_raft_sync_mode({"claim_batch_size": batch_size}),
    )
    client = poll_client = None
    try:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        client = cluster.client(timeout_s=60.0)
        leader_address = cluster.member(leader).grpc_address
        # Apply once with a far schedule to learn how long an apply takes, then pin T from it.
        far = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=180)
        first_apply_s = apply_specs(client, make_specs(n, yearly_schedule(far)))
        lead_s = max(lead_min_s, 2.0 * first_apply_s + 3.0)
        at = instant_ahead(lead_s)
        T = at.timestamp()
        second_apply_s = apply_specs(client, make_specs(n, yearly_schedule(at)))
        margin_s = T - time.time()
        out.update(
            first_apply_s=first_apply_s,
            second_apply_s=second_apply_s,
            lead_s=lead_s,
            margin_s=margin_s,
            T=at.isoformat(),
        )
        log(
            f"{variant}: {n} jobs applied in {first_apply_s:.1f}s + {second_apply_s:.1f}s; "
            f"due at {at:%H:%M:%S}Z, {margin_s:.1f}s ahead"
        )
        if margin_s < 0.5:
            raise RuntimeError(f"the apply ended only {margin_s:.1f}s before T; raise --lead")

        poll_client = cluster.client(leader, timeout_s=5.0)
        poller = Poller(poll_client, leader_address)
        before = poller.poll()
        baseline_runs, commit_before = before.run_count, before.commit_index
        out["leader"] = leader
        while time.time() < T - 0.3:
            time.sleep(min(0.5, max(0.0, T - 0.3 - time.time())))
        deadline, capped_at = T + cap_s, None
        while True:
            status = poller.poll()
            claimed = status.run_count - baseline_runs
            if status.role != "leader" and not out.get("leader_lost"):
                out["leader_lost"] = True
                out["problems"].append(f"{variant}: {leader} stopped leading during the claims ({status.role})")
            if claimed >= n:
                break
            if time.time() > deadline:
                capped_at = poller.samples[-1]
                break
            time.sleep(POLL_S)

        in_window = [r - s for s, r, c, _ in poller.samples if s >= T and c - baseline_runs < n]
        out["load_after"] = load_average()
        out["status_rtt_max_ms"] = max(in_window, default=0.0) * 1000
        first = poller.crossing(1, baseline_runs)
        out["first_claim_after_T_ms"] = (first - T) * 1000 if first else None
        if capped_at is None:
            done = poller.crossing(n, baseline_runs)
            out["capped"] = False
            out["claimed"] = n
            out["elapsed_s"] = done - T
            out["keys_per_s"] = n / (done - T)
            log(f"{variant}: {n} keys claimed {out['elapsed_s']:.3f}s after T: {fmt(out['keys_per_s'])} keys/s")
        else:
            sent, received, count, _ = capped_at
            claimed = count - baseline_runs
            out["capped"] = True
            out["claimed"] = claimed
            out["elapsed_s"] = received - T
            out["keys_per_s"] = claimed / (received - T)
            log(
                f"{variant}: capped after {cap_s:.0f}s: {claimed}/{n} keys claimed, "
                f"{fmt(out['keys_per_s'])} keys/s so far"
            )
            # Let it finish (unmeasured) so the replicas can be compared at rest.
            drain_deadline = time.time() + drain_s
            while time.time() < drain_deadline and poller.poll().run_count - baseline_runs < n:
                time.sleep(0.5)
            out["drained_after_s"] = time.time() - T
            finished = poller.samples[-1][2] - baseline_runs
            out["drained"] = finished >= n
            log(f"{variant}: {'drained' if out['drained'] else 'NOT drained'} {out['drained_after_s']:.0f}s after T")
            if not out["drained"]:
                waited = out["drained_after_s"]
                out["problems"].append(f"{variant}: only {finished}/{n} keys claimed {waited:.0f}s after T")
        step = max(1, len(poller.samples) // 400)
        out["run_count_samples"] = [
            (round(s - T, 4), round(r - T, 4), c - baseline_runs) for s, r, c, _ in poller.samples[::step]
        ]

        # Replicas at rest must agree byte for byte. A large herd of queued runs keeps the state
        # moving (each live digest at its own index): the stopped replicas are compared below.
        try:
            out["digest"] = cluster.wait_converged(timeout_s=60.0)
        except TimeoutError:
            out["digest"] = None
            out["live_digests"] = cluster.digests()
        after = poller.poll()
        out["log_entries_appended"] = after.commit_index - commit_before

        # Read every run of the herd back and check it.
        runs = list_runs(client, since=at, until=at + timedelta(seconds=1))
        T_us = int(T) * SECOND_US
        ids = Counter(r.job_id for r in runs)
        statuses = Counter(common_pb2.RunStatus.Name(r.status) for r in runs)
        lag_ms = [(timestamp_us(r.claimed_at) - timestamp_us(r.scheduled_at)) / 1000 for r in runs]
        claim_indexes = {r.claim_index for r in runs}
        out.update(
            runs_listed=len(runs),
            runs_not_at_T=sum(1 for r in runs if timestamp_us(r.scheduled_at) != T_us),
            duplicate_keys=sum(c - 1 for c in ids.values() if c > 1),
            missing_jobs=n - len(ids),
            statuses=dict(statuses),
            entries_with_claims=len(claim_indexes),
            claimed_at_lag_ms={
                "p50": percentile(lag_ms, 50),
                "p99": percentile(lag_ms, 99),
                "max": max(lag_ms, default=None),
            },
        )
        if set(statuses) != {"QUEUED"}:
            out["problems"].append(f"{variant}: runs should all be QUEUED, found {dict(statuses)}")
        if out["missing_jobs"] or out["duplicate_keys"] or out["runs_not_at_T"] or out["runs_listed"] != n:
            out["problems"].append(
                f"{variant}: {out['runs_listed']} runs listed for {n} jobs (missing {out['missing_jobs']}, "
                f"duplicates {out['duplicate_keys']}, not at T {out['runs_not_at_T']})"
            )
        log(
            f"{variant}: {len(runs)} runs in {len(claim_indexes)} entries ({out['log_entries_appended']} appended); "
            f"claimed_at - scheduled_at p50/p99/max {fmt(out['claimed_at_lag_ms']['p50'])}/"
            f"{fmt(out['claimed_at_lag_ms']['p99'])}/{fmt(out['claimed_at_lag_ms']['max'])} ms"
        )
    except Exception as exc:
        out["problems"].append(f"{variant}: {exc!r}")
        log(traceback.format_exc())
    finally:
        for c in (client, poll_client):
            if c is not None:
                c.close()
        cluster.stop()
    if "live_digests" in out:
        compare_offline(cluster, out, variant)
    check_node_logs([m.log_path for m in cluster.members], out, variant)
    return out


# -- 3. report --------------------------------------------------------------------------------------
def summarize(raw: dict, trigger: dict[str, list[dict]], n: int) -> tuple[list[list], dict]:
    raw_batched = median(raw["batched_items_per_s"])
    rows, summary = [], {}

    def add(key: str, label: str, values: list, ratio: bool = False) -> None:
        value = median(values)
        summary[key] = value
        ratio_text = f"{value / raw_batched:.1%}" if ratio and value and raw_batched else ""
        rows.append([label, value, " ".join(fmt(v) for v in values), ratio_text])

    add(
        "raw_single_per_s",
        f"raw single entries/s ({RAW_SINGLE_IN_FLIGHT:,} in flight, {raw['single_entry_bytes']} B)",
        raw["single_per_s"],
    )
    add(
        "raw_batched_items_per_s",
        f"raw batched items/s ({RAW_BATCH_ENTRIES}x{RAW_BATCH_ITEMS:,}, {raw['item_bytes']:g} B/item)",
        raw["batched_items_per_s"],
    )
    add("raw_commit_p50_ms", f"raw commit p50 ms ({RAW_SEQUENTIAL} sequential)", raw["latency_p50_ms"])
    add("raw_commit_p99_ms", f"raw commit p99 ms ({RAW_SEQUENTIAL} sequential)", raw["latency_p99_ms"])
    variants = [v for v in ("single", "batched") if v in trigger]
    for variant, batch in (("single", 1), ("batched", 1000)):
        if variant not in trigger:
            continue
        reps = [r for r in trigger.get(variant, []) if r.get("keys_per_s")]
        capped = any(r.get("capped") for r in reps)
        label = f"trigger {variant} keys/s (claim_batch_size {batch}, N={n:,})"
        label += " [CAPPED: rate so far]" if capped else ""
        add(f"trigger_{variant}_keys_per_s", label, [r["keys_per_s"] for r in reps], ratio=True)
    for variant in variants:
        reps = [r for r in trigger.get(variant, []) if r.get("keys_per_s")]
        elapsed = [r["elapsed_s"] for r in reps]
        add(f"trigger_{variant}_elapsed_s", f"  {variant}: s from T to last key (or cap)", elapsed)
        add(
            f"trigger_{variant}_first_ms",
            f"  {variant}: ms from T to first key",
            [r.get("first_claim_after_T_ms") for r in reps],
        )
        for p in ("p50", "p99", "max"):
            add(
                f"trigger_{variant}_claimed_lag_{p}_ms",
                f"  {variant}: claimed_at - scheduled_at {p} ms",
                [r.get("claimed_at_lag_ms", {}).get(p) for r in reps],
            )
        entries = [r.get("log_entries_appended") for r in reps]
        add(f"trigger_{variant}_entries", f"  {variant}: Raft entries appended", entries)
        holding = [r.get("entries_with_claims") for r in reps]
        add(f"trigger_{variant}_claim_entries", f"  {variant}: Raft entries holding the claims", holding)
        add(
            f"trigger_{variant}_status_rtt_max_ms",
            f"  {variant}: slowest leader Status RPC while claiming, ms",
            [r.get("status_rtt_max_ms") for r in reps],
        )
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("claims", __doc__, port_base=7600, quick_help="N=2,000 jobs, 1 repetition")
    parser.add_argument("--jobs", type=int, help="jobs due at the same instant (default 20,000; 2,000 with --quick)")
    parser.add_argument("--reps", type=int, help="repetitions (default 3; 1 with --quick)")
    parser.add_argument("--cap", type=float, default=60.0, help="stop measuring a variant N s after T (default 60)")
    parser.add_argument("--drain", type=float, default=300.0, help="after a cap, wait up to N s for the rest (300)")
    parser.add_argument("--lead", type=float, default=8.0, help="at least N s between the apply's end and T (8)")
    parser.add_argument("--variants", default="single,batched", help="comma-separated: single, batched")
    args = parser.parse_args(argv)
    n = args.jobs or (2_000 if args.quick else 20_000)
    reps = args.reps or (1 if args.quick else 3)
    variants = [v for v in args.variants.split(",") if v]
    if not set(variants) <= {"single", "batched"} or n < 1 or reps < 1:
        parser.error("bad --variants, --jobs or --reps")
    raise_on_sigterm()
    root = Path(tempfile.mkdtemp(prefix="raftcron-bench-claims-"))
    ports = PortAllocator(args.port_base, step=10, limit=200)
    report = new_report(
        "claims", args.quick, jobs=n, reps=reps, cap_s=args.cap, raw={}, trigger={v: [] for v in variants}
    )
    interrupted = False
    try:
        log(f"claims: N={n:,}, {reps} repetition(s), data under {root}")
        report["raw"] = run_raw(root, ports.take(raw_ports), reps)
        for rep in range(reps):
            for variant in variants:
                batch = 1 if variant == "single" else 1000
                result = run_trigger(
                    root, ports.take(local_cluster_ports), variant, batch, n, args.cap, args.drain, args.lead
                )
                result["rep"] = rep
                report["trigger"][variant].append(result)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: every cluster was stopped")
    problems = list(report["raw"].get("problems", []))
    for results in report["trigger"].values():
        for result in results:
            problems += result["problems"]
    if report["raw"].get("single_per_s"):
        rows, report["summary"] = summarize(report["raw"], report["trigger"], n)
        title = f"claims: 3 nodes on loopback, N={n:,} keys due at one instant, median of {reps}"
        report["table"] = print_table(["figure", "median", "runs", "vs raw batched"], rows, title=title)
    report["problems"] = problems
    report["interrupted"] = interrupted
    if report["code"]["dirty"]:
        log(f"note: the node code had uncommitted changes: {report['code']['dirty']}")
    return finish("claims", report, root, interrupted, args.keep)


if __name__ == "__main__":
    sys.exit(main())
