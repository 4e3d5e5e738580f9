"""The seeded simulation in CI: many seeds with every fault on, determinism, and planted bugs found."""

from __future__ import annotations

import os
import random

import pytest

from tests.sim.planted import PLANTED
from tests.sim.simulate import SimulationFailure, simulate

CI_SEEDS = 100  # ~40,000 steps, ~20 s on a 2-core machine
PLANT_BUDGET_SEEDS = 40


def test_many_seeds_keep_every_invariant():
    first = int(os.environ["SIM_SEED"]) if os.environ.get("SIM_SEED") else random.randrange(1 << 31)
    print(f"simulation seeds {first}..{first + CI_SEEDS - 1} (rerun one: python -m tests.sim --seed N)")
    steps = 0
    for seed in range(first, first + CI_SEEDS):
        steps += simulate(seed).steps  # SimulationFailure names the seed
    assert steps > 30_000


def test_a_seed_replays_exactly():
    def fingerprint(seed: int) -> tuple:
        outcome = simulate(seed, steps=120)
        return outcome.steps, outcome.entries, sorted(outcome.stats.items())

    assert fingerprint(7) == fingerprint(7)
    assert fingerprint(7) != fingerprint(8)


def test_every_fault_happens():
    seen: dict[str, int] = {}
    for seed in range(10):
        for name, count in simulate(seed).stats.items():
            seen[name] = seen.get(name, 0) + count
    assert {"elections", "crashes", "clock_jumps", "lost", "duplicated"} <= set(seen), seen


def test_faults_reach_every_kind_of_answer():
    """The faults produce what the invariants are about: stale epochs, fenced tokens, repeats."""
    seen: dict[str, int] = {}
    for seed in range(12):
        for key, count in simulate(seed).seen.items():
            seen[key] = seen.get(key, 0) + count
    wanted = [
        "rejected:stale_epoch",
        "LeaseFenced:stale_token",
        "RunAlreadyClaimed:",
        "LeaseGranted:",
        "RunSucceeded:",
        "RunRetryScheduled:",
        "CompletionRepeated:",
        "LeaseStillLive:",
        "RunClaimed:",
        "JobAdded:",
        "JobRemoved:",
        "LeaseNotGranted:resource_busy:db",
        "follow_up:queued",  # a child claimed in the entry that ended its parents' runs
        "follow_up:skipped",  # ... or skipped, naming a parent that did not succeed
        "ClusterVersionRaised:",  # the deadline seeds run at the current log format
        "deadline:missed",  # a watched slot's run had not succeeded by its deadline
        "deadline:succeeded",  # ... or had, and raised nothing
        "deadline:cancelled",  # ... or was cancelled (a `replace` overlap, a kill switch)
        "cancel:accepted",  # an operator cancelled a live run (format-3 seeds)
        "rejected:run_not_live",  # ... or one that had already ended
        "cancelled_lease_fenced",  # a cancelled run's holder reported with its current token
        "final_failure:ended",  # a final failure (declared, or a final exit code) ended its run
        "paused_after_failures",  # a job paused itself at its Nth failed run in a row
        "exclusive_grant:own",  # a trigger's own forbid/queue overlap decided a grant
    ]
    assert [key for key in wanted if not seen.get(key)] == [], seen


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_planted_bug_is_found(bug):
    with PLANTED[bug]():
        for seed in range(PLANT_BUDGET_SEEDS):
            try:
                simulate(seed)
            except SimulationFailure as failure:
                print(f"{bug}: found with seed {seed}: {failure.message}")
                return
    pytest.fail(f"{bug} survived {PLANT_BUDGET_SEEDS} seeds")
