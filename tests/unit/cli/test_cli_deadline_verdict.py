"""`raftcron explain` says whether a scheduled run met its job's deadline (counted from when it was due)."""

from __future__ import annotations

from scheduler.cli.runs import deadline_verdict
from scheduler.core.model import SECOND_US

DEADLINE_US = 1800 * SECOND_US


def run(status: str, finished_at: str = "", effective_at: str = "2026-12-02T06:10:00Z") -> dict:
    return {
        "scheduled_at": "2026-12-02T06:00:00Z",
        "effective_at": effective_at,
        "status": status,
        "finished_at": finished_at,
    }


def test_a_success_before_the_deadline_met_it() -> None:
    verdict = deadline_verdict(run("succeeded", "2026-12-02T06:39:00Z"), DEADLINE_US)
    assert verdict == "deadline 30m after the slot is due (2026-12-02T06:40:00Z): met"


def test_a_late_success_or_a_failure_missed_it() -> None:
    assert deadline_verdict(run("succeeded", "2026-12-02T06:41:00Z"), DEADLINE_US).endswith(
        "missed (a deadline_missed alert was raised)"
    )
    assert deadline_verdict(run("failed", "2026-12-02T06:11:00Z"), DEADLINE_US).endswith("alert was raised)")


def test_a_live_run_may_still_make_it_and_a_skipped_slot_is_not_checked() -> None:
    assert "missed if it has not succeeded by then" in deadline_verdict(run("queued"), DEADLINE_US)
    assert deadline_verdict(run("skipped"), DEADLINE_US).endswith("not checked (skipped)")
