"""`python -m bench NAME [options]`: run one benchmark (see bench/README.md); `all` runs each in turn."""

from __future__ import annotations

import importlib
import signal
import sys
import time

BENCHMARKS = {
    "grpc_raw": "bench.grpc_raw",
    "claims": "bench.claims",
    "execution": "bench.execution",
    "herd": "bench.herd",
    "fire_lateness": "bench.fire_lateness",
    "failover": "bench.failover",
    "scale": "bench.scale",
    "history": "bench.history",
    "state_memory": "bench.state_memory",
    "listing": "bench.listing",
    "journal": "bench.journal",
    "planning": "bench.planning",
    "groups": "bench.groups",
    "apply_path": "bench.apply_path",
}


ALL_USAGE = "usage: python -m bench all [--quick]   runs every benchmark in turn; Ctrl-C stops the run"


def run_all(argv: list[str]) -> int:
    """Every benchmark in turn with the same flags (only --quick makes sense for all); the worst status."""
    if any(a in ("-h", "--help") for a in argv):
        print(ALL_USAGE, file=sys.stderr)
        return 0
    if unknown := [a for a in argv if a != "--quick"]:
        print(f"bench all: unknown option(s) {' '.join(unknown)}\n{ALL_USAGE}", file=sys.stderr)
        return 2
    flags = list(argv)
    statuses = {}
    interrupted = []

    def on_interrupt(signum, frame):
        # A benchmark may catch KeyboardInterrupt to clean up and return; the run still stops.
        interrupted.append(signum)
        signal.default_int_handler(signum, frame)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        for name, module_name in BENCHMARKS.items():
            print(f"\n=== bench {name} {' '.join(flags)} ===", file=sys.stderr, flush=True)
            started = time.monotonic()
            try:
                statuses[name] = importlib.import_module(module_name).main(list(flags))
            except KeyboardInterrupt:
                interrupted.append(signal.SIGINT)
            if interrupted:
                statuses[name] = 130
                break
            print(
                f"=== bench {name}: exit {statuses[name]} after {time.monotonic() - started:.0f}s ===",
                file=sys.stderr,
                flush=True,
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    print("\nbench all: " + ", ".join(f"{k}={v}" for k, v in statuses.items()), file=sys.stderr)
    return 130 if 130 in statuses.values() else max(statuses.values(), default=0)


def main(argv: list[str]) -> int:
    names = ["all", *BENCHMARKS]
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in names:
        print("usage: python -m bench {" + ",".join(names) + "} [--quick] [options]", file=sys.stderr)
        print("       python -m bench NAME --help   lists a benchmark's options", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    if argv[0] == "all":
        return run_all(argv[1:])
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
