"""Planning cost of 100,000 jobs: plain cron against a mix with the day modifiers and calendars,
in one process and one run (no cluster: this is the leader's and the apply's CPU work).

    python -m bench planning            # 100,000 jobs per mix, median of 3 repetitions
    python -m bench planning --quick    # 10,000 jobs, 1 repetition

Two mixes of the same size and ids:
1. **plain**: 20 common cron expressions (every 5 minutes to yearly) in UTC, Europe/Berlin and
   America/New_York (a third each).
2. **mixed**: the same, but a fifth of the jobs use L, LW, W, d#k or dL, and a tenth skip a
   holiday calendar (US federal holidays of three years, moved to the previous business day).

Two figures each, from the same instant: the **apply** (each job's first due slot, as a servicer
plans an ApplyJobs) and the **leader pass** (each job's due slots planned at its instant, as the
trigger loop does, calendar jobs through their calendar). The next-slot memo is cleared before
every repetition, so repetitions do not measure each other's answers. Output:
bench/out/planning.json.
"""

from __future__ import annotations

import sys
import time

from bench._harness.common import median, print_table
from bench._harness.report import bench_parser, finish_in_process, log, new_report
from scheduler.core.model import Calendar, CalendarRule, Job, JobSpec
from scheduler.leader.planner import plan_calendar_due_slots, plan_due_slots
from scheduler.planning import parse_iso_to_us
from scheduler.planning.jobs import first_due_after, next_slot_after

START_US = parse_iso_to_us("2027-01-01T00:00:00Z")
ZONES = ("UTC", "Europe/Berlin", "America/New_York")
PLAIN = (
    "*/5 * * * *", "0 * * * *", "15 * * * *", "0 */6 * * *", "0 0 * * *", "30 2 * * *", "0 9 * * 1-5",
    "0 18 * * 1-5", "0 12 * * 6", "0 0 * * 0", "0 8 1 * *", "0 0 15 * *", "0 6 1 1 *", "45 23 * * *",
    "0 3 * * 2,4", "10 */2 * * *", "0 7 * * 1", "0 0 1 */3 *", "5 4 * * *", "0 22 * * 5",
)  # fmt: skip
MODIFIERS = ("0 0 L * *", "0 9 LW * *", "0 9 15W * *", "0 10 * * 5#3", "0 18 * * 5L", "0 6 L-2 * *")
BANK = "us-bank-holidays"


def bank_calendar() -> Calendar:
    """US federal holidays of 2027-2029 as explicit dates (what a replica holds)."""
    import holidays

    dates = sorted(str(day) for year in (2027, 2028, 2029) for day in holidays.country_holidays("US", years=year))
    return Calendar(BANK, tuple(dates))


def specs_of(mix: str, n: int) -> list[JobSpec]:
    specs = []
    for i in range(n):
        zone = ZONES[i % len(ZONES)]
        schedule, calendar = PLAIN[i % len(PLAIN)], None
        if mix == "mixed" and i % 5 == 1:
            schedule = MODIFIERS[(i // 5) % len(MODIFIERS)]
        elif mix == "mixed" and i % 10 == 2:
            schedule = ("0 9 * * 1-5", "30 2 * * *", "0 8 1 * *")[(i // 10) % 3]
            calendar = CalendarRule(skip=(BANK,), on_skip="previous_business_day")
        fields = {"calendar": calendar} if calendar is not None else {}
        specs.append(
            JobSpec(id=f"job-{i:06d}", schedule=schedule, target_kind="handler", target="t", timezone=zone, **fields)
        )
    return specs


def measure(specs: list[JobSpec], calendars: dict[str, Calendar]) -> dict:
    next_slot_after.cache_clear()
    started = time.perf_counter()
    due = [first_due_after(spec, START_US) for spec in specs]
    apply_s = time.perf_counter() - started
    jobs = [Job.of(spec, 1, "bench", START_US, START_US, due_us) for spec, due_us in zip(specs, due)]
    next_slot_after.cache_clear()
    started = time.perf_counter()
    claims = 0
    for job in jobs:
        if job.body.calendar:
            planned, _ = plan_calendar_due_slots(job, calendars, job.next_due_us + 86_400_000_000 * 7, 1, 0)
        else:
            planned = plan_due_slots(job, job.next_due_us, 1, 0)
        claims += len(planned)
    pass_s = time.perf_counter() - started
    return {"apply_s": apply_s, "pass_s": pass_s, "claims": claims}


def main(argv: list[str]) -> int:
    parser = bench_parser("planning", __doc__, keep=False)
    parser.add_argument("--jobs", type=int, help="jobs per mix (100,000; 10,000 with --quick)")
    parser.add_argument("--reps", type=int, help="repetitions (3; 1 with --quick)")
    args = parser.parse_args(argv)
    n = args.jobs or (10_000 if args.quick else 100_000)
    reps = args.reps or (1 if args.quick else 3)
    report = new_report("planning", args.quick, jobs=n, reps=reps, mixes={})
    calendars = {BANK: bank_calendar()}
    mixes = {mix: specs_of(mix, n) for mix in ("plain", "mixed")}
    runs: dict[str, list[dict]] = {mix: [] for mix in mixes}
    for rep in range(1, reps + 1):
        for mix, specs in mixes.items():  # alternating, so drift on a noisy machine hits both
            result = measure(specs, calendars)
            runs[mix].append(result)
            log(f"rep {rep} {mix}: apply {result['apply_s']:.3f}s, leader pass {result['pass_s']:.3f}s")
    rows = []
    for mix, results in runs.items():
        apply_s = median(r["apply_s"] for r in results)
        pass_s = median(r["pass_s"] for r in results)
        report["mixes"][mix] = {"apply_s": apply_s, "pass_s": pass_s, "runs": results}
        rows.append(
            [mix, f"{n:,}", f"{apply_s:.3f}", f"{apply_s / n * 1e6:.1f}", f"{pass_s:.3f}", f"{pass_s / n * 1e6:.1f}"]
        )
    plain, mixed = report["mixes"]["plain"], report["mixes"]["mixed"]
    report["mixed_over_plain"] = {key: mixed[key] / plain[key] for key in ("apply_s", "pass_s")}
    rows.append(
        [
            "mixed / plain",
            "",
            f"{report['mixed_over_plain']['apply_s']:.2f}x",
            "",
            f"{report['mixed_over_plain']['pass_s']:.2f}x",
            "",
        ]
    )
    print_table(
        ["mix", "jobs", "apply s", "us/job", "leader pass s", "us/job"],
        rows,
        title=f"planning: {n:,} jobs per mix, median of {reps} (mixed: 1/5 with L, W or #, 1/10 with a calendar)",
    )
    if any(r["claims"] != n for results in runs.values() for r in results):
        report["problems"].append("a job planned no slot at its due instant")
    return finish_in_process("planning", report)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
