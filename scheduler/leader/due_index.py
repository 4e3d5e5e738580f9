"""The trigger loop's due index: which jobs to look at, and when.

One list of job ids per distinct due instant and a heap of the instants. Schedules
bunch (every nightly job is due at midnight), so a job costs one list slot here
instead of a heap tuple and a dict entry: 1 MiB for 100,000 jobs instead of 10.

Entries are hints, never removed in place: a job whose next due instant changed is
added again under the new one, and its old entry pops as a stale candidate that the
caller checks against replicated state (planning a job that is not due yet claims
nothing). So that re-adding cannot grow the index without bound, it reports when it
holds more entries than twice the jobs it was built for; the caller rebuilds it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable


class DueIndex:
    def __init__(self) -> None:
        self._buckets: dict[int, list[str]] = {}
        self._instants: list[int] = []  # heap; each instant once, while its bucket exists
        self._entries = 0
        self._built_for = 0

    def rebuild(self, due_by_job: Iterable[tuple[str, int]]) -> int:
        """Replace every entry with `(job_id, next_due_us)` pairs (0: no next slot); the count kept."""
        buckets: dict[int, list[str]] = {}
        entries = 0
        # `add` inlined, and the heap made once: a new leader builds this for every job.
        for job_id, due_us in due_by_job:
            if due_us:
                bucket = buckets.get(due_us)
                if bucket is None:
                    bucket = buckets[due_us] = []
                bucket.append(job_id)
                entries += 1
        instants = list(buckets)
        heapq.heapify(instants)
        self._buckets, self._instants, self._entries, self._built_for = buckets, instants, entries, entries
        return entries

    def extend(self, due_by_job: Iterable[tuple[str, int]]) -> int:
        """Add jobs the last rebuild left out (they count as built for); how many were added."""
        before = self._entries
        for job_id, due_us in due_by_job:
            self.add(job_id, due_us)
        self._built_for += self._entries - before
        return self._entries - before

    def add(self, job_id: str, due_us: int) -> None:
        if not due_us:
            return
        bucket = self._buckets.get(due_us)
        if bucket is None:
            bucket = self._buckets[due_us] = []
            heapq.heappush(self._instants, due_us)
        bucket.append(job_id)
        self._entries += 1

    def pop_due(self, now_us: int) -> list[str]:
        """Every job with an entry due at or before `now_us`, each once: earliest instant first,
        then by id, so runs of one instant queue in the same order whatever order they came in."""
        due: list[str] = []
        while self._instants and self._instants[0] <= now_us:
            bucket = self._buckets.pop(heapq.heappop(self._instants))
            self._entries -= len(bucket)
            due.extend(sorted(bucket))
        return list(dict.fromkeys(due))

    def due_at(self, instant_us: int) -> list[str]:
        """The jobs with an entry at exactly `instant_us`, each once, by id (nothing is popped)."""
        return sorted(set(self._buckets.get(instant_us, ())))

    def earliest_us(self) -> int | None:
        return self._instants[0] if self._instants else None

    def needs_rebuild(self) -> bool:
        """True once stale entries outnumber live ones (1,024 spare for a small index)."""
        return self._entries > 2 * self._built_for + 1024

    def __len__(self) -> int:
        return self._entries
