"""The node's side of a session's flow control: never more grants than the credits."""

from __future__ import annotations

import pytest

from scheduler.rpc.worker_session import SessionCredits


def test_no_credit_no_grant():
    assert SessionCredits().reserve() == 0


def test_credits_add_up_and_a_grant_uses_them():
    credits = SessionCredits()
    credits.add(3)
    credits.add(2)
    asked = credits.reserve()
    assert asked == 5
    credits.settle(asked, 4)
    assert credits.available == 1


def test_leases_in_flight_together_never_ask_for_the_same_credit():
    credits = SessionCredits()
    credits.add(4)
    first = credits.reserve()
    credits.add(2)  # arrived while the first lease commits
    second = credits.reserve()
    assert (first, second) == (4, 2)
    assert credits.reserve() == 0
    credits.settle(second, 2)
    credits.settle(first, 1)  # the queue had one run: three credits are left for the next lease
    assert credits.available == 3


def test_a_grant_beyond_its_reservation_is_a_bug_not_a_push():
    credits = SessionCredits()
    credits.add(1)
    asked = credits.reserve()
    with pytest.raises(ValueError):
        credits.settle(asked, 2)


def test_credits_beyond_the_cap_are_dropped_reserved_ones_included():
    credits = SessionCredits(max_credits=10)
    credits.add(8)
    asked = credits.reserve()
    credits.add(8)
    credits.add(-5)
    assert credits.available == 2
    credits.settle(asked, 0)
    assert credits.available == 10
