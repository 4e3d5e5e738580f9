"""Every chaos scenario in its own private namespace; the history checker judges each.

The seed is random per run and printed; CHAOS_SEED=N reruns one. The scenarios run one at a
time (they are timed against a 2-core machine). The long soak, not run here:
`python -m tests.chaos.run soak --minutes N`.
"""

from __future__ import annotations

import pytest

from tests.chaos.launch import chosen_seed, describe, launch, passed

pytestmark = pytest.mark.chaos

CI_SCENARIOS = [
    "kill_leader_enqueue",
    "kill_leader_leasing",
    "isolate_leader",
    "pause_leader",
    "kill_leader_repeatedly",
    "partitions",
    "lossy_phases",
    "restart_all",
    "power_loss",
    "minority_partition",
    "pause_worker",
    "kill_worker",
    "rolling_restart",
    "disk_full",
    "clock_skew",
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", CI_SCENARIOS)
def test_scenario(name, chaos_ready, tmp_path):
    chosen = chosen_seed()
    print(f"chaos scenario {name} seed {chosen}", flush=True)
    verdict = launch(name, chosen, tmp_path, timeout_s=240)
    assert passed(verdict), describe(verdict)


@pytest.mark.timeout(300)
def test_power_loss_without_syncing_loses_acknowledged_writes(chaos_ready, tmp_path):
    """The power_loss scenario can fail: with syncing off, the checker finds what was lost."""
    chosen = chosen_seed()
    print(f"chaos scenario power_loss_unsynced seed {chosen}", flush=True)
    verdict = launch("power_loss_unsynced", chosen, tmp_path, timeout_s=240)
    assert not verdict.get("error"), describe(verdict)
    lost = [v for v in verdict["violations"] if v["check"] == "acked_durable"]
    assert lost, describe(verdict)
