"""Fire lateness: when is a due run key committed, against its scheduled instant; with APScheduler
3.x in one process as the baseline, in the same run.

    python -m bench fire_lateness            # steady 1,000 jobs over 60 s; herd 20,000 x 3; APScheduler x 2 each
    python -m bench fire_lateness --quick    # steady over 20 s; herd 2,000 x 1; APScheduler x 1 each

What is measured, exactly: **claim-committed minus scheduled**, where "committed" is the moment
the leader had applied the Raft entry holding the claim (the run is in its state). The leader's
`ClusterService.Status` is polled every 5 ms; each run record's `claim_index` (the index of the
entry that claimed it) is mapped to the first poll that saw `applied_index >= claim_index`, and
the time is the midpoint between the previous poll's send and that poll's answer (about +-3 ms,
plus one Status round trip). `claimed_at` in the records is not used for this: it is the
`issued_at` of the ClaimRuns command (when the leader started the pass), not the commit.

1. **steady**: 1,000 jobs `S * * * * *` (pinned), job i at second i mod 60 (about 17 due each
   second), for one minute (20 s with --quick): every slot of the window, p50/p99/max.
2. **herd**: N jobs pinned to one whole second T (the claims benchmark's setup): p50/p99/max
   and the time until the last key is committed.
3. **APScheduler 3.x baseline**: one process (BackgroundScheduler, default executor: a pool of
   10 threads, default job store in memory), the same N jobs as `CronTrigger`s at T, each a
   no-op recording when it started. Lateness = start of the job function minus T (APScheduler
   has no claim: running is its only record). Once with the default misfire grace (1 s: later
   jobs are not run, only an EVENT_JOB_MISSED and a log line; counted as "silently missed") and
   once with `misfire_grace_time=None` (unlimited).
4. **periodic appends baseline**: the steady phase again on a cluster with `raft.eager_append:
   false`, where the leader sends new entries only every append period (pysyncobj's own way),
   to show what sending them at the end of the tick that appended them buys.

Checks (exit 1): every slot claimed exactly once, replica digests equal, no CRITICAL or
"truncating already-applied" line in node logs. Output: bench/out/fire_lateness.json.
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
import traceback
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bench._harness.cluster import apply_specs, bench_cluster, instant_ahead, list_runs, ts_s, yearly_schedule
from bench._harness.common import (
    PortAllocator,
    fmt,
    load_average,
    local_cluster_ports,
    median,
    percentile,
    print_table,
    raise_on_sigterm,
)
from bench._harness.poller import StatusPoller, index_times
from bench._harness.report import bench_parser, finish, log, new_report
from scheduler.core.model import JobSpec


def stats_ms(values: list[float]) -> dict:
    return {
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values, default=None),
        "min": min(values, default=None),
        "count": len(values),
    }


def lateness_of(runs: list, poller: StatusPoller) -> tuple[list[float], int]:
    """Commit minus scheduled (ms) per run, and how many runs could not be mapped to a poll."""
    when = index_times(poller.applied_times())
    values, unmapped = [], 0
    for r in runs:
        t = when(r.claim_index)
        if t is None:
            unmapped += 1
        else:
            values.append((t - ts_s(r.scheduled_at)) * 1000)
    return values, unmapped


# -- raftcron ---------------------------------------------------------------------------------------
def run_steady(cluster, client, poller, window_s: float) -> dict:
    out: dict = {"jobs": 1000, "window_s": window_s, "problems": []}
    specs = [
        JobSpec(
            id=f"steady-{i:04d}",
            schedule=f"{i % 60} * * * * *",
            target_kind="handler",
            target="bench.noop",
            jitter="pinned",
        )
        for i in range(1000)
    ]
    apply_specs(client, specs)
    start = instant_ahead(3.0)
    end = start + timedelta(seconds=window_s)
    log(f"steady: 1,000 jobs, measuring slots in [{start:%H:%M:%S}, {end:%H:%M:%S})Z")
    while time.time() < end.timestamp() + 2.0:
        time.sleep(0.2)
    runs = [r for r in list_runs(client, start, end) if r.job_id.startswith("steady-")]
    expected = sum(1 for i in range(1000) for s in range(int(window_s)) if (start.second + s) % 60 == i % 60)
    keys = Counter((r.job_id, r.scheduled_at.seconds) for r in runs)
    if len(runs) != expected or any(c > 1 for c in keys.values()):
        out["problems"].append(f"steady: {len(runs)} runs in the window, expected {expected} (one per slot)")
    values, unmapped = lateness_of(runs, poller)
    out.update(runs=len(runs), expected=expected, unmapped=unmapped, lateness_ms=stats_ms(values))
    log(
        f"steady: {len(runs)} slots: commit - scheduled p50/p99/max {fmt(out['lateness_ms']['p50'])}/"
        f"{fmt(out['lateness_ms']['p99'])}/{fmt(out['lateness_ms']['max'])} ms"
    )
    return out


def run_herd(cluster, client, poller, n: int, rep: int) -> dict:
    out: dict = {"jobs": n, "rep": rep, "problems": []}
    far = instant_ahead(180 * 86400)

    def specs(schedule: str) -> list[JobSpec]:
        return [
            JobSpec(id=f"herd-{i:06d}", schedule=schedule, target_kind="handler", target="bench.noop", jitter="pinned")
            for i in range(n)
        ]

    apply_s = apply_specs(client, specs(yearly_schedule(far)))
    at = instant_ahead(max(5.0, 2 * apply_s + 3))
    apply_specs(client, specs(yearly_schedule(at)))
    log(f"herd rep {rep}: {n} jobs due at {at:%H:%M:%S}Z ({at.timestamp() - time.time():.1f}s ahead)")
    deadline = at.timestamp() + 60
    time.sleep(max(0.0, at.timestamp() + 1.5 - time.time()))
    herd_runs = lambda: [r for r in list_runs(client, at, at + timedelta(seconds=1)) if r.job_id.startswith("herd-")]  # noqa: E731
    runs = herd_runs()
    while len(runs) < n and time.time() < deadline:
        time.sleep(1.0)
        runs = herd_runs()
    ids = Counter(r.job_id for r in runs)
    if len(runs) != n or len(ids) != n:
        out["problems"].append(f"herd rep {rep}: {len(runs)} runs for {n} jobs ({len(ids)} distinct)")
    values, unmapped = lateness_of(runs, poller)
    out.update(
        runs=len(runs),
        unmapped=unmapped,
        lateness_ms=stats_ms(values),
        claim_entries=len({r.claim_index for r in runs}),
        claimed_at_minus_T_ms=stats_ms([(ts_s(r.claimed_at) - at.timestamp()) * 1000 for r in runs]),
    )
    out["s_to_last_key"] = out["lateness_ms"]["max"] / 1000 if values else None
    log(
        f"herd rep {rep}: commit - T p50/p99/max {fmt(out['lateness_ms']['p50'])}/{fmt(out['lateness_ms']['p99'])}/"
        f"{fmt(out['lateness_ms']['max'])} ms in {out['claim_entries']} entries"
    )
    return out


def run_raftcron(
    root: Path,
    port_base: int,
    n: int,
    reps: int,
    steady_s: float,
    overrides: dict | None = None,
    name: str = "lateness",
) -> dict:
    out: dict = {"problems": [], "herd": [], "load_before": load_average(), "overrides": overrides or {}}
    with bench_cluster(root, port_base, overrides=overrides, out=out, name=name) as cluster:
        client = cluster.client(timeout_s=60.0)
        leader = cluster.leader() or out["leader_at_start"]
        poller = StatusPoller(cluster, leader, period_s=0.005, max_s=1800).start()
        try:
            time.sleep(0.2)
            out["steady"] = run_steady(cluster, client, poller, steady_s)
            out["problems"] += out["steady"].pop("problems")
            # Pause the steady jobs (their slots are then recorded as missed) so the herd has the cluster.
            apply_specs(
                client,
                [
                    JobSpec(
                        id=f"steady-{i:04d}",
                        schedule=f"{i % 60} * * * * *",
                        target_kind="handler",
                        target="bench.noop",
                        jitter="pinned",
                        paused=True,
                    )
                    for i in range(1000)
                ],
            )
            for rep in range(1, reps + 1):
                result = run_herd(cluster, client, poller, n, rep)
                out["problems"] += result.pop("problems")
                out["herd"].append(result)
            out["poll_errors"] = poller.errors
            if poller.errors:
                out["problems"].append(f"{poller.errors} Status polls of the leader failed")
            out["poll_rtt_ms_p99"] = percentile([(r - s) * 1000 for s, r, _ in poller.snapshot()], 99)
        finally:
            poller.stop()
            client.close()
    out["load_after"] = load_average()
    return out


# -- APScheduler --------------------------------------------------------------------------------------
def _aps_main(n: int, at_ts: float, grace, results) -> None:
    import logging
    import threading

    from apscheduler.events import EVENT_JOB_MISSED
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger

    logging.basicConfig(level=logging.ERROR)  # its "missed by" warnings: counted below instead
    at = datetime.fromtimestamp(at_ts, timezone.utc)
    started: list[float] = []
    missed = [0]
    lock = threading.Lock()

    def job() -> None:
        started.append(time.time())

    def on_missed(event) -> None:
        with lock:
            missed[0] += 1

    defaults = {} if grace == "default" else {"misfire_grace_time": None}
    scheduler = BackgroundScheduler(timezone=timezone.utc, job_defaults=defaults)
    scheduler.add_listener(on_missed, EVENT_JOB_MISSED)
    t0 = time.time()
    trigger = dict(second=at.second, minute=at.minute, hour=at.hour, day=at.day, month=at.month, timezone=timezone.utc)
    for i in range(n):
        scheduler.add_job(job, CronTrigger(**trigger), id=f"herd-{i:06d}")
    scheduler.start()
    add_s = time.time() - t0
    stop_at = at_ts + 120
    while time.time() < stop_at and len(started) + missed[0] < n:
        time.sleep(0.05)
    time.sleep(0.5)
    scheduler.shutdown(wait=False)
    results.put(
        {
            "started": started,
            "missed": missed[0],
            "add_s": add_s,
            "defaults": scheduler._job_defaults if hasattr(scheduler, "_job_defaults") else {},
        }
    )


def run_apscheduler(n: int, grace: str) -> dict:
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    at = instant_ahead(6.0 + n / 4000)
    process = ctx.Process(target=_aps_main, args=(n, at.timestamp(), grace, results), daemon=True)
    try:
        process.start()
        got = results.get(timeout=240)
    finally:
        process.join(10)
        if process.is_alive():
            process.kill()
    values = [(t - at.timestamp()) * 1000 for t in got["started"]]
    out = {
        "grace": grace,
        "jobs": n,
        "ran": len(values),
        "missed_events": got["missed"],
        "silently_missed": n - len(values),
        "lateness_ms": stats_ms(values),
        "add_s": got["add_s"],
        "defaults": {k: str(v) for k, v in got["defaults"].items()},
    }
    log(
        f"APScheduler grace={grace}: ran {len(values)}/{n} (missed {got['missed']}); start - T p50/p99/max "
        f"{fmt(out['lateness_ms']['p50'])}/{fmt(out['lateness_ms']['p99'])}/{fmt(out['lateness_ms']['max'])} ms"
    )
    return out


# -- report ---------------------------------------------------------------------------------------
def summarize(report: dict) -> list[list]:
    rows = []
    rc = report.get("raftcron", {})
    st = rc.get("steady")
    if st:
        lm = st["lateness_ms"]
        rows.append(
            [
                f"raftcron steady ({st['runs']} slots, 1,000 jobs over a minute): commit - scheduled ms",
                lm["p50"],
                lm["p99"],
                lm["max"],
                "",
                "0",
            ]
        )
    periodic = report.get("periodic", {}).get("steady")
    if periodic:
        lm = periodic["lateness_ms"]
        rows.append(
            [
                f"  same, periodic appends (raft.eager_append false; {periodic['runs']} slots)",
                lm["p50"],
                lm["p99"],
                lm["max"],
                "",
                "0",
            ]
        )
    herd = rc.get("herd", [])
    if herd:
        n = herd[0]["jobs"]
        med = lambda key: median([h["lateness_ms"][key] for h in herd])  # noqa: E731
        rows.append(
            [
                f"raftcron herd ({n:,} pinned, median of {len(herd)}): commit - T ms",
                med("p50"),
                med("p99"),
                med("max"),
                " ".join(fmt(h["lateness_ms"]["p99"]) for h in herd),
                str(sum(n - h["runs"] for h in herd)),
            ]
        )
    for key, label in (
        ("default", "APScheduler 3.x default grace (1 s)"),
        ("unlimited", "APScheduler 3.x grace unlimited"),
    ):
        reps = report.get("apscheduler", {}).get(key, [])
        if reps:
            med = lambda k: median([r["lateness_ms"][k] for r in reps])  # noqa: E731
            rows.append(
                [
                    f"{label} ({reps[0]['jobs']:,} jobs, median of {len(reps)}): job start - T ms",
                    med("p50"),
                    med("p99"),
                    med("max"),
                    " ".join(fmt(r["lateness_ms"]["p99"]) for r in reps),
                    " ".join(str(r["silently_missed"]) for r in reps),
                ]
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("fire_lateness", __doc__, port_base=7850)
    parser.add_argument("--jobs", type=int, help="herd size (20,000; 2,000 with --quick)")
    parser.add_argument("--reps", type=int, help="herd repetitions (3; 1 with --quick)")
    parser.add_argument("--steady", type=float, help="seconds of steady slots measured (60; 20 with --quick)")
    parser.add_argument("--aps-reps", type=int, help="APScheduler runs per grace setting (2; 1 with --quick)")
    args = parser.parse_args(argv)
    quick = args.quick
    n = args.jobs or (2_000 if quick else 20_000)
    reps = args.reps or (1 if quick else 3)
    steady_s = args.steady or (20.0 if quick else 60.0)
    aps_reps = args.aps_reps or (1 if quick else 2)
    raise_on_sigterm()
    root = Path(tempfile.mkdtemp(prefix="raftcron-bench-lateness-"))
    ports = PortAllocator(args.port_base, step=10, limit=100)
    report = new_report("fire_lateness", quick, apscheduler={})
    interrupted = False
    try:
        import apscheduler

        report["apscheduler_version"] = apscheduler.__version__ if hasattr(apscheduler, "__version__") else "?"
    except ImportError:
        report["problems"].append('APScheduler is not installed: pip install "apscheduler<4"')
    try:
        report["raftcron"] = run_raftcron(root, ports.take(local_cluster_ports), n, reps, steady_s)
        report["problems"] += report["raftcron"]["problems"]
        report["periodic"] = run_raftcron(
            root,
            ports.take(local_cluster_ports),
            n,
            0,
            steady_s,
            overrides={"raft": {"eager_append": False}},
            name="periodic",
        )
        report["problems"] += report["periodic"]["problems"]
        if "apscheduler_version" in report:
            for _ in range(aps_reps):
                for grace in ("default", "unlimited"):
                    report["apscheduler"].setdefault(grace, []).append(run_apscheduler(n, grace))
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: every cluster and process was stopped")
    except Exception as exc:
        report["problems"].append(f"fire_lateness: {exc!r}")
        log(traceback.format_exc())
    rows = summarize(report)
    report["table"] = print_table(
        ["figure", "p50", "p99", "max", "p99 per run", "missed"],
        rows,
        title="fire_lateness: 3 nodes on loopback vs APScheduler 3.x in one process",
    )
    herd = report.get("raftcron", {}).get("herd", [])
    aps = report["apscheduler"].get("default", [])
    if herd and aps:
        ours = median([h["lateness_ms"]["p99"] for h in herd])
        theirs = median([r["lateness_ms"]["p99"] for r in aps])
        if ours and theirs:
            report["herd_p99_vs_apscheduler_default_p99"] = ours / theirs
            print(
                f"herd p99: raftcron / APScheduler (default grace) = {ours / theirs:.2f} "
                f"(target: 0.33 or less, and every key within 1,000 ms)"
            )
    return finish("fire_lateness", report, root, interrupted, args.keep)


if __name__ == "__main__":
    sys.exit(main())
