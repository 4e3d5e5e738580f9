"""One page of ListRuns: runs in (scheduled_us, job_id) order, or the reverse, from every job's
sorted history, without holding the state lock for longer than a few milliseconds at a time.

A page is chosen in two steps. First, in chunks of jobs (the lock taken once per chunk), each
job's first run past the page token and inside the window: a *head*. Then, in one hold of the
lock, the heads are merged: the smallest is checked against the job's runs as they are now
(a run may have landed between the steps), emitted, and replaced by that job's next run, until
the page is full. The first step is the one that grows with the number of jobs (a listing
across 100,000 jobs took 0.4-0.8 s in one hold of the lock, long enough to stall the node's
Raft tick); the second grows with the page. A run that lands behind a head between the steps
is listed only if it still sorts after the runs already emitted, as with any concurrent write.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.core import model

FOREVER_US = 1 << 62
# A filter that matches few runs stops after examining this many (in page order) and answers a
# short page with a token to go on from: one call never walks the whole history under the lock.
MAX_RUNS_EXAMINED = 20_000
# Jobs whose heads are found per hold of the state lock (about 2-4 ms).
JOBS_PER_HOLD = 2_000

Key = tuple[int, str]  # (scheduled_us, job_id): a run key, and a page token


@dataclass(frozen=True)
class RunQuery:
    job_id: str = ""
    owner: str = ""
    job_class: str = ""
    statuses: frozenset[str] = frozenset()
    since_us: int = -FOREVER_US
    until_us: int = FOREVER_US
    newest_first: bool = False
    after: Key | None = None  # the page token: key of the last run already returned


class _Descending(str):
    """A job id that sorts backwards, so one min-heap serves newest-first pages too."""

    __slots__ = ()

    def __lt__(self, other: str) -> bool:
        return str.__gt__(self, other)


def select_page(
    read: Callable[[], contextlib.AbstractContextManager],
    query: RunQuery,
    limit: int,
    max_examined: int = MAX_RUNS_EXAMINED,
    convert: Callable[[model.Run], object] = lambda run: run,
):
    """One page (each run passed through `convert` under the lock) and the key to continue after
    (None on the last page). `read()` holds the state still while its block runs."""
    heads = _heads(read, query)
    with read() as state:
        page, next_key = _merge(state, query, heads, limit, max_examined)
        return [convert(run) for run in page], next_key


def select_runs(state, query: RunQuery, limit: int, max_examined: int = MAX_RUNS_EXAMINED):
    """`select_page` on a state nobody else changes (tests, tools)."""
    return select_page(lambda: contextlib.nullcontext(state), query, limit, max_examined)


def _heads(read, query: RunQuery) -> list[tuple]:
    with read() as state:
        job_ids = [query.job_id] if query.job_id else list(state.runs)
    # Inside the holds only appends of existing objects: a tuple per job there let the garbage
    # collector run (a full collection, tens of milliseconds) while the lock was held.
    found_ids: list[str] = []
    positions: list[int] = []
    instants: list[int] = []
    for start in range(0, len(job_ids), JOBS_PER_HOLD):
        with read() as state:
            for job_id in job_ids[start : start + JOBS_PER_HOLD]:
                if (query.owner or query.job_class) and not _job_matches(state.jobs.get(job_id), query):
                    continue
                job_runs = state.runs.get(job_id)  # runs outlive their job: a deleted job's history lists
                position = _next_position(job_runs, job_id, query, query.after) if job_runs else None
                if position is not None:
                    found_ids.append(job_id)
                    positions.append(position)
                    instants.append(job_runs[position].scheduled_us)
    if query.newest_first:
        heads = [
            (-us, _Descending(job_id), job_id, position, False)
            for us, job_id, position in zip(instants, found_ids, positions)
        ]
    else:
        heads = [(us, job_id, job_id, position, False) for us, job_id, position in zip(instants, found_ids, positions)]
    heapq.heapify(heads)
    return heads


def _merge(state, query: RunQuery, heads: list[tuple], limit: int, max_examined: int):
    page: list[model.Run] = []
    cursor, examined = query.after, 0
    while heads:
        head = heapq.heappop(heads)
        _, _, job_id, position, checked = head
        job_runs = state.runs.get(job_id)
        if not checked and not _still_there(job_runs, position, head, query.newest_first):
            # Runs landed or left between the holds: find the job's place in the order again.
            position = _next_position(job_runs, job_id, query, cursor) if job_runs else None
            if position is not None:
                heapq.heappush(heads, _entry(job_runs[position], position, query.newest_first, checked=True))
            continue
        run = job_runs[position]
        examined += 1
        if not query.statuses or run.status in query.statuses:
            if len(page) == limit:
                return page, (page[-1].scheduled_us, page[-1].job_id)
            page.append(run)
        cursor = (run.scheduled_us, run.job_id)
        following = position - 1 if query.newest_first else position + 1
        if 0 <= following < len(job_runs) and _in_window(job_runs[following], query):
            heapq.heappush(heads, _entry(job_runs[following], following, query.newest_first, checked=True))
        if examined >= max_examined:
            return page, cursor
    return page, None


def _still_there(job_runs: list[model.Run] | None, position: int, head: tuple, newest_first: bool) -> bool:
    """The head found in an earlier hold is still the run at its position: a job holds one run
    per instant, and runs landing or leaving before it would have moved it."""
    if not job_runs or position >= len(job_runs):
        return False
    instant_us = -head[0] if newest_first else head[0]
    return job_runs[position].scheduled_us == instant_us


def _entry(run: model.Run, position: int, newest_first: bool, checked: bool) -> tuple:
    if newest_first:
        return (-run.scheduled_us, _Descending(run.job_id), run.job_id, position, checked)
    return (run.scheduled_us, run.job_id, run.job_id, position, checked)


def _next_position(job_runs: list[model.Run], job_id: str, query: RunQuery, cursor: Key | None) -> int | None:
    """Position of the job's first run, in page order, inside the window and past `cursor`."""
    if query.newest_first:
        position = bisect.bisect_left(job_runs, query.until_us, key=_scheduled) - 1
        if cursor is not None:
            # Keys run (instant, job id), backwards: at the cursor's instant, a job sorting at or
            # after the cursor's job was listed already.
            end = bisect.bisect_left if job_id >= cursor[1] else bisect.bisect_right
            position = min(position, end(job_runs, cursor[0], key=_scheduled) - 1)
        found = position >= 0
    else:
        position = bisect.bisect_left(job_runs, query.since_us, key=_scheduled)
        if cursor is not None:
            start = bisect.bisect_right if job_id <= cursor[1] else bisect.bisect_left
            position = max(position, start(job_runs, cursor[0], key=_scheduled))
        found = position < len(job_runs)
    return position if found and _in_window(job_runs[position], query) else None


def _in_window(run: model.Run, query: RunQuery) -> bool:
    return query.since_us <= run.scheduled_us < query.until_us


def _job_matches(job, query: RunQuery) -> bool:
    if job is None:  # a deleted job's history has no owner or class left to match
        return False
    return (not query.owner or job.body.owner == query.owner) and (
        not query.job_class or job.body.job_class == query.job_class
    )


def _scheduled(run: model.Run) -> int:
    return run.scheduled_us
