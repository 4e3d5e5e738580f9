"""Every chaos scenario in its own private namespace; the history checker judges each.

The seed is random per run and printed; CHAOS_SEED=N reruns one. The scenarios run one at a
time (they are timed against a 2-core machine); the long soak is `python -m tests.chaos.launch soak`.
"""

from __future__ import annotations

import pytest

from tests.chaos.launch import chosen_seed, describe, launch

pytestmark = pytest.mark.chaos

CI_SCENARIOS = [
    "kill_leader_enqueue",
    "kill_leader_leasing",
    "isolate_leader",
    "pause_leader",
    "kill_leader_repeatedly",
    "partitions",
    "restart_all",
    "pause_worker",
    "cut_worker",
    "kill_worker",
    "rolling_restart",
]

# pysyncobj 0.3.17 logs this CRITICAL line when a duplicated append (pipelined appends both
# answered "reset") truncates entries a follower already applied; the entries are re-sent
# identical and the digests still agree (replicas_agree checks that). Reproduced on its own
# by test_known_issues.py (strict xfail); tolerated here so the other invariants stay checked.
KNOWN_LOG_ALERTS = ("truncating already-applied log entries",)


def unexpected(verdict: dict) -> list[dict]:
    return [
        v for v in verdict["violations"]
        if not (v["check"] == "clean_logs" and any(known in v["message"] for known in KNOWN_LOG_ALERTS))
    ]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", CI_SCENARIOS)
def test_scenario(name, chaos_ready, tmp_path):
    chosen = chosen_seed()
    print(f"chaos scenario {name} seed {chosen}", flush=True)
    verdict = launch(name, chosen, tmp_path, timeout_s=240)
    assert not verdict["error"] and not unexpected(verdict), describe(verdict)
