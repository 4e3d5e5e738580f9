"""The job ids in order, kept for ListJobs pages.

ListJobs sorted every job id for every page, under the state lock: about 0.6 s per page with a
million jobs, during which nothing was applied. `JobIds` keeps the sorted list and hears from
the apply path which ids an ApplyJobs named; a read folds them in against the state it reads
(the truth), so a page never misses a job applied before it and never lists a deleted one.

`--owner X` paged from the first id of the whole list to X's: 1.7 s for the pages of one owner's
10,000 jobs among a million, each page under the state lock. Each owner's ids are therefore kept
too, built at the first owner read and folded like the whole list. A job that moved to another
owner stays listed under its old one until the state is read afresh: the caller checks owners.
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
        self._by_owner: dict[str, list[str]] | None = None  # owner -> ids, sorted; None until asked

    def on_apply(self, command, result, state) -> None:
        """An apply listener (tick thread): remember the ids an accepted ApplyJobs named."""
        if isinstance(command, ApplyJobs) and result.accepted:
            with self._lock:
                self._named.update(upsert.spec.id for upsert in command.upserts)
                self._named.update(command.removals)

    def sorted_ids(self, state, owner: str = "") -> list[str]:
        """Every id of `state.jobs`, sorted; called under the state lock. With `owner`, the ids of
        that owner's jobs, sorted, plus perhaps a few that moved to another owner since (the
        caller checks). The list is shared: a caller reads it and never changes it."""
        with self._lock:
            if self._built_from is None or self._built_from() is not state:
                self._sorted, self._built_from, self._named = sorted(state.jobs), weakref.ref(state), set()
                self._by_owner = None
            elif self._named:
                named, self._named = self._named, set()
                self._sorted = _fold(self._sorted, named, state.jobs)
                if self._by_owner is not None:
                    _fold_owners(self._by_owner, named, state.jobs)
            if not owner:
                return self._sorted
            if self._by_owner is None:
                self._by_owner = {}
                for job_id in self._sorted:
                    self._by_owner.setdefault(state.jobs[job_id].body.owner, []).append(job_id)
            return self._by_owner.get(owner, [])


def _fold(ids: list[str], named: set[str], jobs) -> list[str]:
    """`ids` with the changes to `named` ids: the deleted ones dropped, the new ones merged in."""
    gone = {job_id for job_id in named if job_id not in jobs}
    if gone:
        ids = [job_id for job_id in ids if job_id not in gone]
    new = sorted(job_id for job_id in named if job_id in jobs and not _holds(ids, job_id))
    # Two sorted runs: Timsort merges them in one linear pass.
    return sorted(ids + new) if new else ids


def _fold_owners(by_owner: dict[str, list[str]], named: set[str], jobs) -> None:
    """Each owner's list with the changes to `named` ids; lists are replaced, never changed."""
    arrived: dict[str, list[str]] = {}
    for job_id in named:
        if (job := jobs.get(job_id)) is not None:
            arrived.setdefault(job.body.owner, []).append(job_id)
    for owner, ids in arrived.items():
        held = by_owner.get(owner, [])
        new = sorted(job_id for job_id in ids if not _holds(held, job_id))
        if new:
            by_owner[owner] = sorted(held + new)
    gone = {job_id for job_id in named if job_id not in jobs}
    if gone:
        for owner, ids in list(by_owner.items()):
            if not gone.isdisjoint(ids):
                by_owner[owner] = [job_id for job_id in ids if job_id not in gone]


def _holds(ids: list[str], job_id: str) -> bool:
    position = bisect.bisect_left(ids, job_id)
    return position < len(ids) and ids[position] == job_id
