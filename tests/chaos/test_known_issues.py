"""Known issues, each a strict xfail: it fails today; when it passes, remove the marker."""

from __future__ import annotations

import pytest

from tests.chaos.launch import chosen_seed, describe, launch

pytestmark = pytest.mark.chaos


@pytest.mark.timeout(300)
@pytest.mark.xfail(strict=True, reason=(
    "pysyncobj 0.3.17: under packet loss a leader's pipelined appends are both answered 'reset', "
    "it re-sends the same range twice, and the second copy makes the follower truncate (and re-append) "
    "entries it already applied, logging CRITICAL 'truncating already-applied log entries'. "
    "DESIGN.md says to fail on that line."
))
def test_lossy_links_log_no_truncation_of_applied_entries(chaos_ready, tmp_path):
    chosen = chosen_seed()
    print(f"chaos scenario lossy_until_truncation seed {chosen}", flush=True)
    verdict = launch("lossy_until_truncation", chosen, tmp_path, timeout_s=240)
    assert not verdict["error"], describe(verdict)
    assert not verdict["violations"], describe(verdict)
