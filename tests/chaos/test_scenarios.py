"""Every chaos scenario in its own private namespace; the history checker judges each.

The seed is random per run and printed; CHAOS_SEED=N reruns one. The scenarios run one at a
time (they are timed against a 2-core machine); the long soak is `python -m tests.chaos.launch soak`.
"""

from __future__ import annotations

import os
import random

import pytest

from tests.chaos.launch import describe, launch

pytestmark = pytest.mark.chaos

CI_SCENARIOS = [
    "kill_leader_enqueue",
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", CI_SCENARIOS)
def test_scenario(name, chaos_ready, tmp_path):
    seed = int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED") else random.randrange(1 << 32)
    print(f"chaos scenario {name} seed {seed}", flush=True)
    verdict = launch(name, seed, tmp_path, timeout_s=240)
    assert verdict["ok"], describe(verdict)
