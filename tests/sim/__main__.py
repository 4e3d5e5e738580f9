"""python -m tests.sim --seeds 1000 [--start N] [--steps 300] [--plant NAME]: a long simulation run.

Runs seeds start..start+seeds-1, prints a line per failure (with the seed to rerun) and a
summary; exits 1 if any seed failed. `--seed N` reruns one seed and shows the whole failure.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time

from tests.sim.planted import PLANTED
from tests.sim.simulate import SimulationFailure, simulate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim")
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=None, help="first seed (default: random)")
    parser.add_argument("--seed", type=int, default=None, help="run this one seed only")
    parser.add_argument("--steps", type=int, default=300, help="faulty steps per seed, before the quiesce")
    parser.add_argument("--plant", choices=sorted(PLANTED), help="plant a known bug in the core first")
    options = parser.parse_args(argv)
    if options.seed is not None:
        first, count = options.seed, 1
    else:
        first, count = (options.start if options.start is not None else random.randrange(1 << 31)), options.seeds
    print(f"simulation seeds {first}..{first + count - 1}, {options.steps} steps each", flush=True)
    started, steps, entries, failures = time.perf_counter(), 0, 0, 0
    with PLANTED[options.plant]() if options.plant else contextlib.nullcontext():
        for seed in range(first, first + count):
            try:
                outcome = simulate(seed, steps=options.steps)
            except SimulationFailure as failure:
                failures += 1
                print(failure, flush=True)
                continue
            steps, entries = steps + outcome.steps, entries + outcome.entries
    print(
        f"{count - failures}/{count} seeds passed, {steps} steps, {entries} log entries, "
        f"{time.perf_counter() - started:.1f}s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
