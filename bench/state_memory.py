"""State memory: what one replica's state costs per job and per finished run, in-process.

    python -m bench state_memory            # 100,000 jobs; 1,000 jobs x 1,000 finished runs
    python -m bench state_memory --quick    # 20,000 jobs; 200 jobs x 1,000 finished runs

A replica's state is built the way a follower builds it: every command is encoded, decoded and
applied (`ClaimLeadership`, `ApplyJobs` in entries of 2,000 jobs, then per batch of runs a
`ClaimRuns`, a `GrantLeases` and a `CompleteRuns`), so every run ends SUCCEEDED with one attempt
and is retained (the jobs keep 1,000 runs each). The resident set (VmRSS) is read before and
after each phase; Python keeps freed memory in its arenas, so these are the figures a node
would show, not a lower bound. Beside them, the same state's snapshot size.

This is the state alone: a node adds its interpreter, gRPC, pysyncobj's in-memory journal
(until a compaction) and the leader's queues (`python -m bench scale` measures whole nodes).
Checks (exit 1): every run SUCCEEDED; a snapshot decodes to the same digest.
Output: bench/out/state_memory.json.
"""

from __future__ import annotations

import gc
import os
import sys
import time

from bench._harness.common import fmt, print_table
from bench._harness.report import bench_parser, finish_in_process, log, new_report
from scheduler.core import State, apply, decode_command, decode_snapshot, encode_command, encode_snapshot, state_digest
from scheduler.core.commands import (
    ApplyJobs,
    ClaimLeadership,
    ClaimRuns,
    CompleteRuns,
    Completion,
    GrantLeases,
    JobUpsert,
    LeaseRef,
    RunRef,
    SlotClaim,
)
from scheduler.core.model import SECOND_US, SUCCEEDED, JobSpec
from scheduler.local import rss_kib

T0_US = 1_800_000_000 * SECOND_US
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney")


class Replica:
    """A State fed encoded commands, as a follower applies its log."""

    def __init__(self) -> None:
        self.state = State()
        self.index = 0

    def apply(self, command) -> None:
        self.index += 1
        result = apply(self.state, decode_command(encode_command(command)), self.index)
        if not result.accepted:
            raise RuntimeError(f"{type(command).__name__} rejected: {result.rejection}")


def job_spec(n: int, schedule: str | None = None) -> JobSpec:
    return JobSpec(
        id=f"job-{n:06d}",
        schedule=schedule or f"{n % 60} {n // 60 % 24} * * *",
        target_kind="handler",
        target=f"team{n % 50}.task",
        timezone=ZONES[n % len(ZONES)],
        owner=f"team{n % 50}",
        job_class="batch",
        jitter="pinned",
    )


def add_jobs(replica: Replica, specs: list[JobSpec], next_due_us: int) -> None:
    for start in range(0, len(specs), 2_000):
        upserts = tuple(JobUpsert(spec, 0, next_due_us) for spec in specs[start : start + 2_000])
        replica.apply(ApplyJobs(issued_at_us=replica.state.now_us, author="bench", request_id="", upserts=upserts))


def run_jobs(replica: Replica, job_ids: list[str], runs_each: int) -> None:
    """Every job fires every second: claim, lease and complete each slot, one batch per second."""
    for k in range(1, runs_each + 1):
        slot_us = T0_US + k * SECOND_US
        epoch = replica.state.epoch
        claims = tuple(SlotClaim(job_id, slot_us, slot_us + SECOND_US, 1) for job_id in job_ids)
        replica.apply(ClaimRuns(issued_at_us=slot_us, epoch=epoch, claims=claims, monotonic_us=slot_us))
        grant_index = replica.index + 1
        refs = tuple(RunRef(job_id, slot_us) for job_id in job_ids)
        replica.apply(
            GrantLeases(
                issued_at_us=slot_us + 1,
                epoch=epoch,
                grants=refs,
                worker_id="w1",
                lease_ttl_us=10 * SECOND_US,
                monotonic_us=slot_us + 1,
            )
        )
        completions = tuple(
            Completion(lease=LeaseRef(job_id, slot_us, grant_index), worker_id="w1", outcome="success")
            for job_id in job_ids
        )
        replica.apply(CompleteRuns(issued_at_us=slot_us + 2, completions=completions))


def measure(n_jobs: int, run_jobs_count: int, runs_each: int) -> dict:
    out: dict = {"jobs": n_jobs, "run_jobs": run_jobs_count, "runs_each": runs_each, "problems": []}
    replica = Replica()
    replica.apply(ClaimLeadership(issued_at_us=T0_US, node_id="n1", term=1, monotonic_us=T0_US))
    gc.collect()
    base = rss_kib(os.getpid())
    started = time.monotonic()
    add_jobs(replica, [job_spec(n) for n in range(n_jobs)], T0_US + 86_400 * SECOND_US)
    gc.collect()
    out["jobs_s"] = time.monotonic() - started
    out["kib_jobs"] = rss_kib(os.getpid()) - base
    log(f"state_memory: {n_jobs:,} jobs: +{out['kib_jobs'] / 1024:.1f} MiB")
    firing = [job_spec(n_jobs + n, schedule="* * * * * *") for n in range(run_jobs_count)]
    add_jobs(replica, firing, T0_US + SECOND_US)
    gc.collect()
    before_runs = rss_kib(os.getpid())
    started = time.monotonic()
    run_jobs(replica, [spec.id for spec in firing], runs_each)
    gc.collect()
    out["runs_s"] = time.monotonic() - started
    out["runs"] = replica.state.run_count
    out["kib_runs"] = rss_kib(os.getpid()) - before_runs
    log(f"state_memory: {out['runs']:,} finished runs: +{out['kib_runs'] / 1024:.1f} MiB in {out['runs_s']:.0f}s")
    statuses = {run.status for runs in replica.state.runs.values() for run in runs}
    if statuses != {SUCCEEDED}:
        out["problems"].append(f"run statuses {sorted(statuses)}, expected only succeeded")
    started = time.monotonic()
    snapshot = encode_snapshot(replica.state)
    out["snapshot_bytes"], out["snapshot_encode_s"] = len(snapshot), time.monotonic() - started
    if state_digest(decode_snapshot(snapshot)) != state_digest(replica.state):
        out["problems"].append("a decoded snapshot has another digest")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("state_memory", __doc__, keep=False)
    args = parser.parse_args(argv)
    n_jobs, run_jobs_count = (20_000, 200) if args.quick else (100_000, 1_000)
    measured = measure(n_jobs, run_jobs_count, 1_000)
    rows = [
        [
            f"state of {n_jobs:,} jobs (MiB)",
            fmt(measured["kib_jobs"] / 1024),
            f"{measured['kib_jobs'] * 1024 / n_jobs:,.0f} B per job",
        ],
        [
            f"+ {measured['runs']:,} finished runs, one attempt each (MiB)",
            fmt(measured["kib_runs"] / 1024),
            f"{measured['kib_runs'] * 1024 / max(1, measured['runs']):,.0f} B per run",
        ],
        [
            "snapshot, encoded, before pysyncobj gzips it (MB)",
            fmt(measured["snapshot_bytes"] / 1e6),
            f"encoded in {fmt(measured['snapshot_encode_s'])} s",
        ],
    ]
    report = new_report("state_memory", args.quick, measured=measured, problems=measured["problems"])
    report["table"] = print_table(
        ["figure", "value", "detail"], rows, title="state_memory: one replica's state, in-process"
    )
    return finish_in_process("state_memory", report)


if __name__ == "__main__":
    sys.exit(main())
