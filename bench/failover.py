"""Failover: SIGKILL the leader under load, repeatedly; how long until the cluster fires again.

    python -m bench failover            # 10 kills, 200 every-second jobs among a million, 2 workers x 64
    python -m bench failover --quick    # 3 kills, 100 jobs, no other state
    python -m bench failover --state-jobs 0   # the first round's figure: the 200 jobs alone

Load: L jobs `* * * * * *` (every second) with an explicit `jitter: 1s` window, so their runs
become due spread over each second (fires are then a near-continuous stream and a gap stands
out), handler `bench.noop`, run by 2 worker processes (the SDK's Worker, concurrency 64).
The node settings are the defaults (election timeout 0.5-1.5 s). With `--state-jobs N`
(1,000,000 unless --quick: the million-job target's state), N jobs of `bench scale`'s realistic
mix are applied first, so each new leader opens its epoch and builds its due index over a large
state before it can claim. The target line (median at most 1 s, worst 2 s) is printed last.

Each repetition: both other nodes are polled (Status every 10 ms); the leader is SIGKILLed at
K; then, measured from K:
- **new leader**: the first poll in which a survivor says it is the Raft leader; **ready**: it
  has also applied its own ClaimLeadership entry (Status.ready, the epoch is open, its loops run);
- **first committed claim**: the run with the smallest claim_index among runs claimed after K
  (claimed_at > K, so by the new leader), committed when the new leader's applied_index reached
  that index (polled);
- **first granted lease**: the attempt with the smallest fencing token among attempts started
  after K, committed likewise;
- **longest gap in firing**: the longest interval between two consecutive lease grants
  (attempt started_at, all jobs) from 5 s before K to 10 s after; for reference, the same
  figure in the warm-up before the first kill.
The killed node is then restarted and must catch up (its time to catch up is recorded) before
the next repetition.

Checks (exit 1): every job has exactly one run per second over the whole measured span (no slot
lost, none doubled), replica digests equal at the end, no CRITICAL or "truncating
already-applied" line in node logs. Output: bench/out/failover.json.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

from bench._harness.cluster import apply_specs, bench_cluster, list_runs, ts_s
from bench._harness.common import (
    PortAllocator,
    fmt,
    load_average,
    local_cluster_ports,
    median,
    print_table,
    raise_on_sigterm,
)
from bench._harness.fleet import WorkerFleet
from bench._harness.poller import StatusPoller, index_times
from bench._harness.report import bench_parser, finish, log, new_report
from bench.scale import APPLY_CALLERS, realistic_specs
from scheduler.core.model import JobSpec
from worker.api.v1 import common_pb2

# How long a restarted node may take to catch up before the run stops killing. With a million
# jobs and no snapshot on disk yet it replays its whole journal (17-26 s under this load), and a
# restart during the leader's compaction also waits for that snapshot (over 60 s once).
CATCH_UP_LIMIT_S = 300.0


def longest_gap(times: list[float], start: float, end: float) -> tuple[float, float | None]:
    inside = sorted(t for t in times if start <= t <= end)
    best, at = 0.0, None
    for a, b in zip(inside, inside[1:]):
        if b - a > best:
            best, at = b - a, a
    return best, at


def run(root: Path, port_base: int, jobs: int, kills: int, workers: int, concurrency: int, state_jobs: int = 0) -> dict:
    out: dict = {
        "jobs": jobs,
        "kills": kills,
        "state_jobs": state_jobs,
        "reps": [],
        "problems": [],
        "load_before": load_average(),
    }
    with bench_cluster(root, port_base, out=out, name="failover") as cluster:
        client = cluster.client(timeout_s=120.0 if state_jobs else 30.0)
        fleet = WorkerFleet(cluster, root / f"failover-workers-{port_base}")
        try:
            if state_jobs:  # the state a new leader takes over: every job is in its due index
                started = time.monotonic()
                apply_specs(client, realistic_specs(state_jobs), callers=APPLY_CALLERS)
                out["state_apply_s"] = time.monotonic() - started
                log(f"failover: {state_jobs:,} realistic jobs applied in {out['state_apply_s']:.1f}s")
            specs = [
                JobSpec(
                    id=f"fo-{i:04d}", schedule="* * * * * *", target_kind="handler", target="bench.noop", jitter="1s"
                )
                for i in range(jobs)
            ]
            apply_specs(client, specs)
            fleet.start(workers, concurrency, "bench.noop", max_life_s=120 + kills * 60)
            fleet.wait_ready(60)
            warm_start = time.time()
            time.sleep(6.0)
            out["warmup"] = (warm_start + 1, time.time())
            for rep in range(1, kills + 1):
                out["reps"].append(kill_once(cluster, rep))
                if "problem" in out["reps"][-1]:  # the next kill would find two nodes, one behind
                    out["problems"].append(f"rep {rep}: {out['reps'][-1]['problem']}; no further kills")
                    break
            out["span"] = (warm_start, time.time())
            time.sleep(2.0)
        finally:
            fleet.stop()
            bad = fleet.log_problems()
            if bad:
                out["problems"].append(f"worker logs: {bad[:2]}")
        analyse(client, out)
        client.close()
    out["load_after"] = load_average()
    return out


def kill_once(cluster, rep: int) -> dict:
    leader = cluster.leader()
    if leader is None:
        leader = cluster.wait_for_leader(30)
    survivors = [m.node_id for m in cluster.members if m.node_id != leader]
    pollers = {node: StatusPoller(cluster, node, period_s=0.01, max_s=120).start() for node in survivors}
    result: dict = {"rep": rep, "killed": leader}
    try:
        time.sleep(0.5)
        K = time.time()
        cluster.kill(leader, signal.SIGKILL)
        result["K"] = K
        new = cluster.wait_for_leader(30, exclude=(leader,))
        time.sleep(3.0)  # load resumes; the polls record it
        result["new_leader"] = new
        poller = pollers[new]
        elected = poller.time_when(lambda s: s.role == "leader")
        ready = poller.time_when(lambda s: s.role == "leader" and s.ready and s.leader == new)
        result["s_to_raft_leader"] = elected - K if elected else None
        result["s_to_ready"] = ready - K if ready else None
        result["applied_steps"] = poller.applied_times()
        # Restart the killed node; it must catch up before the next kill.
        restart_at = time.time()
        target = cluster.status(new).commit_index
        cluster.start(leader)

        def caught_up():
            status = cluster.status(leader)
            return status is not None and status.applied_index >= target and status.ready

        deadline = time.time() + CATCH_UP_LIMIT_S
        while not caught_up():
            if time.time() > deadline:
                result["problem"] = f"restarted {leader} did not catch up within {CATCH_UP_LIMIT_S:.0f}s"
                break
            time.sleep(0.05)
        else:
            result["s_restart_to_caught_up"] = time.time() - restart_at
            time.sleep(1.5)
    finally:
        for poller in pollers.values():
            poller.stop()
    log(
        f"failover rep {rep}: killed {leader}; {result['new_leader']} raft leader after {fmt(result['s_to_raft_leader'])}s, "
        f"ready after {fmt(result['s_to_ready'])}s; restarted node caught up in {fmt(result.get('s_restart_to_caught_up'))}s"
    )
    return result


def analyse(client, out: dict) -> None:
    start, end = out["span"]
    since = datetime.fromtimestamp(int(start) + 2, timezone.utc)
    until = datetime.fromtimestamp(int(end) - 3, timezone.utc)
    runs = [r for r in list_runs(client, since, until) if r.job_id.startswith("fo-")]
    by_job: dict[str, list[int]] = defaultdict(list)
    for r in runs:
        by_job[r.job_id].append(r.scheduled_at.seconds)
    expected = int(until.timestamp()) - int(since.timestamp())
    lost = sum(max(0, expected - len(set(v))) for v in by_job.values()) + expected * (out["jobs"] - len(by_job))
    doubled = sum(len(v) - len(set(v)) for v in by_job.values())
    statuses = Counter(common_pb2.RunStatus.Name(r.status) for r in runs)
    out.update(
        runs_checked=len(runs),
        slots_expected=expected * out["jobs"],
        slots_lost=lost,
        slots_doubled=doubled,
        statuses=dict(statuses),
        multi_attempt_runs=sum(1 for r in runs if len(r.attempts) > 1),
    )
    if lost or doubled:
        out["problems"].append(
            f"failover: {lost} slots without a run, {doubled} doubled, in {since:%H:%M:%S}-{until:%H:%M:%S}Z"
        )
    grants = [(ts_s(a.started_at), a.fencing_token) for r in runs for a in r.attempts]
    claims = [(ts_s(r.claimed_at), r.claim_index) for r in runs]
    grant_times = [t for t, _ in grants]
    w0, w1 = out["warmup"]
    out["warmup_longest_fire_gap_s"] = longest_gap(grant_times, w0, w1)[0]
    for rep in out["reps"]:
        K = rep["K"]
        when = index_times([tuple(x) for x in rep.pop("applied_steps")])
        after = [c for c in claims if c[0] > K]
        if after:
            index = min(i for _, i in after)
            t = when(index)
            rep["s_to_first_claim"] = (t - K) if t else min(c[0] for c in after) - K
        granted = [g for g in grants if g[0] > K]
        if granted:
            token = min(tok for _, tok in granted)
            t = when(token)
            rep["s_to_first_lease"] = (t - K) if t else min(g[0] for g in granted) - K
        gap, gap_at = longest_gap(grant_times, K - 5, K + 10)
        rep["longest_fire_gap_s"] = gap
        rep["gap_starts_s_after_K"] = gap_at - K if gap_at else None
        log(
            f"failover rep {rep['rep']}: first claim {fmt(rep.get('s_to_first_claim'))}s, first lease "
            f"{fmt(rep.get('s_to_first_lease'))}s, longest gap in firing {fmt(gap)}s"
        )


def summarize(out: dict) -> list[list]:
    rows = []
    reps = out.get("reps", [])

    def add(label, key):
        values = [r.get(key) for r in reps if r.get(key) is not None]
        if values:
            rows.append([label, median(values), max(values), " ".join(fmt(v) for v in values)])

    add("s from SIGKILL to a new Raft leader", "s_to_raft_leader")
    add("s from SIGKILL to the new leader ready (epoch open)", "s_to_ready")
    add("s from SIGKILL to first committed claim", "s_to_first_claim")
    add("s from SIGKILL to first granted lease", "s_to_first_lease")
    add("longest gap in firing (lease grants), s", "longest_fire_gap_s")
    add("restarted node: s to caught up", "s_restart_to_caught_up")
    if "warmup_longest_fire_gap_s" in out:
        rows.append(["  reference: longest gap in firing without a kill, s", out["warmup_longest_fire_gap_s"], "", ""])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("failover", __doc__, port_base=7900)
    parser.add_argument("--kills", type=int, help="repetitions (10; 3 with --quick)")
    parser.add_argument("--jobs", type=int, help="every-second jobs (200; 100 with --quick)")
    parser.add_argument(
        "--state-jobs",
        type=int,
        default=None,
        help="first apply this many jobs of the realistic mix (bench scale --mix realistic), so every "
        "new leader takes over a large state (1,000,000: the million-job target; 0 with --quick)",
    )
    args = parser.parse_args(argv)
    kills = args.kills or (3 if args.quick else 10)
    jobs = args.jobs or (100 if args.quick else 200)
    if args.state_jobs is None:
        args.state_jobs = 0 if args.quick else 1_000_000
    raise_on_sigterm()
    root = Path(tempfile.mkdtemp(prefix="raftcron-bench-failover-"))
    ports = PortAllocator(args.port_base, step=10, limit=50)
    report = new_report("failover", args.quick)
    interrupted = False
    try:
        report["result"] = run(root, ports.take(local_cluster_ports), jobs, kills, 2, 64, args.state_jobs)
        report["problems"] += report["result"]["problems"]
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: every cluster and process was stopped")
    except Exception as exc:
        report["problems"].append(f"failover: {exc!r}")
        log(traceback.format_exc())
    rows = summarize(report.get("result", {}))
    report["table"] = print_table(
        ["figure", "median", "max", "runs"],
        rows,
        title=f"failover: SIGKILL the leader x{kills}, {jobs} every-second jobs"
        + (f" among {args.state_jobs:,} jobs" if args.state_jobs else "")
        + ", 2 workers x 64",
    )
    report["summary"] = {r[0]: {"median": r[1], "max": r[2]} for r in rows}
    res = report.get("result", {})
    claims = [r["s_to_first_claim"] for r in res.get("reps", []) if r.get("s_to_first_claim") is not None]
    if claims:
        # The target of ten times the work (bench/RESULTS.md), held with any state size.
        mid, worst = median(claims), max(claims)
        verdict = "met" if mid <= 1.0 and worst <= 2.0 else "NOT met"
        print(
            f"target: SIGKILL to first committed claim median <= 1 s, worst <= 2 s: median {mid:.3f} s "
            f"({mid / 1.0:.2f} of the limit), worst {worst:.3f} s ({worst / 2.0:.2f} of the limit): {verdict}"
        )
        report["target_first_claim"] = {"median_s": mid, "worst_s": worst, "met": verdict == "met"}
    if res:
        print(
            f"slots checked {res.get('runs_checked')}: lost {res.get('slots_lost')}, doubled {res.get('slots_doubled')}, "
            f"runs with more than one attempt {res.get('multi_attempt_runs')}"
        )
    return finish("failover", report, root, interrupted, args.keep)


if __name__ == "__main__":
    sys.exit(main())
