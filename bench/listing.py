"""Listing runs across every job: time per ListRuns page, and the longest hold of the state lock.

    python -m bench listing            # 100,000 jobs x 3 daily runs
    python -m bench listing --quick    # 20,000 jobs x 3 daily runs

In-process, on one replica's state (`scheduler/rpc/run_pages.py`, what ListRuns calls): pages of
1,000 runs without a job id, oldest first over the whole history, newest first, and inside a
one-day window (one run per job: a herd's instant). Each query pages 5 times from its start; the
read context records how long each hold of the lock lasted. Beside it, the same pages computed
inside one hold each (the lock held as long as the page takes, as before the chunking): that
hold is what a node's applies and Raft tick waited for.

Checks (exit 1): every page holds 1,000 runs in order, the chunked and the one-hold pages agree.
Output: bench/out/listing.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time

from bench._harness.common import fmt, median, print_table
from bench._harness.report import bench_parser, finish_in_process, log, new_report
from scheduler.core import State
from scheduler.core.model import SECOND_US, SUCCEEDED, Run
from scheduler.rpc.run_pages import RunQuery, select_page

DAY_US = 86_400 * SECOND_US
T0_US = 1_800_000_000 * SECOND_US
PAGE, PAGES = 1_000, 5


def build(jobs: int) -> State:
    state = State()
    for n in range(jobs):
        for day in range(3):
            state.add_run(Run(job_id=f"job-{n:06d}", scheduled_us=T0_US + day * DAY_US, status=SUCCEEDED))
    return state


def page_through(state: State, query: RunQuery, one_hold: bool) -> dict:
    """PAGES pages from the query's start; with `one_hold`, each page is computed inside a single
    hold of the lock (the whole page is the hold), else in select_page's own holds."""
    holds: list[float] = []

    @contextlib.contextmanager
    def read():
        started = time.perf_counter()
        yield state
        if not one_hold:
            holds.append(time.perf_counter() - started)

    pages_s, keys, after = [], [], None
    for _ in range(PAGES):
        started = time.perf_counter()
        page, after = select_page(read, dataclasses.replace(query, after=after), PAGE)
        pages_s.append(time.perf_counter() - started)
        keys.append([(run.scheduled_us, run.job_id) for run in page])
    longest_s = max(pages_s) if one_hold else max(holds)
    return {"page_ms": [s * 1000 for s in pages_s], "longest_hold_ms": longest_s * 1000, "keys": keys}


def measure(jobs: int) -> dict:
    state = build(jobs)
    queries = {
        "oldest first, all history": RunQuery(),
        "newest first, all history": RunQuery(newest_first=True),
        "one day (one run per job, one instant)": RunQuery(since_us=T0_US + DAY_US, until_us=T0_US + 2 * DAY_US),
    }
    out: dict = {"jobs": jobs, "runs": state.run_count, "queries": {}, "problems": []}
    for label, query in queries.items():
        chunked = page_through(state, query, one_hold=False)
        whole = page_through(state, query, one_hold=True)
        ordered = [key for page in chunked["keys"] for key in page]
        expected = sorted(ordered, reverse=query.newest_first)
        if (
            any(len(page) != PAGE for page in chunked["keys"])
            or ordered != expected
            or len(set(ordered)) != len(ordered)
        ):
            out["problems"].append(f"{label}: pages not full, out of order or repeated")
        if chunked["keys"] != whole["keys"]:
            out["problems"].append(f"{label}: the chunked pages differ from the one-hold pages")
        out["queries"][label] = {
            "chunked": {k: v for k, v in chunked.items() if k != "keys"},
            "one_hold": {k: v for k, v in whole.items() if k != "keys"},
        }
        log(
            f"{label}: {fmt(median(chunked['page_ms']))} ms per page, longest hold "
            f"{fmt(chunked['longest_hold_ms'])} ms (one hold: {fmt(whole['longest_hold_ms'])} ms)"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("listing", __doc__, keep=False)
    args = parser.parse_args(argv)
    jobs = 20_000 if args.quick else 100_000
    measured = measure(jobs)
    rows = []
    for label, figures in measured["queries"].items():
        chunked, whole = figures["chunked"], figures["one_hold"]
        rows.append(
            [
                label,
                fmt(median(chunked["page_ms"])),
                fmt(chunked["longest_hold_ms"]),
                fmt(whole["longest_hold_ms"]),
                f"{chunked['longest_hold_ms'] / whole['longest_hold_ms']:.2f}",
            ]
        )
    report = new_report("listing", args.quick, measured=measured, problems=measured["problems"])
    report["table"] = print_table(
        [
            "pages of 1,000 runs, no job id",
            "ms per page (median of 5)",
            "longest hold ms",
            "one hold: longest ms",
            "ratio",
        ],
        rows,
        title=f"listing: {jobs:,} jobs x 3 runs, in-process",
    )
    return finish_in_process("listing", report)


if __name__ == "__main__":
    sys.exit(main())
