"""Deterministic jitter and the round-instant rule used for herd spreading."""

from __future__ import annotations

import hashlib

import pytest

from scheduler.planning import compile_schedule, jitter_offset_us, lands_on_round_instant

HOUR_US = 3_600_000_000


def test_jitter_values_are_pinned():
    # A change here moves every spread job in every cluster: do it only on purpose.
    assert jitter_offset_us("job-1", HOUR_US) == 3_163_544_053
    assert jitter_offset_us("nightly-backup", HOUR_US) == 918_645_638
    assert jitter_offset_us("ünïcode/job", HOUR_US) == 1_890_679_076
    assert jitter_offset_us("job-1", 60_000_000) == 43_544_053


def test_jitter_is_blake2b_of_the_id_modulo_the_window():
    digest = hashlib.blake2b(b"job-1", digest_size=8, person=b"raftcron.jitter").digest()
    assert jitter_offset_us("job-1", 1_000_003) == int.from_bytes(digest, "big") % 1_000_003


def test_jitter_stays_in_the_window():
    for window_us in (1, 2, 7, 1_000, HOUR_US, 86_400_000_000):
        for index in range(200):
            assert 0 <= jitter_offset_us(f"job-{index}", window_us) < window_us
    assert jitter_offset_us("anything", 0) == 0
    with pytest.raises(ValueError):
        jitter_offset_us("anything", -1)


def test_jitter_spreads_ids_evenly_over_the_window():
    buckets = 20
    ids = 20_000
    counts = [0] * buckets
    for index in range(ids):
        counts[jitter_offset_us(f"tenant-{index % 7}/job-{index}", HOUR_US) * buckets // HOUR_US] += 1
    expected = ids / buckets
    chi_square = sum((count - expected) ** 2 / expected for count in counts)
    # 19 degrees of freedom: the mean is 19 and 60 is far in the tail (p < 1e-5). The input is
    # fixed, so this cannot flake; it fails only if the hash stops spreading.
    assert chi_square < 60, counts


@pytest.mark.parametrize(
    "expr, round_",
    [
        ("0 * * * *", True),
        ("@hourly", True),
        ("@daily", True),
        ("0 9 * * 1-5", True),
        ("0 0 0 * * *", True),
        ("0 */6 * * *", True),
        ("30 2 * * *", False),
        ("0,30 * * * *", False),
        ("*/10 0 * * * *", False),
        ("30 0 * * * *", False),
        ("* * * * *", False),
        ("5 0 * * *", False),
    ],
)
def test_round_instant_means_second_zero_and_minute_exactly_zero(expr, round_):
    assert lands_on_round_instant(compile_schedule(expr)) is round_
