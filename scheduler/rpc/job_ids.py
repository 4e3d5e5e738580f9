"""The job ids in order, kept for ListJobs pages.

ListJobs sorted every job id for every page, under the state lock: about 0.6 s per page with a
million jobs, during which nothing was applied. `JobIds` keeps the sorted list and hears from
the apply path which ids an ApplyJobs named; a read folds them in against the state it reads
(the truth), so a page never misses a job applied before it and never lists a deleted one.
"""

from __future__ import annotations

import bisect
import threading
import weakref

from scheduler.core.commands import ApplyJobs


class JobIds:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sorted: list[str] = []
        # The State the list describes (a restored snapshot is a new State): held weakly, so an
        # old state is not kept alive by its index.
        self._built_from: weakref.ref | None = None
        self._named: set[str] = set()  # ids upserted or removed since the list was last brought up to date

    def on_apply(self, command, result, state) -> None:
        """An apply listener (tick thread): remember the ids an accepted ApplyJobs named."""
        if isinstance(command, ApplyJobs) and result.accepted:
            with self._lock:
                self._named.update(upsert.spec.id for upsert in command.upserts)
                self._named.update(command.removals)

    def sorted_ids(self, state) -> list[str]:
        """Every id of `state.jobs`, sorted; called under the state lock. The list is shared:
        a caller reads it and never changes it."""
        with self._lock:
            if self._built_from is None or self._built_from() is not state:
                self._sorted, self._built_from, self._named = sorted(state.jobs), weakref.ref(state), set()
            elif self._named:
                self._sorted = _fold(self._sorted, self._named, state.jobs)
                self._named = set()
            return self._sorted


def _fold(ids: list[str], named: set[str], jobs) -> list[str]:
    """`ids` with the changes to `named` ids: the deleted ones dropped, the new ones merged in."""
    gone = {job_id for job_id in named if job_id not in jobs}
    if gone:
        ids = [job_id for job_id in ids if job_id not in gone]
    new = sorted(job_id for job_id in named if job_id in jobs and not _holds(ids, job_id))
    # Two sorted runs: Timsort merges them in one linear pass.
    return sorted(ids + new) if new else ids


def _holds(ids: list[str], job_id: str) -> bool:
    position = bisect.bisect_left(ids, job_id)
    return position < len(ids) and ids[position] == job_id
