"""Named declarations an ApplyJobs carries beside its jobs (calendars, alert routes): each is
valid, none is declared twice or declared and dropped at once, and the cluster's count stays
bounded. The rejection texts are part of replicated results: keep them byte for byte."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from scheduler.core.results import Result, rejected
from scheduler.core.vocabulary import RejectionCode


def check_declarations(
    index: int,
    declared: Sequence[Any],
    removals: Sequence[str],
    held: Iterable[str],
    problem_of: Callable[[Any], str],
    noun: str,
    limit: int,
) -> Result | None:
    """The rejection of the first thing wrong with `declared` (records with a `.name`) and
    `removals` against the names `held` now, or None."""
    for item in declared:
        problem = problem_of(item)
        if problem:
            return rejected(index, RejectionCode.INVALID, problem)
    names = [item.name for item in declared]
    if len(set(names)) != len(names) or set(names) & set(removals):
        return rejected(index, RejectionCode.INVALID, f"a {noun} is declared twice, or declared and dropped")
    if len((set(held) | set(names)) - set(removals)) > limit:
        return rejected(index, RejectionCode.INVALID, f"at most {limit} {noun}s per cluster")
    return None
