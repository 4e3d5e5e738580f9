"""plan_append: a follower truncates only entries that conflict, and acknowledges what it holds."""

from __future__ import annotations

from scheduler.replication.follower_append import AlreadyHeld, PassOn, plan_append


def _log(*terms: int, first: int = 1):
    """term_at for a log whose entry `first + k` has term terms[k]."""
    return lambda index: terms[index - first] if 0 <= index - first < len(terms) else None


def _entries(first: int, *terms: int):
    return [(b"cmd", first + k, term) for k, term in enumerate(terms)]


def test_a_stale_heartbeat_changes_nothing_and_acknowledges_only_its_previous_entry():
    assert plan_append(_log(0, 1, 1, 1, 1), 3, 1, []) == AlreadyHeld(verified_index=3)


def test_a_duplicate_range_is_acknowledged_without_touching_the_entries_after_it():
    assert plan_append(_log(0, 1, 1, 1, 1, 1), 2, 1, _entries(3, 1, 1)) == AlreadyHeld(verified_index=4)


def test_entries_already_held_are_skipped_and_the_rest_passed_on_after_the_last_held():
    plan = plan_append(_log(0, 1, 1, 1), 2, 1, _entries(3, 1, 1, 1, 1))
    assert plan == PassOn(prev_index=4, prev_term=1, entries=_entries(5, 1, 1))


def test_a_conflict_is_passed_on_from_the_first_conflicting_entry():
    plan = plan_append(_log(0, 1, 1, 1, 1), 2, 1, _entries(3, 1, 2, 2))
    assert plan == PassOn(prev_index=3, prev_term=1, entries=_entries(4, 2, 2))


def test_an_append_past_the_end_is_passed_on_whole():
    plan = plan_append(_log(0, 1, 1), 3, 1, _entries(4, 1))
    assert plan == PassOn(prev_index=3, prev_term=1, entries=_entries(4, 1))


def test_a_missing_or_conflicting_previous_entry_is_left_to_pysyncobj():
    assert plan_append(_log(0, 1, 1), 5, 1, _entries(6, 1)) is None
    assert plan_append(_log(0, 1, 1), 2, 2, _entries(3, 2)) is None
    assert plan_append(_log(0, 1, 1, first=10), 5, 1, []) is None
