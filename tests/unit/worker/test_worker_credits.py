"""The worker's side of a session's flow control: it announces only what it can start."""

from __future__ import annotations

from worker._session import CreditLedger


def test_a_fresh_session_announces_every_free_slot():
    ledger = CreditLedger()
    assert ledger.to_announce(8) == 8


def test_credits_not_yet_used_are_not_announced_again():
    ledger = CreditLedger()
    ledger.announced(ledger.to_announce(8))
    assert ledger.to_announce(8) == 0  # nothing started, nothing freed: nothing more to ask
    ledger.granted(3)  # three runs took three slots
    assert ledger.to_announce(5) == 0
    assert ledger.to_announce(6) == 1  # one handler returned


def test_outstanding_credits_plus_running_never_exceed_the_slots():
    """Any interleaving of grants and freed slots: announced-but-unused credits never exceed
    the free slots, so the node can never push a run the worker has no slot for."""
    capacity, ledger, running = 4, CreditLedger(), 0
    for step in range(200):
        free = capacity - running
        ledger.announced(ledger.to_announce(free))
        assert ledger.outstanding <= free
        if step % 3 and ledger.outstanding:
            granted = min(ledger.outstanding, 1 + step % 2)
            assert ledger.granted(granted) == 0
            running += granted
        elif running:
            running -= 1  # a handler returned


def test_grants_beyond_the_credits_are_counted_as_over():
    ledger = CreditLedger()
    ledger.announced(2)
    assert ledger.granted(3) == 1
    assert ledger.outstanding == 0


def test_the_node_cap_bounds_what_is_announced():
    ledger = CreditLedger(max_credits=10)
    assert ledger.to_announce(64) == 10
