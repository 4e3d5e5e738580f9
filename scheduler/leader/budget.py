"""Dependency budgets as the leader plans grants: which queued runs have room now, and when
a full budget will have room again.

The core has the last word (it refuses a grant without room), but a run it would refuse
costs a Raft entry and a blind retry. Planned here first, a run waiting for a full
budget is held by the leader until a lease on it ends (concurrency) or its one-second
window moves on (rate), and no entry is proposed for it meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.core.model import SECOND_US
from scheduler.core.state import State

UNLIMITED = 1 << 62


def room(state: State, name: str, now_us: int, starting: int = 0) -> tuple[int, int]:
    """(starts the resource allows at `now_us`, the instant its rate window next frees a start
    or 0), with `starting` more runs started at `now_us` than state shows. A resource that is
    not declared has no limit."""
    resource = state.resources.get(name)
    if resource is None:
        return UNLIMITED, 0
    starts_left = UNLIMITED
    if resource.max_concurrent:
        starts_left = max(0, resource.max_concurrent - state.resource_leased.get(name, 0) - starting)
    frees_at_us = 0
    if resource.max_starts_per_s:
        # The core counts the starts after now - 1 s; the oldest of them leaves the window first.
        recent = [t for t in state.resource_starts.get(name, ()) if t > now_us - SECOND_US] + [now_us] * starting
        starts_left = min(starts_left, max(0, resource.max_starts_per_s - len(recent)))
        if len(recent) >= resource.max_starts_per_s:
            frees_at_us = recent[len(recent) - resource.max_starts_per_s] + SECOND_US
    return starts_left, frees_at_us


def admit(
    state: State, uses_of_runs: Iterable[tuple[str, ...]], now_us: int, starting: Mapping[str, int] | None = None
) -> list[str]:
    """For runs in grant order (each given by the resources its job uses): '' for a run that
    fits, else the name of the first resource without room for it. Runs admitted earlier in
    the list take their room first, as the core grants them; `starting` counts runs already
    admitted per resource whose grants are not applied yet."""
    left: dict[str, int] = {}
    verdicts: list[str] = []
    for uses in uses_of_runs:
        full = ""
        for name in uses:
            if name not in left:
                left[name] = room(state, name, now_us, (starting or {}).get(name, 0))[0]
            if left[name] <= 0:
                full = name
                break
        if not full:
            for name in uses:
                left[name] -= 1
        verdicts.append(full)
    return verdicts
