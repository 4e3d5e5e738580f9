"""A job's slots whatever way it fires (scheduler/planning/slots.py): several schedules, an
interval, a one-shot, none; the active window and the run limit. Pure: instants in, slots out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.model import ActiveWindow, JobSpec
from scheduler.planning import compile_schedule, parse_iso_to_us
from scheduler.planning.slots import (
    NO_SOURCE,
    WHY_AFTER_WINDOW,
    WHY_DONE,
    WHY_LIMIT,
    WHY_MANUAL,
    Slot,
    is_manual_only,
    is_plain,
    next_owed_slot,
    upcoming_slots,
    why_not_owed,
    window_state,
)

MINUTE_US = 60_000_000
HOUR_US = 60 * MINUTE_US


def at(text: str) -> int:
    return parse_iso_to_us(text)


def job(**fields) -> JobSpec:
    return JobSpec(**{"id": "j", "schedule": "", "target_kind": "handler", "target": "t", **fields})


def test_the_union_fires_once_per_instant_and_names_the_lowest_schedule() -> None:
    spec = job(schedules=("0 9 * * *", "0 9,17 * * *"))
    slots = upcoming_slots(spec, at("2026-03-02T00:00:00Z"), 4)
    assert slots == [
        Slot(at("2026-03-02T09:00:00Z"), 0),  # both hit 09:00: one slot, from the first
        Slot(at("2026-03-02T17:00:00Z"), 1),
        Slot(at("2026-03-03T09:00:00Z"), 0),
        Slot(at("2026-03-03T17:00:00Z"), 1),
    ]


def test_every_schedule_of_a_union_is_evaluated_in_the_jobs_time_zone() -> None:
    spec = job(schedules=("0 9 * * *", "30 12 * * *"), timezone="Europe/Paris")
    slots = upcoming_slots(spec, at("2026-07-01T00:00:00Z"), 2)
    assert [s.at_us for s in slots] == [at("2026-07-01T07:00:00Z"), at("2026-07-01T10:30:00Z")]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["*/7 * * * *", "0 * * * *", "15,45 */2 * * *", "*/10 * * * *", "0 9 * * 1-5", "30 0 1 * *"]),
        min_size=1,
        max_size=4,
        unique=True,
    ),
    st.integers(min_value=0, max_value=400 * 24 * 60),
)
def test_the_union_is_the_brute_force_union_deduplicated(exprs: list[str], start_minute: int) -> None:
    start_us = at("2026-01-01T00:00:00Z") + start_minute * MINUTE_US
    end_us = start_us + 6 * HOUR_US
    spec = job(schedules=tuple(exprs))
    expected: dict[int, int] = {}
    for index, expr in enumerate(exprs):
        for fire in compile_schedule(expr).fires_between(start_us, end_us, 10_000):
            expected.setdefault(fire.at_us, index)
    got = []
    after_us = start_us
    while (slot := next_owed_slot(spec, after_us)) is not None and slot.at_us <= end_us:
        got.append(slot)
        after_us = slot.at_us
    assert got == [Slot(instant, index) for instant, index in sorted(expected.items())]


def test_interval_slots_are_anchor_plus_k_times_every() -> None:
    spec = job(every_us=90_000_000)  # anchored at the Unix epoch by default
    after_us = at("2026-05-05T10:00:00Z")
    slots = upcoming_slots(spec, after_us, 3)
    assert all(s.at_us % 90_000_000 == 0 and s.source == NO_SOURCE for s in slots)
    assert slots[0].at_us - after_us <= 90_000_000 and slots[0].at_us > after_us
    assert [b.at_us - a.at_us for a, b in zip(slots, slots[1:])] == [90_000_000, 90_000_000]


def test_an_anchor_in_the_future_is_the_first_slot_and_slots_follow_it() -> None:
    anchor_us = at("2026-05-05T10:00:07Z")
    spec = job(every_us=HOUR_US, anchor_us=anchor_us)
    assert next_owed_slot(spec, at("2026-01-01T00:00:00Z")) == Slot(anchor_us)
    assert next_owed_slot(spec, anchor_us) == Slot(anchor_us + HOUR_US)
    assert next_owed_slot(spec, anchor_us + HOUR_US - 1) == Slot(anchor_us + HOUR_US)


def test_a_one_shot_has_its_instant_and_then_nothing() -> None:
    instant = at("2027-03-01T09:00:00Z")
    spec = job(at_us=instant)
    assert next_owed_slot(spec, instant - 1) == Slot(instant)
    assert next_owed_slot(spec, instant) is None
    assert why_not_owed(spec, instant, 0, last_scheduled_us=instant).code == WHY_DONE


def test_a_job_without_a_way_to_fire_is_manual_only() -> None:
    spec = job()
    assert is_manual_only(spec) and not is_plain(spec)
    assert next_owed_slot(spec, 0) is None
    assert why_not_owed(spec, 0, 0).code == WHY_MANUAL
    assert not is_manual_only(job(schedule="* * * * *")) and is_plain(job(schedule="* * * * *"))


def test_slots_before_the_window_are_not_owed_and_the_first_is_at_or_after_its_start() -> None:
    window = ActiveWindow(from_us=at("2026-06-01T00:00:00Z"), until_us=at("2026-06-03T00:00:00Z"))
    spec = job(schedule="0 12 * * *", active=window)
    assert not is_plain(spec)
    assert next_owed_slot(spec, at("2026-01-01T00:00:00Z")) == Slot(at("2026-06-01T12:00:00Z"))
    assert next_owed_slot(spec, at("2026-06-01T12:00:00Z")) == Slot(at("2026-06-02T12:00:00Z"))
    assert next_owed_slot(spec, at("2026-06-02T12:00:00Z")) is None  # the 3rd's noon is past the end
    assert why_not_owed(spec, at("2026-06-02T12:00:00Z"), 0).code == WHY_AFTER_WINDOW
    assert [window_state(spec, at(t)) for t in ("2026-05-01T00:00:00Z", "2026-06-02T00:00:00Z")] == ["before", "inside"]
    assert window_state(spec, at("2026-06-03T00:00:00Z")) == "after"  # the end is exclusive


def test_a_slot_exactly_at_the_windows_start_is_owed_one_at_its_end_is_not() -> None:
    start, end = at("2026-06-01T00:00:00Z"), at("2026-06-01T01:00:00Z")
    spec = job(every_us=30 * MINUTE_US, active=ActiveWindow(start, end))
    assert upcoming_slots(spec, 0, 10) == [Slot(start), Slot(start + 30 * MINUTE_US)]


def test_the_run_limit_ends_the_slots_once_reached() -> None:
    spec = job(every_us=MINUTE_US, max_runs=3)
    assert len(upcoming_slots(spec, 0, 10)) == 3
    assert len(upcoming_slots(spec, 0, 10, counted_runs=2)) == 1
    assert next_owed_slot(spec, 0, counted_runs=3) is None
    reason = why_not_owed(spec, 0, 3)
    assert reason.code == WHY_LIMIT and "3 of max_runs 3" in reason.message
