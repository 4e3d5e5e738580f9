"""What people read about how a job fires and what it still owes: the same words in `raftcron
jobs`, `next`, `explain` and the dashboard. Pure: facts in (replicated ones among them), text out."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from .durations import format_duration_us
from .slots import NO_SOURCE, parents_of, why_not_owed, window_state
from .timeconv import format_us


def how_it_fires(spec: Any) -> str:
    """One line: `0 9 * * *`, `2 schedules: ...`, `every 1m30s from ...`, `once at ...`, `after a, b`,
    `manual-only`."""
    if spec.schedule:
        return spec.schedule
    if spec.schedules is not UNSET:
        return " | ".join(spec.schedules)
    if spec.every_us is not UNSET:
        anchor_us = 0 if spec.anchor_us is UNSET else spec.anchor_us
        return f"every {format_duration_us(spec.every_us)} from {format_us(anchor_us)}"
    if spec.at_us is not UNSET:
        return f"once at {format_us(spec.at_us)}"
    if parents := parents_of(spec):
        return f"after {', '.join(parents)}"
    return "manual-only"


def source_text(spec: Any, source: int | None) -> str:
    """`schedules[1] (0 17 * * *)` for a slot of a multi-schedule job, '' for any other."""
    if source is None or source == NO_SOURCE:
        return ""
    if spec.schedules is not UNSET and 0 <= source < len(spec.schedules):
        return f"schedules[{source}] ({spec.schedules[source]})"
    return f"schedules[{source}]"  # the spec changed since: its expression is no longer known


def counted_runs_of(value: Any) -> int:
    """A replicated count (UNSET or a missing protobuf field: 0)."""
    return 0 if value is UNSET or value is None else int(value)


def owing_state(spec: Any, next_due_us: int, counted_runs: int, last_scheduled_us: int, now_us: int) -> str:
    """Why nothing is owed, where the job stands in its active window, and its run count ('' when
    none applies), e.g. `limit reached: 3 of max_runs 3 scheduled runs done`."""
    parts: list[str] = []
    reason = why_not_owed(spec, max(now_us, last_scheduled_us), counted_runs, last_scheduled_us)
    if not next_due_us and reason is not None:
        parts.append(reason.message)
    window = spec.active
    state = window_state(spec, now_us)
    if state == "before":
        parts.append(f"before its active window: slots are owed from {format_us(window.from_us)}")
    elif state == "inside" and window.until_us:
        parts.append(f"inside its active window, until {format_us(window.until_us)}")
    elif state == "after" and not any(p.startswith("after its active window") for p in parts):
        parts.append(f"after its active window (it ended {format_us(window.until_us)})")
    if spec.max_runs is not UNSET and counted_runs < spec.max_runs:
        parts.append(f"{counted_runs} of max_runs {spec.max_runs} scheduled runs done")
    return "; ".join(parts)
