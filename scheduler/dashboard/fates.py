"""A job's slots at a glance: the fate of each run, and the timeline of a window (pure).

A fate is what the timeline draws for one slot: fired on time, late (by how much), retried,
failed, timed out, skipped (why), missed (why: the outage it fell in), cancelled, running,
queued, upcoming, or no record. The timeline merges the runs recorded in a window with the
schedule's own slots, so a slot that should have a record and has none shows too.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.core import model
from scheduler.core.model import SECOND_US
from scheduler.core.vocabulary import RunKind, SkipReason
from scheduler.planning import format_us
from scheduler.planning.runkeys import readable_run_keys_in
from scheduler.planning.slots import owed_fires_between, upcoming_fires

if TYPE_CHECKING:
    from scheduler.dashboard.data import JobDetail

# A timeline shows at most this many slots: the most recent ones of the chosen window.
MAX_TIMELINE_SLOTS = 600
# A timeline draws at most this many slots after the job's cursor.
UPCOMING_SHOWN = 5
# Pages of fires walked to find a long window's newest slots (see latest_fires).
TAIL_WALK_PAGES = 16
# A job page opens on the shortest window holding at least this many slots.
DEFAULT_WINDOW_SLOTS = 20
# A slot whose first attempt started later than this after it was due is drawn as late.
LATE_AFTER_US = 5 * SECOND_US

# Slot fates, in legend order.
ON_TIME, LATE, RETRIED, FAILED, TIMED_OUT = "on_time", "late", "retried", "failed", "timed_out"
SKIPPED, MISSED, CANCELLED, RUNNING, QUEUED = "skipped", "missed", "cancelled", "running", "queued"
UPCOMING, UNRECORDED = "upcoming", "unrecorded"
FATE_NAMES = {
    ON_TIME: "fired on time",
    LATE: "late",
    RETRIED: "retried",
    FAILED: "failed",
    TIMED_OUT: "timed out",
    SKIPPED: "skipped",
    MISSED: "missed",
    CANCELLED: "cancelled",
    RUNNING: "running",
    QUEUED: "queued",
    UPCOMING: "upcoming",
    UNRECORDED: "no record",
}


def to_second(instant_us: int) -> str:
    """An instant as UTC ISO-8601 to the second: what a person reads on a page."""
    return format_us(instant_us - instant_us % SECOND_US)


def human_duration_us(us: int) -> str:
    """A duration rounded for reading: 850ms, 12.3s, 4m05s, 2h03m, 3d04h."""
    sign, us = ("-", -us) if us < 0 else ("", us)
    if us < SECOND_US:
        return f"{sign}{us // 1000}ms"
    seconds = us / SECOND_US
    if seconds < 60:
        return f"{sign}{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{sign}{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{sign}{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{sign}{days}d{hours:02d}h"


@dataclass(frozen=True)
class Slot:
    """One slot of a job's timeline: its fate at a glance, and a sentence saying why."""

    scheduled_us: int
    fate: str
    label: str
    detail: str
    kind: str = RunKind.SCHEDULED  # a RunKind, or "" for a schedule fire with no run
    has_run: bool = True


def lateness_us(run: model.Run) -> int:
    """How long after it was due the run's first attempt started (its claim, if none started)."""
    due_us = run.effective_us or run.scheduled_us
    started_us = run.attempts[0].started_us if run.attempts else run.claimed_us
    return max(0, started_us - due_us)


def fate_of(run: model.Run) -> Slot:
    """The fate of a run, as the timeline draws it."""
    tries = len(run.attempts)
    late = f"; started {human_duration_us(lateness_us(run))} after it was due" if tries else ""
    exit_note = f" (exit code {run.exit_code})" if run.exit_code else ""
    status, reason = run.status, readable_run_keys_in(run.reason) or run.error
    if status == model.SUCCEEDED:
        if tries > 1:
            fate, label = RETRIED, f"succeeded on attempt {tries}"
        elif lateness_us(run) > LATE_AFTER_US:
            fate, label = LATE, f"late by {human_duration_us(lateness_us(run))}"
        else:
            fate, label = ON_TIME, "fired on time"
        moved = f"; {reason}" if reason.startswith(SkipReason.CALENDAR) else ""  # where its calendar moved it
        detail = f"{label}{late}{moved}"
    elif status == model.FAILED:
        fate, label = FAILED, f"failed{exit_note}"
        detail = f"failed after {tries} attempt(s): {reason}{late}"
    elif status == model.TIMED_OUT:
        fate, label = TIMED_OUT, "timed out"
        detail = f"timed out after {tries} attempt(s): {reason}{late}"
    elif status == model.SKIPPED:
        fate, label = SKIPPED, f"skipped: {reason or 'misfire policy'}"
        detail = label
    elif status == model.MISSED:
        fate, label = MISSED, "missed"
        detail = f"missed: {reason}"
    elif status == model.CANCELLED:
        fate, label = CANCELLED, "cancelled"
        detail = f"cancelled: {reason}"
    elif status == model.LEASED:
        fate, label = RUNNING, f"running (attempt {run.attempt})"
        detail = f"running attempt {run.attempt} on {run.worker_id or 'a worker'}{late}"
    else:
        fate, label = QUEUED, "waiting to retry" if tries else "queued"
        detail = f"{label}{': ' + reason if reason else ''}"
    return Slot(run.scheduled_us, fate, label, detail, run.kind)


def default_window(spec: model.JobSpec, now_us: int, windows: tuple[tuple[str, int], ...]) -> str:
    """The shortest of `windows` (label, seconds) holding DEFAULT_WINDOW_SLOTS of the job's slots
    before now, so an every-second job opens on minutes and a nightly one on days (pure)."""
    for label, seconds in windows:
        if (
            len(owed_fires_between(spec, now_us - seconds * SECOND_US, now_us, DEFAULT_WINDOW_SLOTS))
            >= DEFAULT_WINDOW_SLOTS
        ):
            return label
    return windows[-1][0]


def latest_fires(
    spec: model.JobSpec, from_us: int, to_us: int, limit: int = MAX_TIMELINE_SLOTS
) -> tuple[list[int], bool]:
    """Up to `limit` of the schedule's slots in [from_us, to_us), the most recent ones (pure),
    and whether older slots of the window were left out.

    Never computes the whole of a long window: it narrows the window from its start by quarters
    until at most `limit` slots remain, then walks forward from the last window that held too
    many (a few pages of limit + 1 fires) to keep exactly the newest `limit`.
    """
    start_us, too_many_from_us = from_us, None
    while True:
        fires = [owed.fire for owed in owed_fires_between(spec, start_us - 1, to_us - 1, limit + 1)]
        if len(fires) <= limit or to_us - start_us <= 1:
            break
        too_many_from_us = start_us
        start_us = to_us - max(1, (to_us - start_us) // 4)
    if too_many_from_us is None:
        return [fire.at_us for fire in fires], False
    tail: deque[int] = deque(maxlen=limit)
    after_us = too_many_from_us - 1
    for _ in range(TAIL_WALK_PAGES):
        page = [owed.fire for owed in owed_fires_between(spec, after_us, to_us - 1, limit + 1)]
        tail.extend(fire.at_us for fire in page)
        if len(page) <= limit:
            return list(tail), True
        after_us = page[-1].at_us
    return [fire.at_us for fire in fires[:limit]], True


def timeline(detail: JobDetail, from_us: int, to_us: int) -> tuple[list[Slot], bool]:
    """The window's slots: the runs recorded, gaps among them, and the next few slots (pure).

    A schedule slot between the job's oldest retained run and its cursor that has no run is
    drawn as "no record" (it should not happen: every accounted slot keeps a record until
    retention prunes it). Slots before the oldest retained run are left out (the job did not
    exist yet, or retention pruned them); after the cursor, at most UPCOMING_SHOWN are drawn.
    Returns the most recent MAX_TIMELINE_SLOTS slots and whether older ones were left out.
    """
    slots = {run.scheduled_us: fate_of(run) for run in detail.runs}
    cut = detail.runs_cut
    if detail.oldest_run_us:
        gap_from_us = max(from_us, detail.oldest_run_us, detail.runs[0].scheduled_us if detail.runs_cut else 0)
        gap_to_us = min(to_us, detail.cursor_us + 1)
        if gap_from_us < gap_to_us:
            fires, fires_cut = latest_fires(detail.row.spec, gap_from_us, gap_to_us)
            cut = cut or fires_cut
            for at_us in fires:
                slots.setdefault(
                    at_us, Slot(at_us, UNRECORDED, "no record", "accounted, but no run is retained", "", False)
                )
    after_us = max(detail.cursor_us, from_us - 1)
    for fire, _ in upcoming_fires(detail.row.spec, after_us, UPCOMING_SHOWN, detail.counted_runs):
        if fire.at_us >= to_us:
            break
        due = to_second(fire.at_us + detail.spread_us)
        slots.setdefault(fire.at_us, Slot(fire.at_us, UPCOMING, "upcoming", f"due at {due}", "", False))
    ordered = [slots[at_us] for at_us in sorted(slots)]
    return ordered[-MAX_TIMELINE_SLOTS:], cut or len(ordered) > MAX_TIMELINE_SLOTS
